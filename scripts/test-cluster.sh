#!/usr/bin/env bash
# The end-to-end tier of `make test`: brings the test cluster up (cluster/up.sh builds what is
# missing and refreshes images that changed), runs kubevirt-tests/tests/cluster against it, and takes the
# cluster down again unless it was already running before. Needs root, as the cluster does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=cluster/lib/common.sh
source cluster/lib/common.sh
say() { echo "test-cluster: $*"; }
[ "$(id -u)" = 0 ] || { say "FAILED: the test cluster needs root"; exit 1; }
# Migration, drain and cross-node routing need another node.
[ "${NODES:-2}" != 1 ] || { say "FAILED: the end-to-end tier runs on two nodes or more, not NODES=1"; exit 1; }
was_running=
if running_pid "$CLUSTER_PIDS/kube-apiserver.pid" >/dev/null; then
    was_running=1
fi
finish() {
    if [ -z "$was_running" ]; then
        cluster/down.sh || say "cluster/down.sh failed"
    fi
}
trap finish EXIT

cluster/up.sh
cargo build -q -p virtctl
say "running the end-to-end tests"
cargo test -p kubevirt-tests --test cluster -- --ignored --test-threads=1
