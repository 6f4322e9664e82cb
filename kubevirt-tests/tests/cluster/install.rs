//! The install: `manifests/install` (the objects virt-operator renders, which also apply by hand)
//! is accepted by the API server, what the operator made is ready, the printer columns are
//! upstream's, and each component gets by with its own service account's rights.

use std::time::Duration;

use super::support::{Cleanup, example, kubectl, kubectl_ok, wait_for_phase};

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn every_object_applies_again_and_the_api_server_accepts_the_crd_schemas() {
    super::support::kubeconfig();
    // A server-side dry run validates every object, the CRDs' schemas included, once more.
    let install = kubevirt_tests::repo_root().join("manifests/install");
    let install = install.to_string_lossy();
    let applied = kubectl_ok(&["apply", "-k", &install, "--dry-run=server"]);
    assert!(
        applied.contains("customresourcedefinition.apiextensions.k8s.io/virtualmachineinstances.kubevirt.io"),
        "{applied}"
    );
    for crd in ["virtualmachineinstances", "virtualmachines", "kubevirts"] {
        kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=10s",
            &format!("crd/{crd}.kubevirt.io"),
        ]);
    }
    for version in ["v1", "v1alpha3"] {
        kubectl_ok(&[
            "wait",
            "--for=condition=Available",
            "--timeout=10s",
            &format!("apiservice/{version}.subresources.kubevirt.io"),
        ]);
    }
    kubectl_ok(&[
        "-n",
        "kubevirt",
        "rollout",
        "status",
        "--timeout=10s",
        "deployment/virt-api",
        "daemonset/virt-handler",
    ]);
    let leaders = kubectl_ok(&[
        "-n",
        "kubevirt",
        "get",
        "deployment",
        "virt-controller",
        "-o",
        "jsonpath={.status.readyReplicas}",
    ]);
    assert_eq!(leaders, "1", "exactly one virt-controller leads and is Ready");
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn kubectl_get_shows_upstreams_columns_for_vms_and_vmis() {
    let mut cleanup = Cleanup::new();
    cleanup.apply(
        "vm",
        "columns",
        &example("vm-testguest.yaml", "columns").replace("runStrategy: Always", "runStrategy: Halted"),
    );
    cleanup.apply("vmi", "columns-vmi", &example("vmi-testguest.yaml", "columns-vmi"));
    let vmi = wait_for_phase("columns-vmi", "Running", Duration::from_secs(120));
    let node = super::support::field(&vmi, "status.nodeName");
    let vm_table = kubectl_ok(&["get", "vm", "columns"]);
    let header: Vec<&str> = vm_table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGE", "STATUS", "READY"], "{vm_table}");
    assert!(vm_table.contains("Stopped"), "{vm_table}");
    let vmis = kubectl_ok(&["get", "vmi", "columns-vmi"]);
    let header: Vec<&str> = vmis.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGE", "PHASE", "IP", "NODENAME", "READY"], "{vmis}");
    let row: Vec<&str> = vmis.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    // The IP cell is empty (the guest has no pod interface), so the node is the fourth word.
    assert_eq!(row.len(), 5, "{vmis}");
    assert_eq!((row[2], row[3], row[4]), ("Running", node.as_str(), "True"), "{vmis}");
    let wide = kubectl_ok(&["get", "vmi", "columns-vmi", "-o", "wide"]);
    assert!(
        wide.lines()
            .next()
            .unwrap_or_default()
            .contains("LIVE-MIGRATABLE   PAUSED"),
        "{wide}"
    );
}

/// The components run with their own service accounts; the real API server's RBAC refused none
/// of their requests (its audit log says so), and each account can do no more than it should.
#[test]
#[ignore = "needs the test cluster: make cluster"]
fn each_component_works_with_only_its_own_service_accounts_rights() {
    super::support::kubeconfig();
    let audit = std::fs::read_to_string("/var/lib/kubevirt-rs/cluster/audit/audit.log").expect("audit log");
    let refused: Vec<String> = audit
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| {
            event["user"]["username"]
                .as_str()
                .is_some_and(|u| u.starts_with("system:serviceaccount:kubevirt:"))
                && event["responseStatus"]["code"].as_i64() == Some(403)
                // RBAC's refusals, not an admission plugin's (Pod Security refuses with 403 too).
                && event["annotations"]["authorization.k8s.io/decision"].as_str() == Some("forbid")
        })
        .map(|event| {
            format!(
                "{} {} {}",
                event["user"]["username"], event["verb"], event["requestURI"]
            )
        })
        .collect();
    assert!(refused.is_empty(), "RBAC refused kubevirt-rs components: {refused:#?}");
    let can = |account: &str, verb: &str, resource: &str| {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        let subresource = format!("--subresource={subresource}");
        let user = format!("system:serviceaccount:kubevirt:{account}");
        let output = kubectl(&[
            "auth",
            "can-i",
            verb,
            resource,
            &subresource,
            "--all-namespaces",
            "--as",
            &user,
        ]);
        String::from_utf8_lossy(&output.stdout).trim() == "yes"
    };
    let expected = [
        ("kubevirt-controller", "create", "pods", true),
        ("kubevirt-controller", "update", "virtualmachineinstances/status", true),
        ("kubevirt-controller", "delete", "nodes", false),
        ("kubevirt-handler", "update", "virtualmachineinstances/status", true),
        ("kubevirt-handler", "create", "pods", false),
        ("kubevirt-handler", "delete", "virtualmachineinstances", false),
        (
            "kubevirt-apiserver",
            "create",
            "subjectaccessreviews.authorization.k8s.io",
            true,
        ),
        ("kubevirt-apiserver", "delete", "pods", true),
        ("kubevirt-apiserver", "create", "pods", false),
        ("kubevirt-apiserver", "list", "secrets", false),
    ];
    let wrong: Vec<_> = expected
        .iter()
        .filter(|(account, verb, resource, allowed)| can(account, verb, resource) != *allowed)
        .collect();
    assert!(
        wrong.is_empty(),
        "rights other than expected (account, verb, resource, expected): {wrong:?}"
    );
}

