# The images the cluster runs, built with buildah and copied into each node's containerd (no
# registry serves them) (sourced by up.sh):
#   localhost/kubevirt-rs/{virt-launcher,virt-handler,virt-controller,virt-api}:latest
#   localhost/kubevirt-rs/{cdi-operator,cdi-controller,cdi-importer,cdi-uploadserver,cdi-uploadproxy,cdi-apiserver,cdi-cloner}:latest
#   localhost/kubevirt-rs/{hostpath-provisioner-operator,hostpath-csi-driver,ssp-operator,virt-template-validator,virt-operator}:latest
#       the component images (scripts/build-images.sh)
#   localhost/kubevirt-rs/testguest:latest
#       the test guest as a containerDisk, as upstream builds them: FROM scratch with the qcow2 under
#       /disk/, and the kernel and initrd under /boot/ for kernel boot
#   localhost/kubevirt-rs/testclient:latest
#       busybox, for pods that talk to guests in the tests
#   localhost/kubevirt-rs/test-registry:latest
#       Debian's docker-registry (unpacked by make deps) with the C library it links, for the
#       registry import tests (config: cluster/test-registry/config.yml)
#   localhost/kubevirt-rs/coredns:latest
#       the cluster's DNS add-on, CoreDNS built by cluster/build.sh
#   registry.k8s.io/pause:<version>
#       the pod sandbox, upstream's pause built by cluster/build.sh

export CONTAINERS_CONF=$CLUSTER_REPO/images/containers.conf
podman_vfs() { command podman --storage-driver vfs "$@"; }
buildah_vfs() { command buildah --storage-driver vfs "$@"; }

# build_scratch_image NAME ENTRYPOINT FILE:PATH_IN_IMAGE...: a FROM-scratch image of these files,
# rebuilt only when one of them changed (their digest is the image's label).
build_scratch_image() {
    local image=$1 entrypoint=$2 file
    shift 2
    for file in "$@"; do
        [ -f "${file%%:*}" ] || die "$image: ${file%%:*} is missing"
    done
    local inputs
    inputs=$(for file in "$@"; do sha256sum "${file%%:*}" | cut -c1-64; echo "${file#*:}"; done | sha256sum | cut -c1-32)
    if [ "$(podman_vfs image inspect --format '{{index .Labels "io.kubevirt-rs.inputs"}}' "$image" 2>/dev/null)" = "$inputs" ]; then
        return 0
    fi
    local container
    container=$(buildah_vfs from scratch)
    if ! (
        for file in "$@"; do
            buildah_vfs copy --quiet "$container" "${file%%:*}" "${file#*:}" >/dev/null || exit 1
        done
        if [ -n "$entrypoint" ]; then buildah_vfs config --entrypoint "[\"$entrypoint\"]" "$container" || exit 1; fi
        buildah_vfs config --label "io.kubevirt-rs.inputs=$inputs" "$container" &&
            buildah_vfs commit --quiet --rm "$container" "$image" >/dev/null
    ); then
        buildah_vfs rm "$container" >/dev/null 2>&1 || true
        die "building $image failed"
    fi
    say "built $image"
}

build_cluster_images() {
    local profile=$1
    "$CLUSTER_REPO/scripts/build-images.sh" --profile "$profile"
    local guest=${KUBEVIRT_RS_IMAGE_STORE:-/var/lib/kubevirt-rs/images}/localhost/kubevirt-rs/testguest/latest
    [ -f "$guest/disk/testguest.qcow2" ] || die "the test guest is not built: run make guest"
    build_scratch_image localhost/kubevirt-rs/testguest:latest "" \
        "$guest/disk/testguest.qcow2:/disk/testguest.qcow2" \
        "$guest/boot/vmlinuz:/boot/vmlinuz" "$guest/boot/initrd.img:/boot/initrd.img"
    build_scratch_image localhost/kubevirt-rs/testclient:latest /bin/busybox /bin/busybox:/bin/busybox
    local registry=${KUBEVIRT_RS_CACHE:-/var/cache/kubevirt-rs}/docker-registry/usr/bin/docker-registry
    [ -x "$registry" ] || die "docker-registry is not unpacked: run make deps"
    build_scratch_image localhost/kubevirt-rs/test-registry:latest /usr/bin/docker-registry \
        "$registry:/usr/bin/docker-registry" "$CLUSTER_REPO/cluster/test-registry/config.yml:/etc/docker/registry/config.yml" \
        "$(readlink -f /lib/x86_64-linux-gnu/libc.so.6):/lib/x86_64-linux-gnu/libc.so.6" \
        "$(readlink -f /lib64/ld-linux-x86-64.so.2):/lib64/ld-linux-x86-64.so.2"
    # Upstream's external-provisioner sidecar, built from its Go module (hostpath-provisioner/).
    local provisioner
    provisioner=$("$CLUSTER_REPO/hostpath-provisioner/build-go-tool.sh" csi-provisioner) || die "building csi-provisioner failed"
    build_scratch_image localhost/kubevirt-rs/csi-provisioner:latest /csi-provisioner "$provisioner:/csi-provisioner"
    build_scratch_image "registry.k8s.io/pause:$(cat "$CLUSTER_BIN/pause.version")" /pause "$CLUSTER_BIN/pause:/pause"
    build_scratch_image "$COREDNS_IMAGE" /coredns "$CLUSTER_BIN/coredns:/coredns"
}

