# A node: network, mount and PID namespaces of its own, in which containerd, the kubelet and
# kube-proxy run (sourced by up.sh and down.sh).
#
# The node's mount namespace binds its own folders over the paths a node's software uses
# (/var/lib/kubelet, /var/lib/containerd, /run/containerd, /var/run/kubevirt, /etc/cni/net.d, the
# hostpath provisioner's pool /var/hpvolumes, ...),
# so every node looks like a machine of its own at upstream's paths, and a second node can join
# with its own root directory, runtime state and network. The node's PID 1 is tini: stopping it
# ends every process the node started, pods and VMs included.

# The host folders the node binds over, as "host path:folder under the node's directory".
NODE_BINDS=(
    /var/lib/kubelet:kubelet
    /var/lib/containerd:containerd
    /run/containerd:run/containerd
    /var/run/kubevirt:run/kubevirt
    /var/run/kubevirt-private:run/kubevirt-private
    /run/netns:run/netns
    /var/lib/cni:cni/state
    /etc/cni/net.d:cni/net.d
    /var/log/pods:log/pods
    /var/log/containers:log/containers
    /var/hpvolumes:hpvolumes
)

# The kernel settings the kubelet changes on start (protectKernelDefaults: false), which are not
# per network namespace: saved before the first node starts and restored by down.sh.
KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

save_host_sysctls() {
    local saved=$CLUSTER_DIR/host-sysctls.conf
    [ -f "$saved" ] && return 0
    for key in "${KUBELET_SYSCTLS[@]}"; do
        echo "$key=$(sysctl -n "$key")"
    done >"$saved.tmp"
    mv "$saved.tmp" "$saved"
}

# write_node_config N NODES: node N's containerd, CNI, kubelet and kube-proxy configuration in a
# cluster of NODES nodes.
write_node_config() {
    local n=$1 nodes=$2 dir name ip cidr resources
    resources=$(kubelet_resources "$n" "$nodes") || die "$(node_name "$n"): cannot size the kubelet"
    dir=$(node_dir "$n")
    name=$(node_name "$n")
    ip=$(node_ip "$n")
    cidr=$(node_pod_cidr "$n")
    mkdir -p "$dir"/{kubelet,containerd,run/containerd,run/kubevirt,run/kubevirt-private,run/netns,cni/state,cni/net.d,log/pods,log/containers,hpvolumes}
    cat >"$dir/containerd.toml" <<EOF
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:$(cat "$CLUSTER_BIN/pause.version")"
  enable_selinux = false
  # This machine refuses a negative oom_score_adj even to root; clamp to containerd's own (0).
  restrict_oom_score_adj = true
  # A block volume's device belongs to the container's user and group, as KubeVirt and CDI ask of
  # the runtime: CDI's importer (uid 107) writes onto it.
  device_ownership_from_security_context = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
EOF
    cat >"$dir/cni/net.d/10-kubevirt-rs.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kubevirt-rs",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$cidr"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
    cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $CLUSTER_PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: $(node_cgroup_root "$n")
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: false
resolvConf: /etc/resolv.conf
clusterDNS: [$CLUSTER_DNS_IP]
clusterDomain: $CLUSTER_DOMAIN
serializeImagePulls: false
# No registry serves these images: never collect them, and evict only when the disk is all but full.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
$resources
EOF
    # The kubelet refuses to start when its CPU manager checkpoint names another policy.
    local state=$dir/kubelet/cpu_manager_state policy
    policy=$(cpu_manager_policy "$n")
    if [ -f "$state" ] && ! grep -q "\"policyName\":\"$policy\"" "$state"; then
        rm -f "$state"
    fi
    cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $CLUSTER_DIR/kube-proxy.kubeconfig}
mode: nftables
hostnameOverride: $name
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
# Leave the kernel's connection-tracking settings as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# Node 1 runs the static CPU manager, which gives Guaranteed pods with whole CPUs CPUs of their own
# (virt-handler labels it cpumanager=true, and dedicated-CPU VMIs are scheduled there); the others
# run the `none` policy, as most nodes of a real cluster do.
cpu_manager_policy() {
    if [ "$1" = 1 ]; then echo static; else echo none; fi
}

# kubelet_resources N NODES: the kubelet settings that share this machine between the nodes. Every
# kubelet sees all of its CPUs and memory; each reserves the other nodes' share of the memory, so
# that together they promise the machine once. The static CPU manager needs a CPU reservation: a
# tenth of a CPU keeps one whole CPU out of its exclusive pool while leaving the rest allocatable,
# so a one-vCPU VM fits beside the kubevirt-rs pods on two CPUs. Every node reserves the same, so
# that the nodes offer the same CPU.
kubelet_resources() {
    local n=$1 nodes=$2 total_kib
    total_kib=$(awk '$1 == "MemTotal:" {print $2}' /proc/meminfo)
    echo "cpuManagerPolicy: $(cpu_manager_policy "$n")"
    echo "kubeReserved: {cpu: 100m, memory: $((total_kib * (nodes - 1) / nodes))Ki}"
}

# route_pod_ranges N NODES: node N routes each other node's pod range to that node across the
# cluster bridge (and no longer routes a range whose node is gone).
route_pod_ranges() {
    local n=$1 nodes=$2 netns m
    netns=$(node_netns "$n")
    for m in $(seq 1 9); do
        [ "$m" = "$n" ] && continue
        if [ "$m" -le "$nodes" ]; then
            ip -n "$netns" route replace "$(node_pod_cidr "$m")" via "$(node_ip "$m")" dev eth0
        else
            ip -n "$netns" route del "$(node_pod_cidr "$m")" 2>/dev/null || true
        fi
    done
}

