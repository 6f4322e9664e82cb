# The cluster's certificates, service-account keys and kubeconfigs, made with openssl once per
# cluster under $CLUSTER_PKI (sourced by up.sh).
#
#   ca              signs every client and serving certificate (the API server's client CA)
#   front-proxy-ca  signs front-proxy-client, which the aggregation layer presents to virt-api
#   etcd-ca         signs etcd's serving certificate and the API server's client certificate for
#                   it: nothing else may talk to etcd
#   sa.key, sa.pub  sign and check service-account tokens

# new_key FILE: an ECDSA P-256 key.
new_key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
    chmod 600 "$1"
}

# new_ca NAME SUBJECT
new_ca() {
    local name=$1 subject=$2
    [ -f "$CLUSTER_PKI/$name.crt" ] && return 0
    new_key "$CLUSTER_PKI/$name.key"
    openssl req -x509 -new -key "$CLUSTER_PKI/$name.key" -subj "$subject" -days 3650 -sha256 \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
        -out "$CLUSTER_PKI/$name.crt" 2>/dev/null
}

# new_cert NAME CA SUBJECT USAGE [SANS]: USAGE is serverAuth, clientAuth or both.
new_cert() {
    local name=$1 ca=$2 subject=$3 usage=$4 sans=${5:-}
    [ -f "$CLUSTER_PKI/$name.crt" ] && return 0
    new_key "$CLUSTER_PKI/$name.key"
    local extensions
    extensions=$(mktemp)
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$usage"
        [ -z "$sans" ] || echo "subjectAltName=$sans"
    } >"$extensions"
    openssl req -new -key "$CLUSTER_PKI/$name.key" -subj "$subject" 2>/dev/null \
        | openssl x509 -req -CA "$CLUSTER_PKI/$ca.crt" -CAkey "$CLUSTER_PKI/$ca.key" -CAcreateserial \
            -days 3650 -sha256 -extfile "$extensions" -out "$CLUSTER_PKI/$name.crt" 2>/dev/null
    rm -f "$extensions"
}

# new_kubeconfig FILE CERT_NAME: a kubeconfig for the client certificate CERT_NAME.
new_kubeconfig() {
    local file=$1 cert=$2
    [ -f "$file" ] && return 0
    local k=("$CLUSTER_BIN/kubectl" --kubeconfig "$file.tmp")
    "${k[@]}" config set-cluster kubevirt-rs --server "https://$CLUSTER_HOST_IP:$APISERVER_PORT" \
        --certificate-authority "$CLUSTER_PKI/ca.crt" --embed-certs >/dev/null
    "${k[@]}" config set-credentials "$cert" --client-certificate "$CLUSTER_PKI/$cert.crt" \
        --client-key "$CLUSTER_PKI/$cert.key" --embed-certs >/dev/null
    "${k[@]}" config set-context kubevirt-rs --cluster kubevirt-rs --user "$cert" >/dev/null
    "${k[@]}" config use-context kubevirt-rs >/dev/null
    chmod 600 "$file.tmp"
    mv "$file.tmp" "$file"
}

make_pki() {
    mkdir -p "$CLUSTER_PKI"
    chmod 700 "$CLUSTER_PKI"
    new_ca ca "/CN=kubevirt-rs-cluster-ca"
    new_ca front-proxy-ca "/CN=kubevirt-rs-front-proxy-ca"
    new_ca etcd-ca "/CN=kubevirt-rs-etcd-ca"
    new_cert etcd etcd-ca "/CN=etcd" serverAuth "IP:127.0.0.1,DNS:localhost"
    new_cert apiserver-etcd-client etcd-ca "/CN=kube-apiserver-etcd-client" clientAuth
    local apiserver_sans="IP:$CLUSTER_HOST_IP,IP:$KUBERNETES_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes"
    apiserver_sans+=",DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    new_cert apiserver ca "/CN=kube-apiserver" serverAuth "$apiserver_sans"
    new_cert apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
    new_cert front-proxy-client front-proxy-ca "/CN=front-proxy-client" clientAuth
    new_cert admin ca "/O=system:masters/CN=kubernetes-admin" clientAuth
    new_cert controller-manager ca "/CN=system:kube-controller-manager" clientAuth
    new_cert scheduler ca "/CN=system:kube-scheduler" clientAuth
    new_cert kube-proxy ca "/CN=system:kube-proxy" clientAuth
    if [ ! -f "$CLUSTER_PKI/sa.key" ]; then
        openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$CLUSTER_PKI/sa.key" 2>/dev/null
        openssl pkey -in "$CLUSTER_PKI/sa.key" -pubout -out "$CLUSTER_PKI/sa.pub" 2>/dev/null
        chmod 600 "$CLUSTER_PKI/sa.key"
    fi
    new_kubeconfig "$ADMIN_KUBECONFIG" admin
    new_kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" controller-manager
    new_kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" scheduler
    new_kubeconfig "$CLUSTER_DIR/kube-proxy.kubeconfig" kube-proxy
}

# make_node_pki N: the kubelet's client certificate (group system:nodes, for the Node authorizer)
# and its kubeconfig. The kubelet makes its own serving certificate.
make_node_pki() {
    local name
    name=$(node_name "$1")
    new_cert "kubelet-$name" ca "/O=system:nodes/CN=system:node:$name" clientAuth
    new_kubeconfig "$(node_dir "$1")/kubelet.kubeconfig" "kubelet-$name"
}