/// What `curl` gets from `path` on port 8443 of the pod at `address` over `scheme`, reached under
/// `name` (the name its certificate carries) and checked against the CA in `ca`; `None` when the
/// request fails.
fn fetch(scheme: &str, name: &str, address: &str, path: &str, ca: &std::path::Path) -> Option<String> {
    let output = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(ca)
        .arg("--resolve")
        .arg(format!("{name}:8443:{address}"))
        .arg(format!("{scheme}://{name}:8443{path}"))
        .output()
        .expect("curl runs");
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// virt-handler and virt-controller serve `/healthz` and `/metrics` over HTTPS only, with the
/// certificates virt-api made for them, as upstream's do.
#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_components_serve_healthz_and_metrics_over_https_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.crt");
    let pem = kubectl_ok(&[
        "-n",
        "kubevirt",
        "get",
        "secret",
        "kubevirt-ca",
        "--template={{index .data \"ca.crt\" | base64decode}}",
    ]);
    std::fs::write(&ca, pem).expect("CA file");
    for (component, metric) in [
        ("virt-handler", "# EOF"),
        ("virt-controller", "kubevirt_virt_controller_ready_status"),
    ] {
        let addresses = kubectl_ok(&[
            "-n",
            "kubevirt",
            "get",
            "pods",
            "-l",
            &format!("kubevirt.io={component}"),
            "-o",
            "jsonpath={.items[*].status.podIP}",
        ]);
        let address = addresses.split_whitespace().next().expect("a pod address");
        assert_eq!(
            fetch("https", component, address, "/healthz", &ca).as_deref(),
            Some("ok"),
            "{component}'s /healthz over HTTPS, its certificate checked"
        );
        let metrics = fetch("https", component, address, "/metrics", &ca).expect("metrics");
        assert!(metrics.contains(metric), "{component}'s metrics: {metrics}");
        assert_eq!(
            fetch("http", component, address, "/healthz", &ca),
            None,
            "{component} serves no plain HTTP"
        );
    }
}

/// Each component's certificate in the cluster names its holder, as upstream's do, and is signed
/// by the CA in `kubevirt-ca` (whose bundle every Secret carries).
#[test]
#[ignore = "needs the test cluster: make cluster"]
fn every_certificate_secret_names_its_holder_and_carries_the_bundle() {
    use virt_api::tls::CertFacts;
    let read = |secret: &str, key: &str| {
        kubectl_ok(&[
            "-n",
            "kubevirt",
            "get",
            "secret",
            secret,
            &format!("--template={{{{index .data \"{key}\" | base64decode}}}}"),
        ])
    };
    let bundle = read(virt_api::certificates::CA_SECRET, "ca.crt");
    let ca = CertFacts::from_pem(&read(virt_api::certificates::CA_SECRET, "tls.crt")).expect("the CA")[0].clone();
    assert!(ca.common_name.starts_with("kubevirt.io@"), "{ca:?}");
    // Valid from a little before it was made, for peers whose clock is behind.
    let skew = virt_api::certificates::plan::CLOCK_SKEW_SECONDS;
    assert_eq!(
        ca.not_after - ca.not_before,
        kubevirt_api::v1::DEFAULT_CA_SECONDS + skew
    );
    for wanted in virt_api::certificates::wanted("kubevirt") {
        let cert = CertFacts::from_pem(&read(wanted.secret, "tls.crt")).expect("a certificate")[0].clone();
        assert_eq!(cert.common_name, wanted.common_name, "{}", wanted.secret);
        assert_eq!(cert.issuer_common_name, ca.common_name, "{}", wanted.secret);
        assert_eq!(
            cert.not_after - cert.not_before,
            kubevirt_api::v1::DEFAULT_SERVER_SECONDS + skew,
            "{}",
            wanted.secret
        );
        assert_eq!(read(wanted.secret, "ca.crt"), bundle, "{}", wanted.secret);
    }
}
