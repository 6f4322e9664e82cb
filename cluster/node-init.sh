#!/usr/bin/env bash
# A node's init, run by tini as the child of PID 1 in the node's own PID, mount and network
# namespaces (cluster/lib/node.sh starts it):
#
#   node-init.sh NAME NODE_DIR NODE_IP CLUSTER_DIR BIN HOST_PATH:NODE_FOLDER...
#
# It binds the node's folders over the host paths, gives the node a sysfs of its own network
# namespace, makes the mount tree shared (the kubelet's mount propagation needs it), then runs
# containerd, the kubelet and kube-proxy, restarting any that exits, as a service manager would.
set -euo pipefail
name=$1 dir=$2 ip=$3 cluster_dir=$4 bin=$5
shift 5

log() { echo "node-init[$name]: $*"; }

mount --make-rprivate /
for bind in "$@"; do
    target=${bind%%:*}
    source=$dir/${bind#*:}
    mkdir -p "$source"
    mount --bind "$source" "$target"
done

# sysfs shows the network devices of the namespace that mounts it: mount one for the node's
# network, keeping the host's cgroup hierarchies under it.
cgroups=$dir/cgroup-hierarchies
mkdir -p "$cgroups"
mount --rbind /sys/fs/cgroup "$cgroups"
mount -t sysfs sysfs /sys
mount --move "$cgroups" /sys/fs/cgroup
rmdir "$cgroups"

mount --make-rshared /

# supervise NAME COMMAND...: runs COMMAND again a second after it exits, logging to NAME.log.
supervise() {
    local daemon=$1
    shift
    (
        while true; do
            "$@" >>"$dir/$daemon.log" 2>&1 || true
            echo "node-init[$name]: $daemon exited; restarting" >>"$dir/$daemon.log"
            sleep 1
        done
    ) &
}

supervise containerd containerd --config "$dir/containerd.toml"
for _ in $(seq 1 100); do
    [ -S /run/containerd/containerd.sock ] && break
    sleep 0.1
done
supervise kubelet "$bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --hostname-override "$name" --node-ip "$ip" --v 1
supervise kube-proxy "$bin/kube-proxy" --config "$dir/kube-proxy.yaml"
log "containerd, kubelet and kube-proxy started (state in $dir, cluster $cluster_dir)"
wait
