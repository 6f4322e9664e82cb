#!/usr/bin/env bash
# Builds the kubevirt-rs test guest from Debian packages and installs it into the local image store.
#
#   kernel     linux-image-cloud-amd64 (extracted with dpkg-deb -x, never installed)
#   initramfs  busybox-static plus the kernel modules the guest needs, with kubevirt-tests/guest/init,
#              and qemu-guest-agent's qemu-ga with the host's copies of its libraries
#   disk       a small qcow2 image made with qemu-img, whose first line is a label the guest prints
#
# Outputs, under $KUBEVIRT_RS_CACHE (default /var/cache/kubevirt-rs)/testguest:
#   vmlinuz  initrd.img  disk.qcow2  (and debs/, the downloaded packages)
# and the image `localhost/kubevirt-rs/testguest:latest` in the image store
# ($KUBEVIRT_RS_IMAGE_STORE, default /var/lib/kubevirt-rs/images), laid out as a container image:
#   boot/vmlinuz  boot/initrd.img  disk/testguest.qcow2
#
# Idempotent: it rebuilds only when an input changed. Offline once the .debs are cached.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KUBEVIRT_RS_CACHE:-/var/cache/kubevirt-rs}/testguest
store=${KUBEVIRT_RS_IMAGE_STORE:-/var/lib/kubevirt-rs/images}
image_dir=$store/localhost/kubevirt-rs/testguest/latest
modules=(virtio_pci virtio_blk virtio_net virtio_console virtio_scsi sd_mod button evdev isofs pvpanic pvpanic_mmio efivarfs)

die() { echo "build-testguest: $*" >&2; exit 1; }

for tool in dpkg-deb cpio gzip qemu-img; do
    command -v "$tool" >/dev/null || die "$tool is missing: run 'make deps' (scripts/install-deps.sh)"
done
[ -x /bin/busybox ] && dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' \
    || die "busybox-static is not installed: run 'make deps'"

mkdir -p "$cache/debs"

# 1. The kernel package: the version linux-image-cloud-amd64 points at, downloaded once.
kernel_deb=$(ls "$cache"/debs/linux-image-*-cloud-amd64_*.deb 2>/dev/null | grep -v 'linux-image-cloud-amd64_' | sort -V | tail -n 1 || true)
if [ -z "$kernel_deb" ]; then
    kernel_pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
    if [ -z "$kernel_pkg" ]; then
        apt-get update -q >/dev/null
        kernel_pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
    fi
    [ -n "$kernel_pkg" ] || die "cannot resolve the package behind linux-image-cloud-amd64"
    echo "build-testguest: downloading $kernel_pkg"
    (cd "$cache/debs" && apt-get download -q "$kernel_pkg" 2>&1 | grep -v 'unsandboxed' || true)
    kernel_deb=$(ls "$cache"/debs/"$kernel_pkg"_*.deb 2>/dev/null | tail -n 1 || true)
    [ -n "$kernel_deb" ] || die "apt-get download $kernel_pkg failed"
fi

