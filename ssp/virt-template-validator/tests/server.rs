//! The webhook over real TLS: reviews of VMs with their own rules and with a template's (read
//! from a fake), a review of another resource, a body that is not a review, the probes and the
//! metric; and the template adapter against a mock API server.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use control_loop::tls::test_pki::{TestCa, https_request};
use control_loop::tls::{CertSource, server_tls};
use http_body_util::Full;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use virt_template_validator::server::{KubeTemplates, Port, Templates, Validator, serve};

#[path = "../../../kubevirt-tests/support/mock_api_server.rs"]
mod mock_api_server;

/// One template, `openshift/fedora`, whose rules cap the cores at 4; reading `broken/*` fails.
struct FakeTemplates;

impl Templates for FakeTemplates {
    async fn validations(&self, namespace: &str, name: &str) -> Result<Option<String>, String> {
        match (namespace, name) {
            ("openshift", "fedora") => Ok(Some(
                r#"[{"name": "cores", "rule": "integer", "path": "jsonpath::.spec.domain.cpu.cores",
                     "message": "Core amount not within range", "min": 1, "max": 4}]"#
                    .to_owned(),
            )),
            ("broken", _) => Err("reading template broken/x: the API server is gone".to_owned()),
            _ => Ok(None),
        }
    }
}

struct Setup {
    dir: tempfile::TempDir,
    ca: TestCa,
    address: SocketAddr,
    metrics: SocketAddr,
}

async fn setup() -> Setup {
    let ca = TestCa::new("ssp-signer");
    let serving = ca.server("virt-template-validator.kubevirt.svc", &["localhost"]);
    let tls = server_tls(&CertSource::Pem {
        origin: "test".to_owned(),
        cert: serving.cert,
        key: serving.key,
    })
    .expect("tls");
    let validator = Arc::new(Validator::new(FakeTemplates));
    let mut addresses = Vec::new();
    for port in [Port::Webhook, Port::Metrics] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
        addresses.push(listener.local_addr().expect("address"));
        tokio::spawn(serve(
            listener,
            port,
            tls.config.clone(),
            Arc::clone(&validator),
            tokio_util::sync::CancellationToken::new(),
        ));
    }
    Setup {
        dir: tempfile::tempdir().expect("tempdir"),
        ca,
        address: addresses[0],
        metrics: addresses[1],
    }
}

impl Setup {
    async fn send(&self, method: &str, path: &str, content_type: &str, body: &str) -> (u16, String) {
        self.send_to(self.address, method, path, content_type, body).await
    }

    async fn send_to(
        &self,
        address: SocketAddr,
        method: &str,
        path: &str,
        content_type: &str,
        body: &str,
    ) -> (u16, String) {
        let ca = self.dir.path().join("ca.crt");
        std::fs::write(&ca, self.ca.cert_pem()).expect("ca");
        let config = control_loop::tls::client_tls(&ca, None).expect("tls");
        let answer = https_request(
            config,
            address,
            method,
            path,
            &[("Content-Type", content_type)],
            Full::new(Bytes::from(body.to_owned())),
        )
        .await
        .expect("answer");
        (answer.status, answer.body)
    }

    async fn review(&self, resource: &str, vm: &Value) -> Value {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "req-1", "operation": "CREATE",
            "resource": {"group": "kubevirt.io", "version": "v1", "resource": resource}, "object": vm}});
        let (status, body) = self
            .send(
                "POST",
                "/virtualmachine-validate",
                "application/json",
                &review.to_string(),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).expect("an AdmissionReview")["response"].clone()
    }
}

fn vm(metadata: &Value, cores: u64) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": metadata,
           "spec": {"template": {"spec": {"domain": {"cpu": {"cores": cores}}}}}})
}

fn from_template(namespace: &str) -> Value {
    json!({"name": "vm", "namespace": "default",
           "labels": {"vm.kubevirt.io/template": "fedora", "vm.kubevirt.io/template.namespace": namespace}})
}

