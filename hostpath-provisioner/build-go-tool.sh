#!/usr/bin/env bash
# build-go-tool.sh NAME: builds the one tool of the Go module in hostpath-provisioner/NAME (its
# go.mod's `tool` line: csi-sanity, csi-provisioner) into $KUBEVIRT_RS_CACHE/NAME (default
# /var/cache/kubevirt-rs/NAME) and prints the binary's path. Idempotent: nothing is built while
# the module's go.mod, go.sum and this script are unchanged.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=cluster/lib/common.sh
source "$repo/cluster/lib/common.sh"
# shellcheck source=cluster/lib/go.sh
source "$repo/cluster/lib/go.sh"
name=${1:?usage: build-go-tool.sh NAME}
module=$here/$name
[ -f "$module/go.mod" ] || die "no Go module at $module"
tool=$(awk '$1 == "tool" {print $2; exit}' "$module/go.mod")
[ -n "$tool" ] || die "$module/go.mod names no tool"
out=${KUBEVIRT_RS_CACHE:-/var/cache/kubevirt-rs}/$name
stamp=$(cat "$module/go.mod" "$module/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
if [ -x "$out/$name" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$out/$name"
    exit 0
fi
ensure_go >&2
mkdir -p "$out"
tmp=$(mktemp "$out/.$name.XXXXXX")
trap 'rm -f "$tmp"' EXIT
(cd "$module" && CGO_ENABLED=0 go build -buildvcs=false -ldflags "-s -w" -o "$tmp" "$tool") >&2 \
    || die "building $name ($tool) failed"
chmod 0755 "$tmp"
mv "$tmp" "$out/$name"
echo "$stamp" >"$out/.stamp"
echo "$out/$name"
