# Installs kubevirt-rs on the cluster as docs/install.md tells users (sourced by up.sh).

install_kubevirt() {
    local k=(kubectl_admin) installed=
    "${k[@]}" get namespace kubevirt >/dev/null 2>&1 && installed=1
    # The KubeVirt object waits for its CRD: the first apply may refuse it, the second takes it.
    "${k[@]}" apply -k "$CLUSTER_REPO/manifests/install" >"$CLUSTER_LOGS/install.log" 2>&1 || true
    wait_for "the CRDs are Established" 60 "${k[@]}" wait --for=condition=Established --timeout=1s \
        crd/virtualmachineinstances.kubevirt.io crd/virtualmachines.kubevirt.io crd/kubevirts.kubevirt.io \
        || die "the CRDs are not Established: see $CLUSTER_LOGS/install.log"
    "${k[@]}" apply -k "$CLUSTER_REPO/manifests/install" >>"$CLUSTER_LOGS/install.log" 2>&1 \
        || die "kubectl apply -k manifests/install failed: $(tail -5 "$CLUSTER_LOGS/install.log")"
    # This machine's /dev/kvm cannot run guests: emulate, as docs/install.md shows.
    "${k[@]}" -n kubevirt annotate --overwrite kubevirt kubevirt kubevirt-rs.io/force-emulation=true >/dev/null \
        || die "turning on emulation failed"
    [ -z "$installed" ] || restart_changed_components
    wait_for "virt-api, virt-controller and virt-handler are Ready" 300 kubevirt_is_ready \
        || die "kubevirt-rs did not become Ready: $("${k[@]}" -n kubevirt get pods -o wide 2>&1)"
    wait_for "the subresources.kubevirt.io APIServices are Available" 120 "${k[@]}" wait --for=condition=Available \
        --timeout=1s apiservice/v1.subresources.kubevirt.io apiservice/v1alpha3.subresources.kubevirt.io \
        || die "the APIServices are not Available: $("${k[@]}" get apiservice v1.subresources.kubevirt.io -o yaml 2>&1 | tail -8)"
}

# Only the leading virt-controller is Ready: its readiness is /leader, as upstream's.
kubevirt_is_ready() {
    kubectl_admin -n kubevirt rollout status --timeout=1s deployment/virt-api daemonset/virt-handler &&
        kubectl_admin -n kubevirt wait --timeout=1s --for=jsonpath='{.status.readyReplicas}'=1 deployment/virt-controller
}

# A component whose image import_images replaced runs the new one after a restart.
restart_changed_components() {
    local image component
    for image in ${CHANGED_IMAGES:-}; do
        component=${image#localhost/kubevirt-rs/}
        component=${component%%:*}
        case "$component" in
            virt-api | virt-controller) kubectl_admin -n kubevirt rollout restart "deployment/$component" >/dev/null ;;
            virt-handler) kubectl_admin -n kubevirt rollout restart daemonset/virt-handler >/dev/null ;;
            *) continue ;;
        esac
        say "restarted $component for its new image"
    done
}
