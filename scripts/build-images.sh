#!/usr/bin/env bash
# Builds the container images with Debian's buildah (vfs storage), as root:
#   localhost/kubevirt-rs/{virt-launcher,virt-handler,virt-controller,virt-api}:latest
#   localhost/kubevirt-rs/{cdi-controller,cdi-importer,cdi-uploadserver,cdi-uploadproxy,cdi-apiserver,cdi-cloner}:latest
#   localhost/kubevirt-rs/{hostpath-csi-driver,hostpath-provisioner-operator}:latest
#   localhost/kubevirt-rs/{ssp-operator,virt-template-validator,virt-operator}:latest
# The launcher image also carries container-disk, built statically: the launcher pod's init
# container copies it into containerDisk sidecars, whose images hold nothing else.
#
#   scripts/build-images.sh [--profile release|debug] [--tag TAG]
#
# No base image can be pulled, so every image is built FROM scratch: the launcher on a minimal
# Debian 12 root made with debootstrap (cached in $KUBEVIRT_RS_CACHE/rootfs), the others from
# their binary and the libraries it links. Idempotent: an image whose inputs (binaries, files,
# this script) are unchanged is kept; a rebuilt image replaces the old one. Prints each size.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() { echo "build-images: $*" >&2; exit 1; }
profile=release
tag=latest
while (($#)); do
    case "$1" in
        --profile) profile=${2:?}; shift 2 ;;
        --tag) tag=${2:?}; shift 2 ;;
        *) die "unknown argument $1" ;;
    esac
done
[ "$(id -u)" = 0 ] || die "run as root (debootstrap and buildah need it)"

packages=(buildah podman runc debootstrap)
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "build-images: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null || die "apt-get update failed"
    apt-get install -y -q "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
fi
export CONTAINERS_CONF="$PWD/images/containers.conf"
buildah() { command buildah --storage-driver vfs "$@"; }

cache=${KUBEVIRT_RS_CACHE:-/var/cache/kubevirt-rs}
work=$cache/image-build
mkdir -p "$work"

if [ "$profile" = release ]; then
    cargo build -q --release -p virt-launcher -p virt-handler -p virt-controller -p virt-api -p cdi-controller -p cdi-importer -p cdi-uploadserver -p cdi-uploadproxy -p cdi-apiserver -p cdi-cloner -p hostpath-csi-driver -p hostpath-provisioner-operator -p cdi-operator -p ssp-operator -p virt-template-validator -p virt-operator
    bin=target/release
else
    cargo build -q -p virt-launcher -p virt-handler -p virt-controller -p virt-api -p cdi-controller -p cdi-importer -p cdi-uploadserver -p cdi-uploadproxy -p cdi-apiserver -p cdi-cloner -p hostpath-csi-driver -p hostpath-provisioner-operator -p cdi-operator -p ssp-operator -p virt-template-validator -p virt-operator
    bin=target/debug
fi
# container-disk runs in images that hold no C library: linked statically, for this target only,
# so the flag reaches neither build scripts nor proc macros.
static_target=x86_64-unknown-linux-gnu
RUSTFLAGS="-C target-feature=+crt-static" cargo build -q --profile "$([ "$profile" = release ] && echo release || echo dev)" \
    -p container-disk --bin container-disk --target "$static_target"
container_disk=target/$static_target/$profile/container-disk

