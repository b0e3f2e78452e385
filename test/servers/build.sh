#!/usr/bin/env bash
# Builds the real control plane used by the integration tests (the "envtest approach"):
# kube-apiserver and etcd, compiled from the Go module proxy with the local Go toolchain.
# Output: ${GW_TEST_CACHE:-$HOME/.cache/gw-test}/bin/{kube-apiserver,etcd}, outside the repo.
# Idempotent: a stamp file per binary holds the version; a version bump rebuilds.
set -euo pipefail

K8S_VERSION=v1.35.4     # k8s.io/kubernetes; staging modules k8s.io/* pinned to v0.35.4
ETCD_VERSION=v3.6.16    # go.etcd.io/etcd/server/v3 (k8s 1.35 ships etcd 3.6.x)
COREDNS_VERSION=v1.14.7 # github.com/coredns/coredns, for Service names in the one-node cluster

CACHE="${GW_TEST_CACHE:-$HOME/.cache/gw-test}"
BIN="$CACHE/bin"
SRC="$CACHE/src"
mkdir -p "$BIN" "$SRC"

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off

need_go() { # the wrappers say `go 1.26` and GOTOOLCHAIN=local: the machine's Go must be >= 1.26
  if ! command -v go >/dev/null 2>&1; then
    echo "gw: building kube-apiserver/etcd for the tests needs the Go toolchain (>= 1.26) on PATH" >&2
    exit 1
  fi
  local v major minor
  v=$(go env GOVERSION); v=${v#go}; major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  if [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt 26 ]; }; then
    echo "gw: Go $v is too old to build kube-apiserver $K8S_VERSION / etcd $ETCD_VERSION (need >= 1.26)" >&2
    exit 1
  fi
}

fresh() { # fresh NAME VERSION: binary exists and its stamp matches
  [[ -x "$BIN/$1" && "$(cat "$BIN/.$1.version" 2>/dev/null)" == "$2" ]]
}

# The wrapper module for k8s.io/kubernetes binaries; sets KDIR and KLDFLAGS.
kube_wrapper() {
  local dir="$SRC/kubernetes-$K8S_VERSION" staging="v0.${K8S_VERSION#v1.}"
  mkdir -p "$dir"
  printf 'module gwtest/kube\n\ngo 1.25\n\nrequire k8s.io/kubernetes %s\n' "$K8S_VERSION" >"$dir/go.mod"
  # k8s.io/kubernetes requires its staging repos at v0.0.0: pin each to the published v0.N.x.
  local gomod
  gomod="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')"
  {
    echo 'replace ('
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$gomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
    echo ')'
  } >>"$dir/go.mod"
  local pkg=k8s.io/component-base/version minor="${K8S_VERSION#v1.}"
  minor="${minor%%.*}"
  local ld="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  KDIR=$dir
  KLDFLAGS=$ld
}

build_kube_apiserver() {
  kube_wrapper
  (cd "$KDIR" && go build -trimpath -ldflags "$KLDFLAGS" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  echo "$K8S_VERSION" >"$BIN/.kube-apiserver.version"
}

# kubectl for the tests, only on a machine without one (the tests prefer this one when it exists).
build_kubectl() { build_kube kubectl; }

# build_kube NAME: any k8s.io/kubernetes/cmd/NAME from the same wrapper (the one-node cluster of
# test/e2e needs kubelet, kube-controller-manager, kube-scheduler and kube-proxy).
build_kube() {
  kube_wrapper
  (cd "$KDIR" && go build -trimpath -ldflags "$KLDFLAGS" -o "$BIN/$1" "k8s.io/kubernetes/cmd/$1")
  echo "$K8S_VERSION" >"$BIN/.$1.version"
}

build_etcd() {
  local dir="$SRC/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  printf 'module gwtest/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$dir/go.mod"
  # The main package of etcd 3.5+/3.6 is the server module root (server/main.go).
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
  echo "$ETCD_VERSION" >"$BIN/.etcd.version"
}

# CoreDNS with only the plugins the one-node cluster's Corefile uses (test/servers/cluster.sh): a main
# package that registers those plugins and runs coremain, so the build skips the cloud plugins' modules.
build_coredns() {
  local dir="$SRC/coredns-$COREDNS_VERSION"
  mkdir -p "$dir"
  printf 'module gwtest/coredns\n\ngo 1.26\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" >"$dir/go.mod"
  cat >"$dir/main.go" <<'GO'
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
GO
  (cd "$dir" && go mod tidy >/dev/null && go build -trimpath -ldflags "-s -w" -o "$BIN/coredns" .)
  echo "$COREDNS_VERSION+bind,cache,errors,health,kubernetes,log,ready" >"$BIN/.coredns.version"
}

# `build.sh cluster`: also the node and control-plane binaries of the one-node cluster (make e2e).
if [[ "${1:-}" == cluster ]]; then
  for name in kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    fresh "$name" "$K8S_VERSION" || { need_go; build_kube "$name"; }
  done
  fresh coredns "$COREDNS_VERSION+bind,cache,errors,health,kubernetes,log,ready" || { need_go; build_coredns; }
fi

fresh kube-apiserver "$K8S_VERSION" || { need_go; build_kube_apiserver; }
fresh etcd "$ETCD_VERSION" || { need_go; build_etcd; }
if [[ -e "$BIN/kubectl" || "${GW_TEST_BUILD_KUBECTL:-}" == 1 ]] || ! command -v kubectl >/dev/null 2>&1; then
  fresh kubectl "$K8S_VERSION" || { need_go; build_kubectl; }
fi

echo "kube-apiserver: $("$BIN/kube-apiserver" --version 2>&1)  ($BIN/kube-apiserver)"
echo "etcd:           $("$BIN/etcd" --version 2>&1 | head -1)  ($BIN/etcd)"
if [[ -x "$BIN/kubectl" ]]; then
  echo "kubectl:        $("$BIN/kubectl" version --client 2>&1 | head -1)  ($BIN/kubectl)"
else
  echo "kubectl:        $(kubectl version --client 2>&1 | head -1)  ($(command -v kubectl))"
fi
