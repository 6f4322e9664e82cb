# Installs kubevirt-rs on the cluster as docs/install.md tells users (sourced by up.sh).

install_kubevirt() {
    local k=(kubectl_admin)
    # CDI's operator and its CR, as docs/storage.md tells users: the operator installs CDI's other
    # CRDs, its controller, upload proxy and API server, so that VMs' dataVolumeTemplates are
    # filled and images uploaded. The CR's config points uploads at node 1's NodePort.
    "${k[@]}" apply -k "$CLUSTER_REPO/manifests/cdi" >"$CLUSTER_LOGS/cdi.log" 2>&1 \
        || die "kubectl apply -k manifests/cdi failed: $(tail -5 "$CLUSTER_LOGS/cdi.log")"
    wait_for "the CDI CRD is Established" 60 "${k[@]}" wait --for=condition=Established --timeout=1s \
        crd/cdis.cdi.kubevirt.io \
        || die "the CDI CRD is not Established: see $CLUSTER_LOGS/cdi.log"
    sed "s/NODE_IP/$(node_ip 1)/" "$CLUSTER_REPO/cluster/cdi/cdi.yaml" \
        | "${k[@]}" apply -f - >>"$CLUSTER_LOGS/cdi.log" 2>&1 \
        || die "creating the CDI CR failed: $(tail -5 "$CLUSTER_LOGS/cdi.log")"
    # The hostpath provisioner's operator, its CR (the CSI driver on every node, pool `local` in
    # /var/hpvolumes) and the StorageClass `hostpath-csi`, as docs/storage.md tells users.
    local hpp=$CLUSTER_REPO/manifests/hostpath-provisioner
    "${k[@]}" apply -k "$hpp" >"$CLUSTER_LOGS/hostpath-provisioner.log" 2>&1 \
        || die "installing the hostpath provisioner's operator failed: $(tail -5 "$CLUSTER_LOGS/hostpath-provisioner.log")"
    wait_for "the HostPathProvisioner CRD is Established" 60 "${k[@]}" wait --for=condition=Established --timeout=1s \
        crd/hostpathprovisioners.hostpathprovisioner.kubevirt.io \
        || die "the HostPathProvisioner CRD is not Established: see $CLUSTER_LOGS/hostpath-provisioner.log"
    "${k[@]}" apply -f "$hpp/hostpathprovisioner_cr.yaml" -f "$hpp/storageclass-hostpath-csi.yaml" \
        >>"$CLUSTER_LOGS/hostpath-provisioner.log" 2>&1 \
        || die "creating the HostPathProvisioner failed: $(tail -5 "$CLUSTER_LOGS/hostpath-provisioner.log")"
    # On the test cluster hostpath-csi is the default class, as on a single-node or edge cluster
    # that runs the hostpath provisioner: a claim that names no class gets a directory on its node.
    "${k[@]}" annotate --overwrite storageclass hostpath-csi storageclass.kubernetes.io/is-default-class=true >/dev/null \
        || die "making hostpath-csi the default StorageClass failed"
    # virt-operator and the KubeVirt CR, as docs/install.md tells users: the operator installs the
    # other kubevirt.io CRDs, virt-api, virt-controller, virt-handler and their RBAC.
    "${k[@]}" apply -k "$CLUSTER_REPO/manifests/operator" >"$CLUSTER_LOGS/install.log" 2>&1 \
        || die "kubectl apply -k manifests/operator failed: $(tail -5 "$CLUSTER_LOGS/install.log")"
    wait_for "the KubeVirt CRD is Established" 60 "${k[@]}" wait --for=condition=Established --timeout=1s \
        crd/kubevirts.kubevirt.io \
        || die "the KubeVirt CRD is not Established: see $CLUSTER_LOGS/install.log"
    "${k[@]}" apply -f "$CLUSTER_REPO/manifests/operator/kubevirt_cr.yaml" >>"$CLUSTER_LOGS/install.log" 2>&1 \
        || die "creating the KubeVirt CR failed: $(tail -5 "$CLUSTER_LOGS/install.log")"
    # This machine's /dev/kvm cannot run guests: emulate, as docs/install.md shows.
    "${k[@]}" -n kubevirt annotate --overwrite kubevirt kubevirt kubevirt-rs.io/force-emulation=true >/dev/null \
        || die "turning on emulation failed"
    # SSP's operator and its CR, as docs/ssp.md tells users: the template validator checks every
    # VirtualMachine written from now on.
    "${k[@]}" apply -k "$CLUSTER_REPO/manifests/ssp" >"$CLUSTER_LOGS/ssp.log" 2>&1 \
        || die "kubectl apply -k manifests/ssp failed: $(tail -5 "$CLUSTER_LOGS/ssp.log")"
    wait_for "the SSP CRD is Established" 60 "${k[@]}" wait --for=condition=Established --timeout=1s \
        crd/ssps.ssp.kubevirt.io \
        || die "the SSP CRD is not Established: see $CLUSTER_LOGS/ssp.log"
    "${k[@]}" apply -f "$CLUSTER_REPO/manifests/ssp/ssp_cr.yaml" >>"$CLUSTER_LOGS/ssp.log" 2>&1 \
        || die "creating the SSP failed: $(tail -5 "$CLUSTER_LOGS/ssp.log")"
    restart_changed_components
    # After the rollout, so that the CR's conditions are about the pods that run now.
    wait_for "CDI is Available" 300 "${k[@]}" wait --for=condition=Available --timeout=1s cdi/cdi \
        || die "CDI is not Available: $("${k[@]}" get cdi cdi -o jsonpath='{.status.conditions}' 2>&1; "${k[@]}" -n cdi get pods -o wide 2>&1)"
    wait_for "CDI's Deployments have rolled out" 300 kubectl_admin -n cdi rollout status --timeout=1s \
        deployment/cdi-operator deployment/cdi-deployment deployment/cdi-uploadproxy deployment/cdi-apiserver \
        || die "CDI did not become Ready: $("${k[@]}" -n cdi get pods -o wide 2>&1)"
    wait_for "the hostpath provisioner runs on every node" 300 kubectl_admin -n hostpath-provisioner rollout status \
        --timeout=1s daemonset/hostpath-provisioner-csi \
        || die "the hostpath provisioner did not start: $("${k[@]}" -n hostpath-provisioner get pods -o wide 2>&1)"
    # After the rollout, so that the CR's conditions are about the pods that run now.
    wait_for "the HostPathProvisioner is Available" 300 "${k[@]}" wait --for=condition=Available --timeout=1s \
        hostpathprovisioner/hostpath-provisioner \
        || die "the HostPathProvisioner is not Available: $("${k[@]}" get hostpathprovisioner hostpath-provisioner -o jsonpath='{.status.conditions}' 2>&1; "${k[@]}" -n hostpath-provisioner get pods -o wide 2>&1)"
    wait_for "the template validator is Deployed" 300 "${k[@]}" -n kubevirt wait --for=jsonpath='{.status.phase}'=Deployed \
        --timeout=1s ssp/ssp \
        || die "the SSP is not Available: $("${k[@]}" -n kubevirt get ssp ssp -o jsonpath='{.status.conditions}' 2>&1; "${k[@]}" -n kubevirt get pods -o wide 2>&1)"
    wait_for "KubeVirt is Deployed" 300 "${k[@]}" -n kubevirt wait --for=jsonpath='{.status.phase}'=Deployed \
        --timeout=1s kubevirt/kubevirt \
        || die "KubeVirt is not Deployed: $("${k[@]}" -n kubevirt get kubevirt kubevirt -o jsonpath='{.status.conditions}' 2>&1; "${k[@]}" -n kubevirt get pods -o wide 2>&1)"
    wait_for "virt-api, virt-controller and virt-handler are Ready" 300 kubevirt_is_ready \
        || die "kubevirt-rs did not become Ready: $("${k[@]}" -n kubevirt get pods -o wide 2>&1)"
    wait_for "the subresources.kubevirt.io APIServices are Available" 120 "${k[@]}" wait --for=condition=Available \
        --timeout=1s apiservice/v1.subresources.kubevirt.io apiservice/v1alpha3.subresources.kubevirt.io \
        || die "the APIServices are not Available: $("${k[@]}" get apiservice v1.subresources.kubevirt.io -o yaml 2>&1 | tail -8)"
    wait_for "the upload.cdi.kubevirt.io APIService is Available" 120 "${k[@]}" wait --for=condition=Available \
        --timeout=1s apiservice/v1beta1.upload.cdi.kubevirt.io \
        || die "the upload APIService is not Available: $("${k[@]}" get apiservice v1beta1.upload.cdi.kubevirt.io -o yaml 2>&1 | tail -8)"
    wait_for "the DataVolume webhook has cdi-apiserver's CA" 120 cdi_webhook_has_ca \
        || die "cdi-operator did not publish cdi-apiserver's CA to cdi-api-datavolume-mutate"
}