# The node's network namespace, linked to the cluster bridge; the host routes the node's pods.
start_node_network() {
    local n=$1 netns veth ip
    netns=$(node_netns "$n")
    veth=$(node_host_veth "$n")
    ip=$(node_ip "$n")
    [ -e "/run/netns/$netns" ] || ip netns add "$netns"
    if ! ip link show "$veth" >/dev/null 2>&1; then
        ip link add "$veth" type veth peer name eth0 netns "$netns"
    fi
    ip link set "$veth" master "$CLUSTER_BRIDGE" up
    ip -n "$netns" link set lo up
    ip -n "$netns" addr replace "$ip/$CLUSTER_NODE_PREFIX" dev eth0
    ip -n "$netns" link set eth0 up
    ip -n "$netns" route replace default via "$CLUSTER_HOST_IP"
    ip route replace "$(node_pod_cidr "$n")" via "$ip" dev "$CLUSTER_BRIDGE"
}

# The node's mount points that do not exist on the host are made, and listed for down.sh.
make_node_mount_points() {
    local made=$CLUSTER_DIR/made-mount-points
    for bind in "${NODE_BINDS[@]}"; do
        local target=${bind%%:*}
        [ -d "$target" ] && continue
        # The topmost folder that did not exist is what down.sh removes.
        local top=$target
        while [ ! -d "$(dirname "$top")" ]; do top=$(dirname "$top"); done
        mkdir -p "$target"
        echo "$top" >>"$made"
    done
}

# start_node N NODES: starts node N of NODES, unless it runs.
start_node() {
    local n=$1 nodes=$2 name
    name=$(node_name "$n")
    if running_pid "$CLUSTER_PIDS/$name.pid" >/dev/null; then
        route_pod_ranges "$n" "$nodes"
        say "$name runs"
        return 0
    fi
    save_host_sysctls
    write_node_config "$n" "$nodes"
    make_node_pki "$n"
    start_node_network "$n"
    route_pod_ranges "$n" "$nodes"
    make_node_mount_points
    make_cgroup_root "$(node_cgroup_root "$n")"
    local binds=()
    for bind in "${NODE_BINDS[@]}"; do binds+=("$bind"); done
    start_daemon "$name" nsenter --net="/run/netns/$(node_netns "$n")" -- \
        unshare --pid --fork --mount --propagation private --mount-proc -- \
        tini -s -g -- "$CLUSTER_SRC/node-init.sh" "$name" "$(node_dir "$n")" "$(node_ip "$n")" "$CLUSTER_DIR" \
        "$CLUSTER_BIN" "${binds[@]}"
    wait_for "$name: containerd answers" 60 ctr --address "$(node_containerd_socket "$n")" version \
        || die "$name: containerd did not start: see $(node_dir "$n")/containerd.log"
}

wait_for_node() {
    local n=$1 name
    name=$(node_name "$n")
    wait_for "$name is Ready" 180 kubectl_admin wait --for=condition=Ready "node/$name" --timeout=1s \
        || die "$name did not become Ready: see $(node_dir "$n")/kubelet.log"
}

# stop_node N: ends the node's PID namespace (every process in it), then its network.
stop_node() {
    local n=$1 name netns
    name=$(node_name "$n")
    netns=$(node_netns "$n")
    local pid
    if pid=$(running_pid "$CLUSTER_PIDS/$name.pid"); then
        # unshare's child is the node's PID 1; killing it kills everything in the namespace.
        local init
        init=$(pgrep -P "$pid" | head -n 1 || true)
        [ -n "$init" ] && kill -KILL "$init" 2>/dev/null || true
        stop_daemon "$name"
    fi
    rm -f "$CLUSTER_PIDS/$name.pid"
    ip route del "$(node_pod_cidr "$n")" 2>/dev/null || true
    ip link del "$(node_host_veth "$n")" 2>/dev/null || true
    ip netns del "$netns" 2>/dev/null || true
    remove_cgroup_tree "$(node_cgroup_root "$n")"
}

# The cgroup hierarchies: the unified one on cgroup v2, one per controller on v1 (the v1 machines
# this project runs on also mount an empty unified hierarchy, which the kubelet does not use).
cgroup_hierarchies() {
    if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
        echo /sys/fs/cgroup/
        return
    fi
    for hierarchy in /sys/fs/cgroup/*/; do
        [ "$hierarchy" = /sys/fs/cgroup/unified/ ] || echo "$hierarchy"
    done
}

# The kubelet puts its pods under a cgroup that must exist in every hierarchy; a new v1 cpuset
# cgroup takes its CPUs and memory nodes from its parent's, and on v2 the controllers the kubelet
# uses are enabled for it.
make_cgroup_root() {
    local root=$1 hierarchy
    for hierarchy in $(cgroup_hierarchies); do
        mkdir -p "$hierarchy${root#/}"
        if [ -f "$hierarchy/cpuset.cpus" ] && [ ! -f "$hierarchy/cgroup.controllers" ]; then
            cat "$hierarchy/cpuset.cpus" >"$hierarchy${root#/}/cpuset.cpus"
            cat "$hierarchy/cpuset.mems" >"$hierarchy${root#/}/cpuset.mems"
        fi
        if [ -f "$hierarchy/cgroup.controllers" ]; then
            local controllers=()
            for controller in $(cat "$hierarchy${root#/}/cgroup.controllers"); do controllers+=("+$controller"); done
            ((${#controllers[@]} == 0)) || echo "${controllers[*]}" >"$hierarchy${root#/}/cgroup.subtree_control"
        fi
    done
}

# Removes an empty cgroup tree from every hierarchy, deepest first.
remove_cgroup_tree() {
    local root=$1 hierarchy
    for hierarchy in $(cgroup_hierarchies); do
        [ -d "$hierarchy${root#/}" ] || continue
        find "$hierarchy${root#/}" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
}