#[tokio::test]
async fn vms_are_judged_by_their_templates_rules_or_their_own() {
    let setup = setup().await;
    let refused = setup
        .review("virtualmachines", &vm(&from_template("openshift"), 6))
        .await;
    assert_eq!(refused["uid"], "req-1");
    assert_eq!(refused["allowed"], false);
    assert_eq!(refused["status"]["code"], 422);
    assert_eq!(
        refused["status"]["message"],
        "Core amount not within range: value 6 is higher than maximum [4]"
    );
    assert_eq!(
        refused["status"]["details"]["causes"][0]["field"],
        ".spec.domain.cpu.cores"
    );
    let allowed = setup
        .review("virtualmachines", &vm(&from_template("openshift"), 2))
        .await;
    assert_eq!(allowed["allowed"], true);
    // A template that is not there has no rules; one that cannot be read is an error.
    assert_eq!(
        setup
            .review("virtualmachines", &vm(&from_template("elsewhere"), 6))
            .await["allowed"],
        true
    );
    let unreadable = setup.review("virtualmachines", &vm(&from_template("broken"), 2)).await;
    assert_eq!(unreadable["status"]["code"], 400);
    // A VM on its way out is admitted before any template is read.
    let mut leaving = from_template("broken");
    leaving["deletionTimestamp"] = json!("2026-12-02T00:00:00Z");
    assert_eq!(setup.review("virtualmachines", &vm(&leaving, 9)).await["allowed"], true);
    // The VM's own rules replace the template's.
    let mut own = from_template("openshift");
    own["annotations"] = json!({"vm.kubevirt.io/validations": "[]"});
    assert_eq!(setup.review("virtualmachines", &vm(&own, 6)).await["allowed"], true);

    let (_, metrics) = setup.send_to(setup.metrics, "GET", "/metrics", "text/plain", "").await;
    assert!(
        metrics.contains("kubevirt_ssp_template_validator_rejected_total 1\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn other_resources_bodies_and_paths_are_refused() {
    let setup = setup().await;
    let other = setup
        .review("virtualmachineinstances", &vm(&from_template("openshift"), 6))
        .await;
    assert_eq!(other["allowed"], false);
    assert_eq!(
        other["status"]["message"],
        "expect resource kubevirt.io/v1, Resource=virtualmachineinstances to be 'virtualmachines'"
    );
    assert_eq!(
        setup
            .send("POST", "/virtualmachine-validate", "text/plain", "{}")
            .await
            .0,
        400,
        "not JSON by its Content-Type"
    );
    assert_eq!(
        setup
            .send("POST", "/virtualmachine-validate", "application/json", "[")
            .await
            .0,
        400
    );
    assert_eq!(
        setup
            .send("GET", "/virtualmachine-validate", "application/json", "")
            .await
            .0,
        405
    );
    for probe in ["/readyz", "/healthz"] {
        assert_eq!(setup.send("GET", probe, "text/plain", "").await, (200, "ok".to_owned()));
    }
    assert_eq!(setup.send("GET", "/other", "text/plain", "").await.0, 404);
    // Each port serves its own paths only, as upstream's two servers.
    assert_eq!(setup.send("GET", "/metrics", "text/plain", "").await.0, 404);
    let metrics = |path: &'static str| setup.send_to(setup.metrics, "GET", path, "text/plain", "");
    assert_eq!(metrics("/readyz").await.0, 404);
    assert_eq!(metrics("/metrics").await.0, 200);
}

#[tokio::test]
async fn templates_are_read_from_the_template_api_and_a_missing_api_is_no_template() {
    let template = json!({"apiVersion": "template.openshift.io/v1", "kind": "Template",
        "metadata": {"name": "fedora", "namespace": "openshift", "annotations": {"validations": "[]"}}});
    let gone = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                      "message": "the server could not find the requested resource"});
    let broken = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500,
                        "message": "etcd is gone"});
    let (client, log) = mock_api_server::api_server(vec![(200, template), (404, gone), (500, broken)]);
    let templates = KubeTemplates(client);
    assert_eq!(
        templates.validations("openshift", "fedora").await,
        Ok(Some("[]".to_owned()))
    );
    assert_eq!(templates.validations("openshift", "other").await, Ok(None));
    let error = templates
        .validations("openshift", "fedora")
        .await
        .expect_err("an error");
    assert!(error.starts_with("reading template openshift/fedora: "), "{error}");
    let paths: Vec<String> = log
        .lock()
        .expect("log")
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        paths[..2],
        [
            "GET /apis/template.openshift.io/v1/namespaces/openshift/templates/fedora",
            "GET /apis/template.openshift.io/v1/namespaces/openshift/templates/other",
        ]
    );
}
