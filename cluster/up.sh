#!/usr/bin/env bash
# make cluster: a Kubernetes built from upstream, with nodes and cluster DNS, and kubevirt-rs
# installed on it as docs/install.md tells users. Idempotent: what already runs is left running.
#
#   NODES=1..9                         how many nodes (default 2); a running cluster keeps its count
#   KUBEVIRT_RS_PROFILE=debug|release  which build of kubevirt-rs the images carry (default debug,
#                                      the build `make test` uses)
#
# Then: export KUBECONFIG=/var/lib/kubevirt-rs/cluster/admin.kubeconfig (printed at the end).
# docs/cluster.md describes what runs where; `make cluster-down` removes it all.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for lib in common pki control-plane node images dns install; do
    # shellcheck source=/dev/null
    source "$here/lib/$lib.sh"
done
[ "$(id -u)" = 0 ] || die "run as root: the cluster needs namespaces, mounts and a container runtime"

packages=(containerd runc containernetworking-plugins tini iproute2 nftables openssl curl util-linux buildah podman)
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
fi

nodes=$(cluster_nodes) || exit 1
# A running cluster keeps its nodes (one made before the count was recorded has one).
if running_pid "$CLUSTER_PIDS/kube-apiserver.pid" >/dev/null; then
    running_nodes=1
    [ -f "$CLUSTER_DIR/node-count" ] && running_nodes=$(cat "$CLUSTER_DIR/node-count")
    [ "$running_nodes" = "$nodes" ] \
        || die "the cluster runs $running_nodes nodes, not $nodes: run make cluster-down first to change NODES"
fi

started=$(date +%s)
"$here/build.sh"
mkdir -p "$CLUSTER_DIR"
chmod 700 "$CLUSTER_DIR"
echo "$nodes" >"$CLUSTER_DIR/node-count"
start_cluster_network
make_pki
start_etcd
start_apiserver
start_controller_manager
start_scheduler
build_cluster_images "${KUBEVIRT_RS_PROFILE:-debug}"
wait_for_control_plane
for n in $(seq 1 "$nodes"); do
    start_node "$n" "$nodes"
done
import_images "$nodes"
for n in $(seq 1 "$nodes"); do
    wait_for_node "$n"
done
start_dns
install_kubevirt
wait_for_dns
say "up in $(($(date +%s) - started)) s; use it with: export KUBECONFIG=$ADMIN_KUBECONFIG"