cluster_images() {
    echo localhost/kubevirt-rs/virt-launcher:latest localhost/kubevirt-rs/virt-handler:latest
    echo localhost/kubevirt-rs/virt-controller:latest localhost/kubevirt-rs/virt-api:latest
    echo localhost/kubevirt-rs/cdi-controller:latest localhost/kubevirt-rs/cdi-importer:latest
    echo localhost/kubevirt-rs/cdi-uploadserver:latest localhost/kubevirt-rs/cdi-uploadproxy:latest
    echo localhost/kubevirt-rs/cdi-apiserver:latest localhost/kubevirt-rs/cdi-cloner:latest
    echo localhost/kubevirt-rs/hostpath-csi-driver:latest localhost/kubevirt-rs/csi-provisioner:latest
    echo localhost/kubevirt-rs/hostpath-provisioner-operator:latest localhost/kubevirt-rs/cdi-operator:latest
    echo localhost/kubevirt-rs/ssp-operator:latest localhost/kubevirt-rs/virt-template-validator:latest
    echo localhost/kubevirt-rs/virt-operator:latest
    echo localhost/kubevirt-rs/testguest:latest localhost/kubevirt-rs/testclient:latest
    echo localhost/kubevirt-rs/test-registry:latest
    echo "registry.k8s.io/pause:$(cat "$CLUSTER_BIN/pause.version")" "$COREDNS_IMAGE"
}

# import_images NODES: copies every image whose ID changed into the containerd of nodes 1 to NODES.
# Each image is saved once, and the nodes import it at the same time (each node's containerd has a
# content store of its own). Prints how long the copying took.
import_images() {
    local nodes=$1 started=$SECONDS image n i
    for image in $(cluster_images); do
        local id stale=()
        id=$(podman_vfs image inspect --format '{{.Id}}' "$image") || die "image $image is missing"
        for n in $(seq 1 "$nodes"); do
            local stamp
            stamp=$(node_dir "$n")/images/${image//[\/:]/_}
            [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$id" ] || stale+=("$n")
        done
        ((${#stale[@]})) || continue
        local archive
        archive=$(mktemp "${TMPDIR:-/tmp}/kubevirt-rs-image.XXXXXX")
        podman_vfs save --quiet --format docker-archive -o "$archive" "$image" >/dev/null 2>&1 \
            || { rm -f "$archive"; die "podman save $image failed"; }
        local pids=() failed=()
        for n in "${stale[@]}"; do
            ctr --address "$(node_containerd_socket "$n")" -n k8s.io images import "$archive" >/dev/null &
            pids+=("$!")
        done
        for i in "${!pids[@]}"; do
            wait "${pids[$i]}" || failed+=("$(node_name "${stale[$i]}")")
        done
        rm -f "$archive"
        ((${#failed[@]} == 0)) || die "importing $image into ${failed[*]} failed"
        for n in "${stale[@]}"; do
            mkdir -p "$(node_dir "$n")/images"
            echo "$id" >"$(node_dir "$n")/images/${image//[\/:]/_}"
        done
        say "imported $image into $(for n in "${stale[@]}"; do node_name "$n"; done | paste -sd' ')"
    done
    say "images copied to the nodes in $((SECONDS - started)) s"
}
