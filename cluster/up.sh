#!/usr/bin/env bash
# make cluster: a single-node Kubernetes built from upstream, with kubevirt-rs installed on it as
# docs/install.md tells users. Idempotent: what already runs is left running.
#
#   KUBEVIRT_RS_PROFILE=debug|release  which build of kubevirt-rs the images carry (default debug,
#                                      the build `make test` uses)
#
# Then: export KUBECONFIG=/var/lib/kubevirt-rs/cluster/admin.kubeconfig (printed at the end).
# docs/cluster.md describes what runs where; `make cluster-down` removes it all.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for lib in common pki control-plane node images install; do
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

started=$(date +%s)
"$here/build.sh"
mkdir -p "$CLUSTER_DIR"
chmod 700 "$CLUSTER_DIR"
start_cluster_network
make_pki
start_etcd
start_apiserver
start_controller_manager
start_scheduler
build_cluster_images "${KUBEVIRT_RS_PROFILE:-debug}"
wait_for_control_plane
start_node 1
import_images 1
wait_for_node 1
install_kubevirt
say "up in $(($(date +%s) - started)) s; use it with: export KUBECONFIG=$ADMIN_KUBECONFIG"
