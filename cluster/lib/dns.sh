# The cluster's DNS add-on: CoreDNS (built by cluster/build.sh) as a Deployment in kube-system and
# the Service kube-dns at $CLUSTER_DNS_IP, which every kubelet gives its pods as their nameserver
# (sourced by up.sh). Its `kubernetes` plugin answers NAME.NAMESPACE.svc.cluster.local, pods'
# dashed addresses and reverse lookups. Nothing leaves this machine's cluster network, so CoreDNS
# forwards no other name: it answers them at once (SERVFAIL, no plugin after `kubernetes`)
# instead of timing out.

start_dns() {
    kubectl_admin apply -f - >"$CLUSTER_LOGS/dns.log" 2>&1 <<YAML || die "applying CoreDNS failed: $(tail -5 "$CLUSTER_LOGS/dns.log")"
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        cache 30
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      # Its own nameserver would be itself: CoreDNS reads the node's resolv.conf.
      dnsPolicy: Default
      containers:
        - name: coredns
          image: $COREDNS_IMAGE
          imagePullPolicy: IfNotPresent
          args: [-conf, /etc/coredns/Corefile]
          resources:
            requests: {cpu: 10m, memory: 32Mi}
            limits: {memory: 170Mi}
          ports:
            - {name: dns, containerPort: 53, protocol: UDP}
            - {name: dns-tcp, containerPort: 53, protocol: TCP}
          volumeMounts:
            - {name: config, mountPath: /etc/coredns, readOnly: true}
          livenessProbe:
            httpGet: {path: /health, port: 8080}
            initialDelaySeconds: 10
            timeoutSeconds: 5
          readinessProbe:
            httpGet: {path: /ready, port: 8181}
            periodSeconds: 1
      volumes:
        - name: config
          configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $CLUSTER_DNS_IP
  ports:
    - {name: dns, port: 53, protocol: UDP}
    - {name: dns-tcp, port: 53, protocol: TCP}
YAML
    # A CoreDNS whose image was rebuilt is restarted, as kubevirt-rs's components are.
    local wanted running
    wanted=sha256:$(podman_vfs image inspect --format '{{.Id}}' "$COREDNS_IMAGE") || die "image $COREDNS_IMAGE is missing"
    running=$(kubectl_admin -n kube-system get pods -l k8s-app=kube-dns \
        -o jsonpath='{range .items[*]}{.status.containerStatuses[0].imageID}{"\n"}{end}') \
        || die "listing CoreDNS's pods failed"
    if [ -n "$running" ] && grep -qv "^$wanted\$" <<<"$running"; then
        kubectl_admin -n kube-system rollout restart deployment/coredns >/dev/null || die "restarting CoreDNS failed"
    fi
}

wait_for_dns() {
    wait_for "CoreDNS serves $CLUSTER_DOMAIN at $CLUSTER_DNS_IP" 180 \
        kubectl_admin -n kube-system rollout status --timeout=1s deployment/coredns \
        || die "CoreDNS did not become ready: $(kubectl_admin -n kube-system get pods -l k8s-app=kube-dns -o wide 2>&1)"
}
