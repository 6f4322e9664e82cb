#!/usr/bin/env bash
# Builds the test cluster's binaries from upstream's Go modules, as pinned in this folder:
#   kubernetes/go.mod  kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy
#                      and kubectl from k8s.io/kubernetes (its staging modules pinned to match)
#   etcd/go.mod        etcd, at the version that Kubernetes release names
#   coredns/go.mod     CoreDNS, the cluster's DNS add-on, at the version that release names
#   pause              upstream's pause (build/pause/linux/pause.c in the k8s.io/kubernetes module),
#                      the pod sandbox image's only file
# into $KUBEVIRT_RS_CACHE/cluster/bin (default /var/cache/kubevirt-rs/cluster/bin). Go's module and
# build caches stay where Go keeps them, so a rebuild after a change is quick. Idempotent: nothing
# is built while the inputs are unchanged. Prints the wall time of a build it did.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cluster/lib/common.sh
source "$here/lib/common.sh"

# shellcheck source=cluster/lib/go.sh
source "$here/lib/go.sh"
ensure_go
command -v gcc >/dev/null || die "gcc is missing: run scripts/install-deps.sh"

out=$CLUSTER_BIN
k8s_version=$(kubernetes_version)
pause_version=$(awk '$1 == "TAG" && $2 == "?=" {print $3; exit}' "$(kubernetes_module_dir)/build/pause/Makefile")
stamp_inputs=$(
    cat "$here"/kubernetes/go.{mod,sum} "$here"/etcd/go.{mod,sum} "$here"/coredns/go.{mod,sum} "$0" | sha256sum | cut -c1-16
    go version
)
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd coredns pause)
up_to_date=1
[ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp_inputs" ] || up_to_date=
for binary in "${binaries[@]}"; do [ -x "$out/$binary" ] || up_to_date=; done
if [ -n "$up_to_date" ]; then
    say "binaries up to date ($out, Kubernetes $k8s_version)"
    exit 0
fi

started=$(date +%s)
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
# Static binaries without cgo, as upstream releases them; the version stamped as upstream's build
# stamps it, so that `kubectl version` and the nodes report the release.
minor=${k8s_version#v1.}
minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"
say "building Kubernetes $k8s_version (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl)"
(cd "$here/kubernetes" && CGO_ENABLED=0 go build -buildvcs=false -ldflags "$ldflags" -o "$out.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
    k8s.io/kubernetes/cmd/kubectl) || die "building Kubernetes failed"
say "building etcd"
(cd "$here/etcd" && CGO_ENABLED=0 go build -buildvcs=false -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3) \
    || die "building etcd failed"
say "building CoreDNS"
(cd "$here/coredns" && CGO_ENABLED=0 go build -buildvcs=false -ldflags "-s -w" -o "$out.tmp/coredns" github.com/coredns/coredns) \
    || die "building CoreDNS failed"
say "building pause $pause_version"
gcc -Os -Wall -Werror -static -DVERSION="v$pause_version-kubevirt-rs" -o "$out.tmp/pause" \
    "$(kubernetes_module_dir)/build/pause/linux/pause.c" || die "building pause failed"
echo "$pause_version" >"$out.tmp/pause.version"
echo "$stamp_inputs" >"$out.tmp/.stamp"
rm -rf "$out"
mv "$out.tmp" "$out"
say "built in $(($(date +%s) - started)) s ($out)"