# The guest agent package, downloaded once (its libraries come from the host, which has them
# through qemu-system-x86).
agent_deb=$(ls "$cache"/debs/qemu-guest-agent_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$agent_deb" ]; then
    echo "build-testguest: downloading qemu-guest-agent"
    (cd "$cache/debs" && apt-get download -q qemu-guest-agent 2>&1 | grep -v 'unsandboxed' || true)
    agent_deb=$(ls "$cache"/debs/qemu-guest-agent_*.deb 2>/dev/null | tail -n 1 || true)
    [ -n "$agent_deb" ] || die "apt-get download qemu-guest-agent failed"
fi

# 2. Skip everything when nothing changed since the last build.
stamp_inputs="$(sha256sum "$here/init" "$here/udhcpc.script" "$here/chpasswd" "$0" | awk '{print $1}' | tr '\n' ' ')"
stamp_inputs+="$(basename "$kernel_deb") $(basename "$agent_deb") $(dpkg-query -W -f='${Version}' busybox-static) ${modules[*]}"
if [ -f "$cache/stamp" ] && [ "$(cat "$cache/stamp")" = "$stamp_inputs" ] \
    && [ -f "$image_dir/boot/vmlinuz" ] && [ -f "$image_dir/boot/initrd.img" ] \
    && [ -f "$image_dir/disk/testguest.qcow2" ]; then
    echo "build-testguest: up to date ($image_dir)"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 3. Kernel and modules.
dpkg-deb -x "$kernel_deb" "$work/kernel"
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-* | head -n 1)
moddir=$(ls -d "$work"/kernel/lib/modules/* | head -n 1)

# Resolve module dependencies from each .ko's own `depends=` field (no depmod needed), deps first.
declare -A module_path=() seen=()
order=()
while IFS= read -r ko; do
    name=$(basename "$ko"); name=${name%.ko*}; name=${name//-/_}
    module_path[$name]=$ko
done < <(find "$moddir" -name '*.ko*')
add_module() {
    local name=$1 dep
    [ -n "${seen[$name]:-}" ] && return
    seen[$name]=1
    [ -n "${module_path[$name]:-}" ] || return 0   # built into the kernel
    for dep in $(grep -a -o 'depends=[a-z0-9_,-]*' "${module_path[$name]}" | head -n 1 | cut -d= -f2 | tr ',' ' '); do
        add_module "${dep//-/_}"
    done
    order+=("$name")
}
for m in "${modules[@]}"; do add_module "$m"; done

# 4. Initramfs.
root=$work/initramfs
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,lib/modules,usr/bin,usr/sbin}
cp /bin/busybox "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
: > "$root/etc/modules-order"
for m in "${order[@]}"; do
    src=${module_path[$m]}
    case "$src" in
        *.ko) cp "$src" "$root/lib/modules/$m.ko" ;;
        *.ko.xz) xz -dc "$src" > "$root/lib/modules/$m.ko" ;;
        *.ko.zst) zstd -dcq "$src" > "$root/lib/modules/$m.ko" ;;
        *) die "unknown module format: $src" ;;
    esac
    echo "$m" >> "$root/etc/modules-order"
done
# The guest agent and the libraries it links, at the same paths; a root user for it to manage.
dpkg-deb -x "$agent_deb" "$work/agent"
install -m 0755 "$work/agent/usr/sbin/qemu-ga" "$root/usr/sbin/qemu-ga"
libraries=$(ldd "$work/agent/usr/sbin/qemu-ga" | awk '/=> \// {print $3} /^[[:space:]]*\/lib/ {print $1}') \
    || die "cannot list the libraries of qemu-ga"
for library in $libraries; do
    [ -e "$library" ] || die "qemu-ga needs $library, which this host lacks: run 'make deps'"
    mkdir -p "$root$(dirname "$library")"
    cp -L "$library" "$root$library"
done
mkdir -p "$root/root" "$root/run" "$root/var/run"
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"
echo 'root:*:19000:0:99999:7:::' > "$root/etc/shadow"
chmod 0600 "$root/etc/shadow"
install -m 0755 "$here/chpasswd" "$root/sbin/chpasswd"
install -m 0755 "$here/init" "$root/init"
install -m 0755 "$here/udhcpc.script" "$root/etc/udhcpc.script"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -9) > "$work/initrd.img"

# 5. Disk: a raw image whose first line is a label, converted to qcow2.
printf 'KUBEVIRT-RS-TESTGUEST-DISK\n' > "$work/disk.raw"
truncate -s 16M "$work/disk.raw"
qemu-img convert -q -f raw -O qcow2 "$work/disk.raw" "$work/disk.qcow2"

# 6. Publish: cache first, then the image store, each file replaced atomically.
publish() { install -m 0644 "$1" "$2.tmp" && mv -f "$2.tmp" "$2"; }
publish "$vmlinuz" "$cache/vmlinuz"
publish "$work/initrd.img" "$cache/initrd.img"
publish "$work/disk.qcow2" "$cache/disk.qcow2"
mkdir -p "$image_dir/boot" "$image_dir/disk"
publish "$cache/vmlinuz" "$image_dir/boot/vmlinuz"
publish "$cache/initrd.img" "$image_dir/boot/initrd.img"
publish "$cache/disk.qcow2" "$image_dir/disk/testguest.qcow2"
echo "$stamp_inputs" > "$cache/stamp"
echo "build-testguest: built $(basename "$kernel_deb") + busybox, modules: ${order[*]}"
echo "build-testguest: installed $image_dir"
