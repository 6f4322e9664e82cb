#!/usr/bin/env bash
# Builds the four images (debug binaries, to reuse the test build) and runs the launcher image,
# privileged, on the test guest: it must boot to the guest's marker, stop gracefully on
# `podman stop` (the guest powers off, the launcher exits 0) and leave nothing behind. The other
# images must start their binary. Fails where no container builder can be had (root and apt).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { echo "test-images: $*"; }
fail() { say "FAILED: $*"; exit 1; }
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    fail "building images needs root and apt (buildah, podman, runc, debootstrap)"
fi
scripts/build-images.sh --profile debug

# The shipped binaries carry none of the test doubles (they sit behind the `testing` feature).
command -v strings >/dev/null || fail "strings is missing (binutils): run make deps"
for binary in virt-launcher virt-handler virt-controller virt-api; do
    [ -f "target/debug/$binary" ] || fail "target/debug/$binary was not built"
    doubles=$(strings "target/debug/$binary" | grep -oE 'Fake[A-Z][A-Za-z]+|RecordingCommands|ManualClock|DirectRunner' | sort -u | tr '\n' ' ' || true)
    [ -z "$doubles" ] || fail "$binary contains test doubles: $doubles"
done
say "the four binaries carry no test doubles"

export CONTAINERS_CONF="$PWD/images/containers.conf"
podman() { command podman --storage-driver vfs "$@"; }
name=kubevirt-rs-test-launcher-$$
pod=kubevirt-rs-test-pod-$$
share=$(mktemp -d /tmp/kubevirt-rs-share.XXXXXX)
cleanup() {
    podman rm -f "$name" "$pod" >/dev/null 2>&1 || true
    rm -rf "$share"
}
trap cleanup EXIT

for component in virt-handler virt-controller virt-api; do
    out=$(podman run --rm "localhost/kubevirt-rs/$component:latest" --version) || fail "$component does not start: $out"
    [[ "$out" == "$component "* ]] || fail "$component --version printed: $out"
    say "$component image runs: $out"
done

# The launcher image: its entry point is the launcher, and its capabilities cache (warmed when the
# image was built) belongs to the unprivileged launcher's user, with its qemu user named.
launcher=localhost/kubevirt-rs/virt-launcher:latest
out=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$launcher")
[ "$out" = '["/usr/bin/virt-launcher"]' ] || fail "the launcher image's entry point is $out"
out=$(podman run --rm --entrypoint /usr/bin/find "$launcher" /var/cache/kubevirt-rs/libvirt -name '*.xml' -uid 107)
[ -n "$out" ] || fail "the launcher image has no capabilities cache owned by uid 107"
out=$(podman run --rm --entrypoint /usr/bin/find "$launcher" /var/cache/kubevirt-rs/libvirt ! -uid 107)
[ -z "$out" ] || fail "in the launcher image's cache, not uid 107's: $out"
out=$(podman run --rm --entrypoint /usr/bin/getent "$launcher" passwd 107) && [[ "$out" == qemu:* ]] \
    || fail "the launcher image names no user 107: $out"
say "the launcher image starts the launcher; its capabilities cache and user 107 (qemu) are in place"

# The handler's network tools work in the image (in a namespace of the container's own).
handler_tool() { podman run --rm -i --network none --cap-add NET_ADMIN --entrypoint "$1" localhost/kubevirt-rs/virt-handler:latest "${@:2}"; }
out=$(handler_tool /usr/bin/ip -j link show 2>&1) && [[ "$out" == *'"ifname":"lo"'* ]] || fail "ip in the handler image: $out"
out=$(printf 'table ip kubevirt_nat {\n\tchain prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\tiifname "eth0" tcp dport 80 dnat to 10.0.2.2\n\t}\n}\n' \
    | handler_tool /usr/bin/nft -f - 2>&1) || fail "nft in the handler image: $out"
out=$(handler_tool /usr/bin/sysctl -n net.ipv4.ip_forward 2>&1) && [[ "$out" =~ ^[01]$ ]] || fail "sysctl in the handler image: $out"
out=$(handler_tool /usr/bin/nsenter --version 2>&1) || fail "nsenter in the handler image: $out"
say "the handler image's network tools (ip, nft, sysctl, nsenter) work"

store=${KUBEVIRT_RS_IMAGE_STORE:-/var/lib/kubevirt-rs/images}
podman run -d --privileged --name "$name" -e KUBEVIRT_RS_IMAGE_STORE="$store" -v "$store:$store:ro" -v "$PWD/manifests/examples:/manifests:ro" \
    localhost/kubevirt-rs/virt-launcher:latest run --vmi /manifests/vmi-testguest.yaml --force-emulation >/dev/null
# Logs are read whole before grep: with pipefail, grep -q closing the pipe early fails the pipe.
logs() { podman logs "$name" 2>&1; }
for _ in $(seq 1 120); do
    [[ "$(logs)" == *KUBEVIRT-RS-GUEST-READY* ]] && break
    [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || fail "the launcher exited: $(logs | tail -3)"
    sleep 0.5
done
[[ "$(logs)" == *KUBEVIRT-RS-GUEST-READY* ]] || fail "no guest marker within 60 s"
say "the launcher image booted the test guest"
[[ "$(logs)" == *"capabilities cache carried over"* ]] || fail "the image's warm capabilities cache was not used"
say "the image's warm capabilities cache was used"
start=$(date +%s%N)
podman stop -t 40 "$name" >/dev/null
took_ms=$((($(date +%s%N) - start) / 1000000))
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || fail "the launcher exited $code after podman stop"
[[ "$(logs)" == *KUBEVIRT-RS-GUEST-POWEROFF* ]] || fail "the guest did not power off (no graceful stop)"
say "podman stop: the guest powered off and the launcher exited 0 in ${took_ms} ms"

# Cluster mode as in a launcher pod: not privileged (podman's default capabilities plus SYS_NICE,
# as virt-controller renders the pod), libvirt used in place: the daemons start and the command
# socket is served in the share directory.
podman run -d --name "$pod" --cap-add SYS_NICE -v "$share:/var/run/kubevirt" localhost/kubevirt-rs/virt-launcher:latest \
    --name testguest --namespace default --uid 6a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9 --kubevirt-share-dir /var/run/kubevirt \
    --ephemeral-disk-dir /var/run/kubevirt-ephemeral-disks --container-disk-dir /var/run/kubevirt/container-disks \
    --grace-period-seconds 30 --force-emulation --container-libvirt >/dev/null
for _ in $(seq 1 80); do
    [ -S "$share/sockets/launcher-sock" ] && break
    sleep 0.25
done
[ -S "$share/sockets/launcher-sock" ] || fail "the unprivileged launcher serves no command socket: $(podman logs "$pod" 2>&1 | tail -3)"
podman stop -t 30 "$pod" >/dev/null
code=$(podman inspect --format '{{.State.ExitCode}}' "$pod")
[ "$code" = 0 ] || fail "the unprivileged launcher exited $code"
[ ! -e "$share/sockets/launcher-sock" ] || fail "the launcher left its socket behind"
say "the launcher image in cluster mode, unprivileged as in a pod, served its command socket and stopped cleanly"
