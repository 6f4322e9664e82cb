#!/usr/bin/env bash
# Runs the benchmarks and rewrites their sections of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# virt-launcher: VMI -> domain XML.
cargo bench -p domain-xml --bench render -- --warm-up-time 2 --measurement-time 5
cargo run -q -p kubevirt-tests --bin bench-report -- \
    --section render --title "VMI -> libvirt domain XML (virt-launcher render)" \
    --bench render_minimal_vmi:20000 --bench render_large_vmi:200000

# virt-launcher: boot, memory and stop against raw QEMU with the test guest.
kubevirt-tests/guest/build-testguest.sh
cargo build --release -p virt-launcher
cargo build --release -p kubevirt-tests --bin bench-libvirt-client
cargo run -q --release -p kubevirt-tests --bin bench-launcher -- --launcher target/release/virt-launcher \
    --libvirt-client target/release/bench-libvirt-client --runs 5

# virt-handler: 1000 VMIs on one node with fake launchers.
cargo run -q --release -p kubevirt-tests --bin bench-handler -- --vmis 1000

# virt-controller: 10 000 VMIs started against the in-memory API server.
cargo run -q --release -p kubevirt-tests --bin bench-controller -- --vmis 10000

# virt-api: admission latency at 1000 requests/s on loopback.
cargo build --release -p virt-api
cargo run -q --release -p kubevirt-tests --bin bench-virt-api -- --virt-api target/release/virt-api

# Pod networking: DHCP lease time and guest -> host throughput, masquerade and bridge.
cargo run -q --release -p kubevirt-tests --bin bench-network -- --launcher target/release/virt-launcher --runs 3


# CDI's import and upload: a 1 GiB disk over loopback HTTP, and over loopback TLS to the upload
# server, against qemu-img convert of the same file.
cargo run -q --release -p kubevirt-tests --bin bench-import -- --gib 1 --runs 3

# Live migration between two network namespaces: kubevirt-rs against virsh migrate --p2p.
# libvirt's own figures are kept for the real cluster's migrations below, measured in this run.
export BENCH_MIGRATION_BASELINE="$PWD/target/bench-migration-baseline.json"
rm -f "$BENCH_MIGRATION_BASELINE"
cargo bench -p virt-launcher --bench migration -- --runs 5 --body "$PWD/target/bench-migration.md" \
    --baseline "$BENCH_MIGRATION_BASELINE"
cargo run -q -p kubevirt-tests --bin bench-report -- --section migration --body-file target/bench-migration.md

# kubevirt-rs on a real Kubernetes: the test cluster (make cluster) with the release images.
scripts/bench-cluster.sh
