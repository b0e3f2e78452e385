#!/usr/bin/env bash
# Builds the real control plane used by the integration tests (the "envtest approach"):
# kube-apiserver and etcd, compiled from the Go module proxy with the local Go toolchain.
# Output: ${GW_TEST_CACHE:-$HOME/.cache/gw-test}/bin/{kube-apiserver,etcd}, outside the repo.
# Idempotent: a stamp file per binary holds the version; a version bump rebuilds.
set -euo pipefail

K8S_VERSION=v1.35.4     # k8s.io/kubernetes; staging modules k8s.io/* pinned to v0.35.4
ETCD_VERSION=v3.6.16    # go.etcd.io/etcd/server/v3 (k8s 1.35 ships etcd 3.6.x)

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
build_kubectl() {
  kube_wrapper
  (cd "$KDIR" && go build -trimpath -ldflags "$KLDFLAGS" -o "$BIN/kubectl" k8s.io/kubernetes/cmd/kubectl)
  echo "$K8S_VERSION" >"$BIN/.kubectl.version"
}

build_etcd() {
  local dir="$SRC/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  printf 'module gwtest/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$dir/go.mod"
  # The main package of etcd 3.5+/3.6 is the server module root (server/main.go).
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
  echo "$ETCD_VERSION" >"$BIN/.etcd.version"
}

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
