//! The test cluster itself: two Ready nodes, the static CPU manager on the first only (which
//! virt-handler's `cpumanager` label reports), pods on one node reaching pods on the other, and
//! cluster DNS: a pod finds a Service by `NAME.NAMESPACE.svc.cluster.local`, as on any cluster.

use std::time::Duration;

use super::support::{Cleanup, field, get, kubectl_ok, kubectl_stdin, node_names, wait_for};

const CLIENT_IMAGE: &str = "localhost/kubevirt-rs/testclient:latest";

/// A pod on `node` running `script` with busybox's shell.
fn pod_yaml(name: &str, node: &str, labels: &str, script: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{{labels}}}
spec:
  nodeName: {node}
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: {CLIENT_IMAGE}
      imagePullPolicy: IfNotPresent
      command: [/bin/busybox, sh, -c, {script:?}]
"
    )
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn two_nodes_route_pods_to_each_other_and_cluster_dns_resolves_services() {
    let nodes = node_names();
    assert!(
        nodes.len() >= 2 && nodes[0] == "node1",
        "make test runs two nodes: {nodes:?}"
    );
    for node in &nodes {
        let ready = wait_for(&format!("{node} Ready"), Duration::from_secs(60), || {
            let n = get("node", node, "default")?;
            let conditions = n["status"]["conditions"].as_array()?.clone();
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                .then_some(n)
        });
        let expected = if node == "node1" { "true" } else { "false" };
        let labelled = wait_for("virt-handler's cpumanager label", Duration::from_secs(90), || {
            get("node", node, "default").filter(|n| !field(n, "metadata.labels.cpumanager").is_empty())
        });
        assert_eq!(field(&labelled, "metadata.labels.cpumanager"), expected, "{node}");
        assert_eq!(
            field(&ready, "status.capacity.cpu"),
            field(&get("node", "node1", "default").expect("node1"), "status.capacity.cpu")
        );
    }

    let mut cleanup = Cleanup::new();
    let server = "/bin/busybox mkdir -p /www && echo E2E-ACROSS-NODES > /www/index.html && exec /bin/busybox httpd -f -p 8080 -h /www";
    cleanup.apply(
        "pod",
        "e2e-dns-server",
        &pod_yaml("e2e-dns-server", "node2", "app: e2e-dns-server", server),
    );
    cleanup.apply(
        "service",
        "e2e-dns-web",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: e2e-dns-web\n  namespace: default\nspec:\n  selector: {app: e2e-dns-server}\n  ports: [{port: 80, targetPort: 8080}]\n",
    );
    let server_ip = wait_for("the server pod's address", Duration::from_secs(60), || {
        let pod = get("pod", "e2e-dns-server", "default")?;
        (field(&pod, "status.phase") == "Running").then(|| field(&pod, "status.podIP"))
    });
    assert!(server_ip.starts_with("10.244.2."), "node2's pod range: {server_ip}");
    // From node1: the server's pod address, then the Service by its DNS name. Debian's static
    // busybox resolves names with its own `nslookup` (its libc's resolver needs NSS modules a
    // static binary cannot load), and fetches with `nc`.
    let fetch = "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 3";
    let client = format!(
        "for i in $(/bin/busybox seq 1 60); do {fetch} {server_ip} 8080 && break; /bin/busybox sleep 1; done; \
         for i in $(/bin/busybox seq 1 60); do \
           ip=$(/bin/busybox nslookup e2e-dns-web.default.svc.cluster.local | /bin/busybox awk '/^Name:/ {{n=1}} n && /^Address/ {{print $2}}'); \
           [ -n \"$ip\" ] && echo RESOLVED $ip && {fetch} $ip 80 && exit 0; /bin/busybox sleep 1; \
         done; exit 1"
    );
    cleanup.apply(
        "pod",
        "e2e-dns-client",
        &pod_yaml("e2e-dns-client", "node1", "app: e2e-dns-client", &client),
    );
    let phase = wait_for("the client pod to finish", Duration::from_secs(180), || {
        let pod = get("pod", "e2e-dns-client", "default")?;
        let phase = field(&pod, "status.phase");
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
    });
    let logs = kubectl_ok(&["logs", "e2e-dns-client"]);
    assert_eq!(phase, "Succeeded", "{logs}");
    assert_eq!(
        logs.matches("E2E-ACROSS-NODES").count(),
        2,
        "by address and by name: {logs}"
    );
    let cluster_ip = kubectl_ok(&["get", "service", "e2e-dns-web", "-o", "jsonpath={.spec.clusterIP}"]);
    assert!(
        logs.contains(&format!("RESOLVED {cluster_ip}")),
        "the Service's address: {logs}"
    );
    let resolv = kubectl_stdin(
        &[
            "exec",
            "-i",
            "e2e-dns-server",
            "--",
            "/bin/busybox",
            "cat",
            "/etc/resolv.conf",
        ],
        "",
    );
    let resolv = String::from_utf8_lossy(&resolv.stdout);
    assert!(resolv.contains("nameserver 10.96.0.10"), "{resolv}");
    assert!(
        resolv.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{resolv}"
    );
}
