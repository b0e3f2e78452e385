#!/usr/bin/env bash
# A one-node Kubernetes cluster for `make e2e` (test/e2e/), all of it inside a network namespace this
# script creates (`gw-e2e`: loopback + one bridge, no uplink, no route out), so its iptables rules,
# bridge and addresses vanish with it:
#   etcd, kube-apiserver (RBAC,Node authorizers, ServiceAccount tokens, default admission plugins),
#   kube-controller-manager, kube-scheduler, kube-proxy (iptables), CoreDNS (cluster.local), and the
#   node: containerd (Debian's 1.6, runc, overlayfs) + kubelet, in a private mount namespace of their own
#   so every mount they make (the kubelet's root bind mount, /run/netns, pod volumes) goes with them.
# Pods are on the CNI bridge gwbr0 (10.244.0.0/24, gateway 10.244.0.1 = the node, ipMasq false);
# Services in 10.96.0.0/24; DNS at 10.244.0.1:53. Images come from the OCI archives of `make image`.
#
#   cluster.sh up     start it (idempotent: a running cluster is stopped first); prints its env file
#   cluster.sh down   stop everything and remove what it made (processes, mounts, netns, cgroups)
#   cluster.sh exec CMD...   run CMD inside the cluster's network namespace with KUBECONFIG set
# Binaries: bash test/servers/build.sh cluster (cached in ${GW_TEST_CACHE:-~/.cache/gw-test}/bin).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${GW_TEST_CACHE:-$HOME/.cache/gw-test}"
BIN="$CACHE/bin"
IMAGES="$CACHE/images"
RUN="${GW_E2E_RUN:-/var/lib/gw-e2e}"
NS=gw-e2e
BR=gwbr0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SVC_CIDR=10.96.0.0/24
NODE=gw-node
IN_NS=(nsenter "--net=/run/netns/$NS")

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# wait_for SECONDS WHAT CMD...: CMD polled every 0.5 s until it succeeds; fails naming WHAT and a log.
wait_for() {
  local secs=$1 what=$2 i
  shift 2
  for ((i = 0; i < secs * 2; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  log "$what not ready after ${secs}s"
  return 1
}

pids_of_mntns() { # every process whose mount namespace is the node's (containerd, kubelet, shims, containers)
  local want=$1 p
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/ns/mnt" 2>/dev/null)" == "$want" ]] && echo "${p#/proc/}"
  done
  return 0
}

