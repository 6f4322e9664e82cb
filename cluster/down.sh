#!/usr/bin/env bash
# make cluster-down: stops every process of the test cluster (the nodes' PID namespaces end with
# their pods and VMs), removes its network, cgroups and state, and restores the kernel settings
# the kubelet changed. The binaries and images stay cached. Safe to run again, or with no cluster.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cluster/lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=cluster/lib/node.sh
source "$here/lib/node.sh"
[ "$(id -u)" = 0 ] || die "run as root"

for netns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^kubevirt-rs-node[0-9]*$' || true); do
    stop_node "${netns#kubevirt-rs-node}"
done
for dir in "$CLUSTER_DIR"/nodes/node*; do
    if [ -d "$dir" ]; then stop_node "${dir##*/node}"; fi
done
for daemon in kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop_daemon "$daemon"
done
if [ -f "$CLUSTER_DIR/host-sysctls.conf" ]; then
    sysctl -q -p "$CLUSTER_DIR/host-sysctls.conf" >/dev/null || die "restoring the kernel settings failed"
fi
ip link del "$CLUSTER_BRIDGE" 2>/dev/null || true
if [ -f "$CLUSTER_DIR/made-mount-points" ]; then
    sort -r -u "$CLUSTER_DIR/made-mount-points" | while read -r path; do
        # Only folders the cluster made, and only while empty.
        find "$path" -depth -type d -empty -delete 2>/dev/null || true
    done
fi
rm -rf "$CLUSTER_DIR"
say "down"
