# The control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, each a
# process of the host in its own session (sourced by up.sh).

# The host's end of the cluster network: the bridge the nodes' veth pairs join.
start_cluster_network() {
    if ! ip link show "$CLUSTER_BRIDGE" >/dev/null 2>&1; then
        ip link add "$CLUSTER_BRIDGE" type bridge
    fi
    ip addr replace "$CLUSTER_HOST_IP/$CLUSTER_NODE_PREFIX" dev "$CLUSTER_BRIDGE"
    ip link set "$CLUSTER_BRIDGE" up
}

start_etcd() {
    mkdir -p "$CLUSTER_DIR/etcd"
    chmod 700 "$CLUSTER_DIR/etcd"
    start_daemon etcd "$CLUSTER_BIN/etcd" --name kubevirt-rs --data-dir "$CLUSTER_DIR/etcd" \
        --listen-client-urls "$ETCD_CLIENT_URL" --advertise-client-urls "$ETCD_CLIENT_URL" \
        --cert-file "$CLUSTER_PKI/etcd.crt" --key-file "$CLUSTER_PKI/etcd.key" \
        --client-cert-auth --trusted-ca-file "$CLUSTER_PKI/etcd-ca.crt" \
        --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
        --initial-cluster kubevirt-rs=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
        --log-level warn
    wait_for "etcd is healthy" 60 curl -fsS http://127.0.0.1:2381/health \
        || die "etcd did not become healthy: see $CLUSTER_LOGS/etcd.log"
}

# Every request at Metadata level, once its response is complete: the benchmarks count API
# requests per component and verb from this log.
write_audit_policy() {
    cat >"$CLUSTER_DIR/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/openapi/*", "/api", "/apis", "/api/*", "/apis/*"]
    verbs: [get]
  - level: Metadata
EOF
}

start_apiserver() {
    write_audit_policy
    mkdir -p "$CLUSTER_DIR/audit"
    local pki=$CLUSTER_PKI
    start_daemon kube-apiserver "$CLUSTER_BIN/kube-apiserver" \
        --bind-address "$CLUSTER_HOST_IP" --secure-port "$APISERVER_PORT" --advertise-address "$CLUSTER_HOST_IP" \
        --etcd-servers "$ETCD_CLIENT_URL" --etcd-cafile "$pki/etcd-ca.crt" \
        --etcd-certfile "$pki/apiserver-etcd-client.crt" --etcd-keyfile "$pki/apiserver-etcd-client.key" \
        --service-cluster-ip-range "$SERVICE_CIDR" --service-node-port-range 30000-32767 \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --client-ca-file "$pki/ca.crt" \
        --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
        --kubelet-preferred-address-types InternalIP \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
        --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged \
        --requestheader-client-ca-file "$pki/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
        --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
        --requestheader-extra-headers-prefix X-Remote-Extra- \
        --proxy-client-cert-file "$pki/front-proxy-client.crt" --proxy-client-key-file "$pki/front-proxy-client.key" \
        --enable-aggregator-routing \
        --audit-policy-file "$CLUSTER_DIR/audit-policy.yaml" --audit-log-path "$CLUSTER_DIR/audit/audit.log" \
        --audit-log-maxsize 200 --audit-log-maxbackup 2 \
        --profiling=false
    wait_for "kube-apiserver is ready at https://$CLUSTER_HOST_IP:$APISERVER_PORT" 120 kubectl_admin get --raw /readyz \
        || die "kube-apiserver did not become ready: see $CLUSTER_LOGS/kube-apiserver.log"
}

start_controller_manager() {
    local kubeconfig=$CLUSTER_DIR/controller-manager.kubeconfig
    start_daemon kube-controller-manager "$CLUSTER_BIN/kube-controller-manager" \
        --kubeconfig "$kubeconfig" --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
        --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
        --service-account-private-key-file "$CLUSTER_PKI/sa.key" --root-ca-file "$CLUSTER_PKI/ca.crt" \
        --cluster-signing-cert-file "$CLUSTER_PKI/ca.crt" --cluster-signing-key-file "$CLUSTER_PKI/ca.key" \
        --service-cluster-ip-range "$SERVICE_CIDR" --controllers '*,bootstrapsigner,tokencleaner' \
        --profiling=false
}

start_scheduler() {
    local kubeconfig=$CLUSTER_DIR/scheduler.kubeconfig
    start_daemon kube-scheduler "$CLUSTER_BIN/kube-scheduler" \
        --kubeconfig "$kubeconfig" --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig" \
        --bind-address 127.0.0.1 --leader-elect=false --profiling=false
}

# The default namespace's service account exists once the controller manager runs; pods need it.
wait_for_control_plane() {
    wait_for "kube-controller-manager and kube-scheduler are healthy" 90 \
        bash -c 'curl -fsSk https://127.0.0.1:10257/healthz && curl -fsSk https://127.0.0.1:10259/healthz' \
        || die "the controller manager or the scheduler is not healthy: see $CLUSTER_LOGS/"
    wait_for "the default service account exists" 60 kubectl_admin -n default get serviceaccount default \
        || die "no default service account: see $CLUSTER_LOGS/kube-controller-manager.log"
}
