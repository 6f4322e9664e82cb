#!/usr/bin/env bash
# Installs what building, running and testing kubevirt-rs needs on Debian 12, as root.
# Idempotent: it calls apt-get only when a package is missing.
set -euo pipefail

die() { echo "install-deps: $*" >&2; exit 1; }

packages=(
    # build
    gcc binutils make pkg-config libvirt-dev
    # run: a private libvirt daemon (libvirtd), QEMU and firmware
    libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils ovmf
    # emulated TPMs (spec.domain.devices.tpm)
    swtpm swtpm-tools
    # virt-xml-validate needs xmllint
    libxml2-utils
    # the test guest; cloud-init and config volume ISOs (xorrisofs, as upstream)
    busybox-static cpio xz-utils xorriso
    # pod networking: veth, bridges and taps (ip), NAT (nft), forwarding (sysctl), namespaces (nsenter)
    iproute2 nftables procps util-linux
    # the system's roots, which the cdi-importer image carries for https sources
    ca-certificates
    # the importer's registry tests push images with curl
    curl
)

missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done

# Some images ship a backported qemu-utils that conflicts with bookworm's qemu-system-x86;
# install both from the same release.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
qemu_utils_version=$(dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null || true)
if [[ "$qemu_utils_version" == *bpo* ]] && ! dpkg-query -W -f='${Status}' qemu-system-x86 2>/dev/null | grep -q 'ok installed'; then
    missing+=(qemu-utils)
fi

if ((${#missing[@]})); then
    [ "$(id -u)" = 0 ] || die "missing packages (${missing[*]}): run as root"
    echo "install-deps: installing ${missing[*]}"
    args=()
    for pkg in "${missing[@]}"; do
        if [ "$pkg" = qemu-utils ] && [ -n "$codename" ]; then args+=("qemu-utils/$codename"); else args+=("$pkg"); fi
    done
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends --allow-downgrades "${args[@]}"
fi

# Debian's docker-registry, unpacked into the cache rather than installed (its package would start a
# registry service on port 5000): the importer's tests pull from it, and the test cluster runs it in
# an image of its own.
registry_dir=${KUBEVIRT_RS_CACHE:-/var/cache/kubevirt-rs}/docker-registry
if [ ! -x "$registry_dir/usr/bin/docker-registry" ]; then
    [ "$(id -u)" = 0 ] || die "docker-registry is not unpacked in $registry_dir: run as root"
    echo "install-deps: unpacking docker-registry into $registry_dir"
    download=$(mktemp -d)
    trap 'rm -rf "$download"' EXIT
    if ! (cd "$download" && apt-get download -q docker-registry >/dev/null 2>&1); then
        apt-get update -q >/dev/null
        (cd "$download" && apt-get download -q docker-registry >/dev/null) || die "apt-get download docker-registry failed"
    fi
    rm -rf "$registry_dir.new"
    mkdir -p "$(dirname "$registry_dir")"
    dpkg-deb -x "$download"/docker-registry_*.deb "$registry_dir.new"
    rm -rf "$registry_dir"
    mv "$registry_dir.new" "$registry_dir"
fi

# The Rust toolchain comes from rustup (Debian's rustc is too old); add the components CI uses.
command -v cargo >/dev/null || die "cargo is missing: install a Rust toolchain (rustup, Rust >= 1.89) first"
if command -v rustup >/dev/null; then
    installed=$(rustup component list --installed 2>/dev/null || true)
    for component in rustfmt clippy; do
        grep -q "^$component" <<<"$installed" || rustup component add "$component"
    done
fi
echo "install-deps: ok"