# 1. The launcher's Debian root, made once per package list.
debs=libvirt-daemon,libvirt-daemon-driver-qemu,qemu-system-x86,qemu-utils,ovmf,swtpm,swtpm-tools,xorriso
rootfs=$cache/rootfs/launcher-$(echo "$debs" | sha256sum | cut -c1-12)
if [ ! -e "$rootfs/.complete" ]; then
    echo "build-images: debootstrap bookworm ($debs)"
    rm -rf "$rootfs.tmp"
    debootstrap --variant=minbase --include="$debs" bookworm "$rootfs.tmp" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
        || die "debootstrap failed: see $work/debootstrap.log"
    # What a VM never needs: documentation, manuals, locales, package caches.
    rm -rf "$rootfs.tmp"/usr/share/{doc,man,info,locale,lintian} "$rootfs.tmp"/var/cache/apt/* "$rootfs.tmp"/var/lib/apt/lists/*
    touch "$rootfs.tmp/.complete"
    rm -rf "$rootfs"
    mv "$rootfs.tmp" "$rootfs"
fi

# 2. Each image's context: root/ holds what the image contains.
context() { rm -rf "$work/$1"; mkdir -p "$work/$1/root/usr/bin"; cp "images/$1/Containerfile" "$work/$1/"; }

# A binary and the libraries it links, at the same paths.
copy_with_libraries() {
    local binary=$1 root=$2
    install -m 0755 "$binary" "$root/usr/bin/"
    ldd "$binary" | awk '/=> \// {print $3} /^[[:space:]]*\// {print $1}' | while read -r lib; do
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
    mkdir -p "$root/tmp" "$root/etc"
    chmod 1777 "$root/tmp"
    echo "root:x:0:0:root:/root:/sbin/nologin" >"$root/etc/passwd"
    echo "kubevirt:x:1001:1001::/:/sbin/nologin" >>"$root/etc/passwd"
}

# 3. The launcher image's QEMU capabilities caches: boot a diskless VM in the image (libvirt
# probes QEMU and the launcher records the binaries), then keep the container's cache as a layer.
# Twice: privileged, with the host's /dev/kvm, and then with every capability but no device, so
# without KVM. libvirt throws a cache away when KVM's availability differs from when it was made;
# the launcher keeps one copy for each and puts the matching one in place at start
# (virt-launcher/src/supervisor/caps_variants.rs).
warm_capabilities_cache() {
    local image=$1 name=kubevirt-rs-warm-cache-$$ vmi="$work/warm-cache.yaml"
    cat >"$vmi" <<'VMI'
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: warm-cache
spec:
  terminationGracePeriodSeconds: 0
  domain:
    resources:
      requests:
        memory: 32Mi
    devices:
      autoattachGraphicsDevice: false
      autoattachPodInterface: false
      autoattachSerialConsole: false
VMI
    # A commit keeps the container's command line as the image's: the launcher's entry point stays.
    local keep=(--change 'ENTRYPOINT ["/usr/bin/virt-launcher"]' --change 'CMD []')
    local access
    for access in kvm emulation-only; do
        local privileges=(--privileged)
        [ "$access" = kvm ] || privileges=(--cap-add all --security-opt seccomp=unconfined \
            --security-opt apparmor=unconfined --security-opt label=disable)
        command podman --storage-driver vfs rm -f "$name" >/dev/null 2>&1 || true
        command podman --storage-driver vfs run -d "${privileges[@]}" --name "$name" -v "$vmi:/warm-cache.yaml:ro" \
            "$image" run --vmi /warm-cache.yaml --force-emulation >/dev/null
        local started=
        for _ in $(seq 1 120); do
            if [[ "$(command podman --storage-driver vfs logs "$name" 2>&1)" == *"domain started"* ]]; then started=1; break; fi
            sleep 0.5
        done
        command podman --storage-driver vfs stop -t 30 "$name" >/dev/null
        [ -n "$started" ] || die "warming the capabilities cache ($access) failed: $(command podman --storage-driver vfs logs "$name" 2>&1 | tail -3)"
        command podman --storage-driver vfs commit --quiet "${keep[@]}" "$name" "$image" >/dev/null
        command podman --storage-driver vfs rm -f "$name" >/dev/null
    done
    # An unprivileged launcher (uid 107) reads the cache and keeps it current; a root one can anyway.
    command podman --storage-driver vfs run --name "$name" --user 0 --entrypoint /usr/bin/chown "$image" \
        -R 107:107 /var/cache/kubevirt-rs/libvirt >/dev/null
    command podman --storage-driver vfs commit --quiet "${keep[@]}" "$name" "$image" >/dev/null
    command podman --storage-driver vfs rm -f "$name" >/dev/null
    local variants
    variants=$(command podman --storage-driver vfs run --rm --entrypoint /usr/bin/find "$image" \
        /var/cache/kubevirt-rs/libvirt/kubevirt-rs-variants -name kubevirt-rs-binaries.json) || true
    [[ "$variants" == *emulation-only/* ]] || die "the launcher image has no capabilities cache for emulation: ${variants:-none}"
    # Without /dev/kvm on the build host there is no KVM to probe with.
    [[ ! -e /dev/kvm || "$variants" == *kvm/* ]] || die "the launcher image has no capabilities cache for KVM: ${variants:-none}"
}

context_virt-controller() { context virt-controller; copy_with_libraries "$bin/virt-controller" "$work/virt-controller/root"; }
context_virt-api() { context virt-api; copy_with_libraries "$bin/virt-api" "$work/virt-api/root"; }
context_cdi-controller() { context cdi-controller; copy_with_libraries "$bin/cdi-controller" "$work/cdi-controller/root"; }
context_cdi-uploadproxy() { context cdi-uploadproxy; copy_with_libraries "$bin/cdi-uploadproxy" "$work/cdi-uploadproxy/root"; }
context_cdi-apiserver() { context cdi-apiserver; copy_with_libraries "$bin/cdi-apiserver" "$work/cdi-apiserver/root"; }
context_cdi-cloner() { context cdi-cloner; copy_with_libraries "$bin/cdi-cloner" "$work/cdi-cloner/root"; }
context_hostpath-csi-driver() { context hostpath-csi-driver; copy_with_libraries "$bin/hostpath-csi-driver" "$work/hostpath-csi-driver/root"; }
context_hostpath-provisioner-operator() { context hostpath-provisioner-operator; copy_with_libraries "$bin/hostpath-provisioner-operator" "$work/hostpath-provisioner-operator/root"; }
context_cdi-operator() { context cdi-operator; copy_with_libraries "$bin/cdi-operator" "$work/cdi-operator/root"; }
context_ssp-operator() { context ssp-operator; copy_with_libraries "$bin/ssp-operator" "$work/ssp-operator/root"; }
context_virt-template-validator() { context virt-template-validator; copy_with_libraries "$bin/virt-template-validator" "$work/virt-template-validator/root"; }
context_virt-operator() { context virt-operator; copy_with_libraries "$bin/virt-operator" "$work/virt-operator/root"; }
# The upload server converts what it is sent with qemu-img, as the importer does.
context_cdi-uploadserver() {
    context cdi-uploadserver
    copy_with_libraries "$bin/cdi-uploadserver" "$work/cdi-uploadserver/root"
    copy_with_libraries "$(qemu_img)" "$work/cdi-uploadserver/root"
}
# The importer converts qcow2, VMDK, VDI, VHD and VHDX with qemu-img (Debian's qemu-utils).
qemu_img() { PATH=/usr/bin:/bin command -v qemu-img || die "qemu-img is missing: run scripts/install-deps.sh"; }
context_cdi-importer() {
    context cdi-importer
    copy_with_libraries "$bin/cdi-importer" "$work/cdi-importer/root"
    copy_with_libraries "$(qemu_img)" "$work/cdi-importer/root"
    # The system's roots, for https sources without a certConfigMap.
    [ -f /etc/ssl/certs/ca-certificates.crt ] || die "/etc/ssl/certs/ca-certificates.crt is missing: install ca-certificates"
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$work/cdi-importer/root/etc/ssl/certs/ca-certificates.crt"
}
context_virt-handler() {
    context virt-handler
    copy_with_libraries "$bin/virt-handler" "$work/virt-handler/root"
    # virt-handler wires pod networks inside launcher pods' network namespaces with these tools.
    for tool in nsenter ip nft sysctl; do
        path=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$tool") || die "$tool is missing: run scripts/install-deps.sh"
        copy_with_libraries "$path" "$work/virt-handler/root"
    done
}

context_virt-launcher() {
    context virt-launcher
    cp -a "$rootfs/." "$work/virt-launcher/root/"
    rm -f "$work/virt-launcher/root/.complete"
    # libvirt resolves its compiled-in QEMU user and group at start, before reading qemu.conf (which
    # makes the launcher's QEMU run as root); Debian creates them in libvirt-daemon-system, which the
    # image does not need.
    root=$work/virt-launcher/root
    grep -q '^kvm:' "$root/etc/group" || echo 'kvm:x:107:' >>"$root/etc/group"
    grep -q '^libvirt-qemu:' "$root/etc/group" || echo 'libvirt-qemu:x:64055:libvirt-qemu' >>"$root/etc/group"
    grep -q '^libvirt-qemu:' "$root/etc/passwd" \
        || echo 'libvirt-qemu:x:64055:107:Libvirt Qemu,,,:/var/lib/libvirt:/usr/sbin/nologin' >>"$root/etc/passwd"
    # The user an unprivileged launcher pod runs as (upstream's qemu, uid 107, group 107).
    grep -q '^qemu:' "$root/etc/passwd" || echo 'qemu:x:107:107:QEMU:/var/run/kubevirt-private:/usr/sbin/nologin' >>"$root/etc/passwd"
    # The launcher mounts its private libvirt configuration and state over these.
    mkdir -p "$work/virt-launcher/root"/{etc/libvirt,var/lib/libvirt,var/cache/libvirt,var/log/libvirt,var/cache/kubevirt-rs/libvirt}
    install -m 0755 "$bin/virt-launcher" "$work/virt-launcher/root/usr/bin/"
    install -m 0755 "$container_disk" "$work/virt-launcher/root/usr/bin/container-disk"
}

# What an image is made of; an image labelled with the same digest is up to date.
inputs_of() {
    local component=$1
    {
        sha256sum "$0" "images/$component/Containerfile" "$bin/$component"
        case "$component" in
            virt-launcher) echo "$rootfs"; sha256sum "$container_disk" ;;
            virt-handler) for tool in nsenter ip nft sysctl; do sha256sum "$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$tool")"; done ;;
            cdi-importer) sha256sum "$(qemu_img)" /etc/ssl/certs/ca-certificates.crt ;;
            cdi-uploadserver) sha256sum "$(qemu_img)" ;;
        esac
    } | sha256sum | cut -c1-32
}

for component in virt-launcher virt-handler virt-controller virt-api cdi-controller cdi-importer cdi-uploadserver cdi-uploadproxy cdi-apiserver cdi-cloner hostpath-csi-driver hostpath-provisioner-operator cdi-operator ssp-operator virt-template-validator virt-operator; do
    image=localhost/kubevirt-rs/$component:$tag
    inputs=$(inputs_of "$component")
    old=$(command podman --storage-driver vfs image inspect --format '{{.Id}} {{index .Labels "io.kubevirt-rs.inputs"}}' "$image" 2>/dev/null || true)
    if [ "${old#* }" = "$inputs" ]; then
        printf 'build-images: %-45s up to date\n' "$image"
        continue
    fi
    "context_$component"
    buildah bud --quiet --layers=false --label "io.kubevirt-rs.inputs=$inputs" -f "$work/$component/Containerfile" \
        -t "$image" "$work/$component" >/dev/null
    if [ "$component" = virt-launcher ]; then warm_capabilities_cache "$image"; fi
    # The image this one replaces, now untagged, would otherwise stay in the store.
    if [ -n "$old" ]; then command podman --storage-driver vfs rmi "${old%% *}" >/dev/null 2>&1 || true; fi
    rm -rf "$work/$component"
    size=$(buildah inspect --format '{{.FromImage}}' "$image" >/dev/null 2>&1; command podman --storage-driver vfs image inspect --format '{{.Size}}' "$image")
    printf 'build-images: %-45s %6d MiB\n' "$image" $((size / 1024 / 1024))
done