cdi_webhook_has_ca() {
    local bundle
    bundle=$(kubectl_admin get mutatingwebhookconfiguration cdi-api-datavolume-mutate \
        -o jsonpath='{.webhooks[0].clientConfig.caBundle}') || return 1
    [ -n "$bundle" ]
}

# Ready, and every rollout finished. Only the leading virt-controller is Ready: its readiness is
# /leader, as upstream's.
kubevirt_is_ready() {
    kubectl_admin -n kubevirt rollout status --timeout=1s deployment/virt-api daemonset/virt-handler || return 1
    local state
    state=$(kubectl_admin -n kubevirt get deployment virt-controller -o \
        jsonpath='{.metadata.generation} {.status.observedGeneration} {.spec.replicas} {.status.updatedReplicas} {.status.readyReplicas}') || return 1
    # shellcheck disable=SC2086
    set -- $state
    [ "$#" = 5 ] && [ "$1" = "$2" ] && [ "$3" = "$4" ] && [ "$5" = 1 ]
}

# A component whose pods run another image than the one in the local store (it was rebuilt and
# copied to the node) is restarted. Each entry: namespace, its pods' label, image, workload.
restart_changed_components() {
    local entry namespace selector image workload ids wanted
    for entry in kubevirt:kubevirt.io=virt-operator:virt-operator:deployment/virt-operator \
        kubevirt:kubevirt.io=virt-api:virt-api:deployment/virt-api \
        kubevirt:kubevirt.io=virt-controller:virt-controller:deployment/virt-controller \
        kubevirt:kubevirt.io=virt-handler:virt-handler:daemonset/virt-handler \
        cdi:name=cdi-operator:cdi-operator:deployment/cdi-operator \
        cdi:cdi.kubevirt.io=cdi-deployment:cdi-controller:deployment/cdi-deployment \
        cdi:cdi.kubevirt.io=cdi-uploadproxy:cdi-uploadproxy:deployment/cdi-uploadproxy \
        cdi:cdi.kubevirt.io=cdi-apiserver:cdi-apiserver:deployment/cdi-apiserver \
        hostpath-provisioner:name=hostpath-provisioner-operator:hostpath-provisioner-operator:deployment/hostpath-provisioner-operator \
        hostpath-provisioner:k8s-app=hostpath-provisioner:hostpath-csi-driver:daemonset/hostpath-provisioner-csi \
        hostpath-provisioner:k8s-app=hostpath-provisioner:csi-provisioner:daemonset/hostpath-provisioner-csi \
        kubevirt:control-plane=ssp-operator:ssp-operator:deployment/ssp-operator \
        kubevirt:kubevirt.io=virt-template-validator:virt-template-validator:deployment/virt-template-validator; do
        IFS=: read -r namespace selector image workload <<<"$entry"
        wanted=sha256:$(podman_vfs image inspect --format '{{.Id}}' "localhost/kubevirt-rs/$image:latest") \
            || die "image localhost/kubevirt-rs/$image:latest is missing"
        ids=$(kubectl_admin -n "$namespace" get pods -l "$selector" \
            -o jsonpath="{range .items[*]}{.status.containerStatuses[?(@.image==\"localhost/kubevirt-rs/$image:latest\")].imageID}{\"\\n\"}{end}")
        # No pods yet (a fresh install, or an operand its operator has not made yet): nothing to restart.
        [ -n "$ids" ] || continue
        if grep -qv "^$wanted\$" <<<"$ids"; then
            kubectl_admin -n "$namespace" rollout restart "$workload" >/dev/null
            say "restarted $image for its new image"
        fi
    done
}
