#!/usr/bin/env bash
# Builds csi-sanity from this folder's Go module into $KUBEVIRT_RS_CACHE/csi-sanity (default
# /var/cache/kubevirt-rs/csi-sanity) and prints the binary's path. Idempotent: nothing is built
# while go.mod, go.sum and this script are unchanged.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=cluster/lib/common.sh
source "$repo/cluster/lib/common.sh"
# shellcheck source=cluster/lib/go.sh
source "$repo/cluster/lib/go.sh"
out=${KUBEVIRT_RS_CACHE:-/var/cache/kubevirt-rs}/csi-sanity
stamp=$(cat "$here/go.mod" "$here/go.sum" "$0" | sha256sum | cut -c1-16)
if [ -x "$out/csi-sanity" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$out/csi-sanity"
    exit 0
fi
ensure_go >&2
mkdir -p "$out"
(cd "$here" && CGO_ENABLED=0 go build -buildvcs=false -ldflags "-s -w" -o "$out/csi-sanity.tmp" \
    github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity) >&2 || die "building csi-sanity failed"
mv "$out/csi-sanity.tmp" "$out/csi-sanity"
echo "$stamp" >"$out/.stamp"
echo "$out/csi-sanity"
