#!/usr/bin/env bash
# `make e2e`: the end-to-end suite (test/e2e/) on the one-node cluster of test/servers/cluster.sh.
#   e2e.sh check   exit 0 when this machine can run it, else one line naming the failed check (exit 1)
#   e2e.sh if-possible   as below where check passes; else that one line, exit 0 (make test)
#   e2e.sh         check, take the machine's cluster lock, build what is missing (cluster binaries, images), start the cluster, run the
#                  suite inside the cluster's network namespace, stop the cluster whatever happened
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${GW_TEST_CACHE:-$HOME/.cache/gw-test}"

check() {
  [[ $(id -u) -eq 0 ]] || { echo "not root"; return 1; }
  [[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || { echo "no memory cgroup mounted"; return 1; }
  if [[ -f /sys/fs/cgroup/cgroup.controllers && ! -d /sys/fs/cgroup/memory ]]; then
    echo "cgroup v2 only (the cluster's kubelet and pod figures are set up for cgroup v1)"
    return 1
  fi
  grep -qw overlay /proc/filesystems || { echo "no overlayfs in /proc/filesystems"; return 1; }
  unshare --net true 2>/dev/null || { echo "cannot create a network namespace"; return 1; }
  # grep reads all of apt-cache's output (-q would exit at the match: SIGPIPE, a failed pipeline under pipefail)
  command -v containerd >/dev/null || apt-cache policy containerd 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null \
    || { echo "containerd neither installed nor installable (apt-get install containerd)"; return 1; }
  command -v go >/dev/null || [[ -x "$CACHE/bin/kubelet" ]] || { echo "no Go toolchain to build the kubelet"; return 1; }
}

if [[ "${1:-}" == check ]]; then
  why=$(check) || { echo "$why"; exit 1; }
  exit 0
fi
# `make test`: the suite runs where the machine allows it; elsewhere one line says why, and make test goes on.
mode=${1:-all}
if [[ "$mode" == if-possible ]]; then
  if ! why=$(check); then
    echo "e2e: not run: $why (the end-to-end suite needs root, cgroup v1, overlayfs and network namespaces; make e2e fails with this line)"
    exit 0
  fi
fi
if ! why=$(check); then
  echo "e2e: not run: $why" >&2
  exit 1
fi

# One cluster at a time on a machine (fixed netns, bridge, state directory and kubepods cgroups).
exec 9>/tmp/gw-cluster.lock
flock 9
t0=$SECONDS
bash "$ROOT/test/servers/build.sh" cluster >/dev/null
bash "$ROOT/test/servers/build-tools.sh" >/dev/null
bash "$ROOT/test/servers/build-images.sh"
echo "e2e: binaries and images ready in $((SECONDS - t0)) s"
trap 'bash "$ROOT/test/servers/cluster.sh" down' EXIT
t1=$SECONDS
bash "$ROOT/test/servers/cluster.sh" up
echo "e2e-figure: cluster start: $((SECONDS - t1)) s"
t2=$SECONDS
set -a && . "${GW_E2E_RUN:-/var/lib/gw-e2e}/env" && set +a
node_bin=$(bash "$ROOT/scripts/ensure-node.sh")
# GW_E2E_FILES picks suites (default: all of dist/test/e2e/*.e2e.js, one after another, each on a clean slate;
# under `make test`, the install-to-uninstall suite only: the day-2 suite adds ~5 min and runs under `make e2e`, docs/testing.md)
if [[ "$mode" == if-possible ]]; then default="$ROOT/dist/test/e2e/cluster.e2e.js"; else default=$(ls "$ROOT"/dist/test/e2e/*.e2e.js | tr '\n' ' '); fi
read -ra files <<<"${GW_E2E_FILES:-$default}"
bash "$ROOT/test/servers/cluster.sh" exec "$node_bin/node" --test --test-concurrency=1 --test-timeout=1200000 \
  "${files[@]}"
echo "e2e-figure: suite: $((SECONDS - t2)) s; total with builds: $((SECONDS - t0)) s"
