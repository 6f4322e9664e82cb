#!/usr/bin/env bash
# kubevirt-rs on the test cluster (make cluster) with the release images: bring-up times (a cold
# one with an empty Go build cache, which also times the Kubernetes build, then a warm one), VMI
# start, API requests per start and memory (kubevirt-tests/bin/bench_cluster), written to the `cluster`
# section of BENCHMARKS.md, and CDI's import, clone and upload there (bench-import --cluster, the
# `cdi-cluster` section). Any running test cluster is taken down first, and the cluster is taken
# down at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/build-images.sh --profile release
cargo build -q --release -p kubevirt-tests --bin bench-cluster --bin bench-import
# virtctl image-upload sends the upload of the CDI figures.
cargo build -q --release -p virtctl
cluster/down.sh
cold=$(mktemp -d /tmp/kubevirt-rs-cold-cluster.XXXXXX)
trap 'cluster/down.sh; rm -rf "$cold"' EXIT
started=$(date +%s)
KUBEVIRT_RS_PROFILE=release KUBEVIRT_RS_CLUSTER_BIN="$cold/bin" GOCACHE="$cold/go-build" cluster/up.sh | tee "$cold/up.log"
cold_seconds=$(($(date +%s) - started))
build_seconds=$(sed -n 's/^cluster: built in \([0-9]*\) s.*/\1/p' "$cold/up.log")
cluster/down.sh
rm -rf "$cold"
cluster/build.sh
started=$(date +%s)
KUBEVIRT_RS_PROFILE=release cluster/up.sh
warm_seconds=$(($(date +%s) - started))
# Live migration between the nodes is compared with libvirt's own figures when scripts/bench.sh
# measured them in the same run.
baseline=()
if [ -n "${BENCH_MIGRATION_BASELINE:-}" ]; then baseline=(--migration-baseline "$BENCH_MIGRATION_BASELINE"); fi
target/release/bench-cluster --kubectl /var/cache/kubevirt-rs/cluster/bin/kubectl --runs 10 \
    --build-seconds "$build_seconds" --cold-cluster-seconds "$cold_seconds" --warm-cluster-seconds "$warm_seconds" \
    "${baseline[@]}"
# CDI on the cluster: a 1 GiB qcow2 imported over HTTP from a pod, then cloned, then uploaded through
# the proxy, against qemu-img convert on the host (the `cdi-cluster` section).
target/release/bench-import --cluster /var/cache/kubevirt-rs/cluster/bin/kubectl --gib 1 --runs 3
