# Shared settings and helpers of the test cluster's scripts (sourced, never run).
#
# Where things are:
#   $CLUSTER_DIR (default /var/lib/kubevirt-rs/cluster)  all of a running cluster's state: PKI,
#       kubeconfigs, etcd's data, logs, pid files, and one folder per node (nodes/<name>/) with the
#       node's kubelet, containerd and CNI state. `make cluster-down` removes it.
#   $CLUSTER_BIN (default /var/cache/kubevirt-rs/cluster/bin)  the binaries cluster/build.sh made,
#       kept between clusters.
#
# The network: the control plane runs in the host's namespaces; the API server listens on the
# host's address of the bridge $CLUSTER_BRIDGE, etcd, the scheduler and the controller manager on
# loopback. Node N is a network, mount and PID namespace of its own, linked to the bridge by a veth
# pair with address 10.240.0.(N+1), whose pods get 10.244.N.0/24 on a bridge of the node's own.
# Each node routes the other nodes' pod ranges to them across the bridge, so pod-to-pod traffic
# never passes through the host's IP stack (the host forwards nothing).
#
#   NODES (default 2, 1 to 9)  how many nodes `make cluster` runs

CLUSTER_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER_SRC=$CLUSTER_REPO/cluster
KUBEVIRT_RS_CACHE=${KUBEVIRT_RS_CACHE:-/var/cache/kubevirt-rs}
CLUSTER_BIN=${KUBEVIRT_RS_CLUSTER_BIN:-$KUBEVIRT_RS_CACHE/cluster/bin}
CLUSTER_DIR=${KUBEVIRT_RS_CLUSTER_DIR:-/var/lib/kubevirt-rs/cluster}
CLUSTER_PKI=$CLUSTER_DIR/pki
CLUSTER_LOGS=$CLUSTER_DIR/logs
CLUSTER_PIDS=$CLUSTER_DIR/pids
ADMIN_KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig

CLUSTER_BRIDGE=kubevirt-rs0
CLUSTER_HOST_IP=10.240.0.1
CLUSTER_NODE_PREFIX=24
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1
POD_CIDR=10.244.0.0/16
APISERVER_PORT=6443
ETCD_CLIENT_URL=https://127.0.0.1:2379
# The DNS add-on's Service (CoreDNS), which every kubelet gives its pods as their nameserver.
CLUSTER_DNS_IP=10.96.0.10
CLUSTER_DOMAIN=cluster.local
COREDNS_IMAGE=localhost/kubevirt-rs/coredns:latest

# How many nodes the cluster runs: NODES, 1 to 9 (the addresses above leave room for nine).
cluster_nodes() {
    local nodes=${NODES:-2}
    [[ "$nodes" =~ ^[1-9]$ ]] || die "NODES=$nodes: give a number of nodes from 1 to 9"
    echo "$nodes"
}

say() { echo "cluster: $*"; }
die() { echo "cluster: $*" >&2; exit 1; }

# The Kubernetes release the wrapper module pins (v1.34.4).
kubernetes_version() {
    awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$CLUSTER_SRC/kubernetes/go.mod"
}

# The k8s.io/kubernetes module's folder in Go's module cache (downloaded when missing).
kubernetes_module_dir() {
    (cd "$CLUSTER_SRC/kubernetes" && go mod download k8s.io/kubernetes && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
}

node_name() { echo "node$1"; }
node_ip() { echo "10.240.0.$(($1 + 1))"; }
node_pod_cidr() { echo "10.244.$1.0/24"; }
node_netns() { echo "kubevirt-rs-node$1"; }
node_host_veth() { echo "kvrs-node$1"; }
node_dir() { echo "$CLUSTER_DIR/nodes/$(node_name "$1")"; }
# The node's containerd socket, as the host reaches it (the node binds its own folder over
# /run/containerd; the socket lives in the folder underneath).
node_containerd_socket() { echo "$(node_dir "$1")/run/containerd/containerd.sock"; }
# The cgroup under which the node's kubelet puts its pods, in every hierarchy.
node_cgroup_root() { echo "/kubevirt-rs-$(node_name "$1")"; }

kubectl_admin() { "$CLUSTER_BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# wait_for DESCRIPTION SECONDS COMMAND...: runs COMMAND every half second until it succeeds.
wait_for() {
    local what=$1 seconds=$2
    shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.5
    done
    say "$what"
}

# When process PID started (clock ticks after boot): with its pid, it names the process across
# pid reuse and reboots.
process_start() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- $stat
    echo "${20}"
}

# A pid file's process ("PID START"), when that process still runs.
running_pid() {
    local file=$1 pid start
    [ -f "$file" ] || return 1
    read -r pid start <"$file" || return 1
    [ -n "$pid" ] && [ -n "$start" ] && [ "$(process_start "$pid")" = "$start" ] && echo "$pid"
}

# start_daemon NAME COMMAND...: runs COMMAND in its own session, logging to logs/NAME.log, and
# records its pid in pids/NAME.pid. A daemon that still runs is left alone.
start_daemon() {
    local name=$1
    shift
    if running_pid "$CLUSTER_PIDS/$name.pid" >/dev/null; then
        return 0
    fi
    mkdir -p "$CLUSTER_LOGS" "$CLUSTER_PIDS"
    setsid "$@" >>"$CLUSTER_LOGS/$name.log" 2>&1 </dev/null &
    echo "$! $(process_start $!)" >"$CLUSTER_PIDS/$name.pid"
}

# stop_daemon NAME: SIGTERM, then SIGKILL after 10 s.
stop_daemon() {
    local name=$1 pid
    pid=$(running_pid "$CLUSTER_PIDS/$name.pid") || { rm -f "$CLUSTER_PIDS/$name.pid"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$CLUSTER_PIDS/$name.pid"
}