down() {
  local t0=$SECONDS
  if [[ -f "$RUN/node.mntns" ]]; then
    local mnt
    mnt=$(cat "$RUN/node.mntns")
    # Pods first, gracefully, while the kubelet still runs (bounded): then the node's processes.
    if [[ -f "$RUN/admin.kubeconfig" ]] && [[ -e "/run/netns/$NS" ]]; then
      timeout 60 "${IN_NS[@]}" "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" delete pods --all -A \
        --grace-period=5 --wait=true --timeout=50s >/dev/null 2>&1 || true
    fi
    local sig pids
    for sig in TERM KILL; do
      pids=$(pids_of_mntns "$mnt")
      [[ -z "$pids" ]] && break
      # shellcheck disable=SC2086
      kill -s "$sig" $pids 2>/dev/null || true
      for _ in $(seq 1 20); do [[ -z "$(pids_of_mntns "$mnt")" ]] && break; sleep 0.5; done
    done
    [[ -n "$(pids_of_mntns "$mnt")" ]] && log "warning: node processes still alive: $(pids_of_mntns "$mnt" | tr '\n' ' ')"
  fi
  local f pid
  for f in "$RUN"/pids/*; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
  done
  for f in "$RUN"/pids/*; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f")
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  # Mounts made outside the node's mount namespace (none expected): anything still under $RUN.
  local m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(awk -v r="$RUN/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r)
  # The kubelet's cgroups (cgroupfs driver): empty once its pods are gone.
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [[ -d "$d" ]] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  if [[ -e "/run/netns/$NS" ]]; then ip netns delete "$NS" 2>/dev/null || true; fi
  for f in /run/netns/cni-*; do
    [[ -e "$f" ]] && grep -q " $f " /proc/mounts 2>/dev/null && umount "$f" 2>/dev/null
    [[ -e "$f" ]] && rm -f "$f" 2>/dev/null
  done
  rm -rf "$RUN/kubelet" "$RUN/containerd" "$RUN/etcd" "$RUN/node.mntns" "$RUN/pids"
  log "stopped in $((SECONDS - t0)) s"
}

certs() {
  local d="$RUN/pki"
  mkdir -p "$d"
  [[ -f "$d/ca.crt" ]] && return 0
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=gw-e2e-ca" -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  cat >"$d/apiserver.ext" <<X
subjectAltName=IP:10.96.0.1,IP:$NODE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost
X
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$d/apiserver.key" -out "$d/apiserver.csr" 2>/dev/null
  openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 30 \
    -extfile "$d/apiserver.ext" -out "$d/apiserver.crt" 2>/dev/null
  # The apiserver's client certificate towards the kubelet (logs, exec, port-forward).
  openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
    -keyout "$d/kubelet-client.key" -out "$d/kubelet-client.csr" 2>/dev/null
  openssl x509 -req -in "$d/kubelet-client.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 30 \
    -out "$d/kubelet-client.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

kubeconfig() { # kubeconfig NAME TOKEN
  cat >"$RUN/$1.kubeconfig" <<K
apiVersion: v1
kind: Config
clusters: [{name: gw-e2e, cluster: {server: "https://$NODE_IP:6443", certificate-authority: "$RUN/pki/ca.crt"}}]
users: [{name: $1, user: {token: "$2"}}]
contexts: [{name: $1, context: {cluster: gw-e2e, user: $1}}]
current-context: $1
K
}

launch() { # launch NAME CMD...: in the cluster's netns, logs in $RUN/logs/NAME.log
  "${IN_NS[@]}" "$@" >>"$RUN/logs/$1.log" 2>&1 &
  echo $! >"$RUN/pids/$1"
}
# (launch's first argument is the binary path; its basename names the log)
start() {
  local name=$1
  shift
  "${IN_NS[@]}" "$@" >>"$RUN/logs/$name.log" 2>&1 &
  echo $! >"$RUN/pids/$name"
}

api_ready() { "${IN_NS[@]}" "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" get --raw /readyz; }

up() {
  [[ $(id -u) -eq 0 ]] || die "needs root (network namespace, mounts, cgroups)"
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl coredns helm; do
    [[ -x "$BIN/$b" ]] || die "$BIN/$b missing: run bash test/servers/build.sh cluster"
  done
  for i in gw pause echo redis; do
    [[ -f "$IMAGES/$i.oci.tar" ]] || die "$IMAGES/$i.oci.tar missing: run make image"
  done
  bash "$ROOT/test/servers/install-debian.sh" containerd:containerd runc:runc iptables:iptables \
    /usr/lib/cni/bridge:containernetworking-plugins conntrack:conntrack
  [[ -x /usr/lib/cni/bridge ]] || bash "$ROOT/test/servers/install-debian.sh" nonexistent-cni:containernetworking-plugins || true
  down >/dev/null 2>&1 || true
  local t0=$SECONDS
  mkdir -p "$RUN"/{logs,pids,cni,kubelet,containerd} && rm -f "$RUN"/logs/*.log
  certs

  # The network namespace: lo + the bridge (the node's address on it); forwarding only between pods.
  ip netns add "$NS"
  "${IN_NS[@]}" ip link set lo up
  "${IN_NS[@]}" ip link add "$BR" type bridge
  "${IN_NS[@]}" ip addr add "$NODE_IP/24" dev "$BR"
  "${IN_NS[@]}" ip link set "$BR" up
  # the node's own connections to Services (the API server calling the webhook): routed to the bridge,
  # where kube-proxy's DNAT sends them to a pod
  "${IN_NS[@]}" ip route add "$SVC_CIDR" dev "$BR" src "$NODE_IP"
  "${IN_NS[@]}" sysctl -q -w net.ipv4.ip_forward=1
  # bridged pod-to-pod packets through iptables, so Service DNAT is undone on the way back
  sysctl -q -w net.bridge.bridge-nf-call-iptables=1 || log "warning: bridge-nf-call-iptables not settable"

  local admin cm sched node proxy dns
  admin=$(openssl rand -hex 16) cm=$(openssl rand -hex 16) sched=$(openssl rand -hex 16)
  node=$(openssl rand -hex 16) proxy=$(openssl rand -hex 16) dns=$(openssl rand -hex 16)
  cat >"$RUN/pki/tokens.csv" <<T
$admin,gw-admin,gw-admin,"system:masters"
$cm,system:kube-controller-manager,system:kube-controller-manager
$sched,system:kube-scheduler,system:kube-scheduler
$node,system:node:$NODE,system:node:$NODE,"system:nodes"
$proxy,system:kube-proxy,system:kube-proxy
$dns,gw-coredns,gw-coredns
T
  kubeconfig admin "$admin"
  kubeconfig controller-manager "$cm"
  kubeconfig scheduler "$sched"
  kubeconfig kubelet "$node"
  kubeconfig kube-proxy "$proxy"
  kubeconfig coredns "$dns"

  start etcd "$BIN/etcd" --name=gw --data-dir="$RUN/etcd" --listen-client-urls=http://127.0.0.1:2379 \
    --advertise-client-urls=http://127.0.0.1:2379 --listen-peer-urls=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 --initial-cluster=gw=http://127.0.0.1:2380 \
    --unsafe-no-fsync --log-level=warn
  start kube-apiserver "$BIN/kube-apiserver" --bind-address=0.0.0.0 --advertise-address="$NODE_IP" --secure-port=6443 \
    --etcd-servers=http://127.0.0.1:2379 --tls-cert-file="$RUN/pki/apiserver.crt" --tls-private-key-file="$RUN/pki/apiserver.key" \
    --client-ca-file="$RUN/pki/ca.crt" --token-auth-file="$RUN/pki/tokens.csv" --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local --service-account-key-file="$RUN/pki/sa.pub" \
    --service-account-signing-key-file="$RUN/pki/sa.key" --service-cluster-ip-range="$SVC_CIDR" \
    --kubelet-client-certificate="$RUN/pki/kubelet-client.crt" --kubelet-client-key="$RUN/pki/kubelet-client.key" --kubelet-preferred-address-types=InternalIP \
    --enable-admission-plugins=NodeRestriction --allow-privileged=false --profiling=false
  wait_for 90 kube-apiserver api_ready || { tail -20 "$RUN/logs/kube-apiserver.log" >&2; exit 1; }
  "${IN_NS[@]}" "$BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" create clusterrolebinding gw-coredns \
    --clusterrole=view --user=gw-coredns >/dev/null

  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$RUN/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$RUN/controller-manager.kubeconfig" --authorization-kubeconfig="$RUN/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$RUN/pki/sa.key" --root-ca-file="$RUN/pki/ca.crt" \
    --cluster-signing-cert-file="$RUN/pki/ca.crt" --cluster-signing-key-file="$RUN/pki/ca.key" \
    --controllers='*,-nodeipam,-cloud-node-lifecycle' --profiling=false
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$RUN/scheduler.kubeconfig" \
    --authentication-kubeconfig="$RUN/scheduler.kubeconfig" --authorization-kubeconfig="$RUN/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false

  # CoreDNS on the node's bridge address (the kubelet's clusterDNS): cluster.local only, nothing forwarded.
  cat >"$RUN/Corefile" <<C
.:53 {
  bind $NODE_IP
  errors
  kubernetes cluster.local in-addr.arpa {
    kubeconfig $RUN/coredns.kubeconfig coredns
    pods insecure
  }
  cache 5
  ready 127.0.0.1:8181
}
C
  start coredns "$BIN/coredns" -conf "$RUN/Corefile"

  # kube-proxy: iptables mode; conntrack sysctls left as they are (not settable here).
  cat >"$RUN/kube-proxy.yaml" <<P
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$RUN/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
P
  start kube-proxy "$BIN/kube-proxy" --config="$RUN/kube-proxy.yaml"

  # The node: containerd + kubelet in one private mount namespace.
  cat >"$RUN/cni/10-gw.conflist" <<N
{"cniVersion": "0.4.0", "name": "gw-e2e", "plugins": [
  {"type": "bridge", "bridge": "$BR", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP", "rangeStart": "10.244.0.10"}]],
            "routes": [{"dst": "$POD_CIDR"}, {"dst": "$SVC_CIDR"}], "dataDir": "$RUN/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
N
  cat >"$RUN/containerd.toml" <<T
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
[grpc]
  address = "$RUN/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/gw-test/pause:1"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni"
T
  printf 'search cluster.local\n' >"$RUN/resolv.conf"
  cat >"$RUN/kubelet.yaml" <<K
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
address: $NODE_IP
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
clusterDomain: cluster.local
clusterDNS: [$NODE_IP]
resolvConf: $RUN/resolv.conf
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$RUN/pki/ca.crt"}
authorization: {mode: Webhook}
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 60
containerLogMaxSize: 10Mi
localStorageCapacityIsolation: false
K
  cat >"$RUN/node.sh" <<S
#!/usr/bin/env bash
# containerd and the kubelet of gw-e2e, in this private mount namespace (mounts die with it).
mount --make-rprivate /
readlink /proc/self/ns/mnt >"$RUN/node.mntns"
mkdir -p /run/netns
mount -t tmpfs tmpfs /run/netns
containerd --config "$RUN/containerd.toml" >>"$RUN/logs/containerd.log" 2>&1 &
for i in \$(seq 1 120); do [ -S "$RUN/containerd/containerd.sock" ] && ctr --address "$RUN/containerd/containerd.sock" version >/dev/null 2>&1 && break; sleep 0.5; done
for img in $IMAGES/pause.oci.tar $IMAGES/gw.oci.tar $IMAGES/echo.oci.tar $IMAGES/redis.oci.tar; do
  ctr --address "$RUN/containerd/containerd.sock" -n k8s.io images import --no-unpack=false "\$img" >>"$RUN/logs/images.log" 2>&1 || echo "import failed: \$img" >>"$RUN/logs/images.log"
done
echo imported >"$RUN/images.done"
exec "$BIN/kubelet" --config="$RUN/kubelet.yaml" --kubeconfig="$RUN/kubelet.kubeconfig" --root-dir="$RUN/kubelet" \
  --container-runtime-endpoint="unix://$RUN/containerd/containerd.sock" --hostname-override=$NODE --node-ip=$NODE_IP \
  >>"$RUN/logs/kubelet.log" 2>&1
S
  rm -f "$RUN/images.done"
  "${IN_NS[@]}" unshare --mount --propagation private bash "$RUN/node.sh" &
  echo $! >"$RUN/pids/node"
  local k="${IN_NS[*]} $BIN/kubectl --kubeconfig $RUN/admin.kubeconfig"
  wait_for 180 "the node" bash -c "$k get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" \
    || { tail -20 "$RUN/logs/kubelet.log" "$RUN/logs/containerd.log" >&2; exit 1; }
  wait_for 60 "the default ServiceAccount" bash -c "$k get serviceaccount default -n default"
  wait_for 30 CoreDNS "${IN_NS[@]}" bash -c "exec 3<>/dev/tcp/127.0.0.1/8181 && printf 'GET /ready HTTP/1.0\r\n\r\n' >&3 && grep -q 200 <&3"
  cat >"$RUN/env" <<E
KUBECONFIG=$RUN/admin.kubeconfig
GW_E2E_RUN=$RUN
GW_E2E_NETNS=$NS
GW_E2E_KUBECTL=$BIN/kubectl
GW_E2E_HELM=$BIN/helm
E
  log "up in $((SECONDS - t0)) s (node $NODE Ready; env: $RUN/env)"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  exec)
    shift
    KUBECONFIG="$RUN/admin.kubeconfig" exec "${IN_NS[@]}" "$@"
    ;;
  *) die "usage: cluster.sh up|down|exec CMD..." ;;
esac
