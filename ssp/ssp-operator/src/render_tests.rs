use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::api::{CommonTemplates, SSPSpec, TemplateValidator};

pub(crate) fn settings() -> Settings {
    Settings {
        validator_image: "localhost/kubevirt-rs/virt-template-validator:latest".to_owned(),
        version: "1.2.3".to_owned(),
    }
}

pub(crate) fn ssp(template_validator: Option<TemplateValidator>) -> SSP {
    SSP {
        metadata: ObjectMeta {
            name: Some("ssp".to_owned()),
            namespace: Some("kubevirt".to_owned()),
            uid: Some("uid-1".to_owned()),
            generation: Some(3),
            ..ObjectMeta::default()
        },
        spec: SSPSpec {
            template_validator,
            common_templates: CommonTemplates {
                namespace: "kubevirt".to_owned(),
                ..CommonTemplates::default()
            },
            ..SSPSpec::default()
        },
        status: None,
    }
}

fn names(wanted: &[Desired]) -> Vec<String> {
    wanted.iter().map(Desired::describe).collect()
}

#[test]
fn an_ssp_wants_upstreams_validator_objects_in_upstreams_order() {
    let wanted = render(&ssp(None), &settings(), "PEM").expect("renders");
    assert_eq!(
        names(&wanted),
        [
            "ClusterRole template:view",
            "ServiceAccount kubevirt/template-validator",
            "ClusterRoleBinding template-validator",
            "Service kubevirt/virt-template-validator",
            "Service kubevirt/template-validator-metrics",
            "Deployment kubevirt/virt-template-validator",
            "ValidatingWebhookConfiguration virt-template-validator",
        ]
    );
    let service: Service = wanted[3].typed().expect("a Service");
    let port = &service.spec.expect("spec").ports.expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("http-webhook"), 443));
    let deployment: Deployment = wanted[5].typed().expect("a Deployment");
    let spec = deployment.spec.expect("spec");
    assert_eq!(spec.replicas, Some(1), "one replica when templateValidator is left out");
    let pod = spec.template.spec.expect("pod");
    let container = &pod.containers[0];
    assert_eq!(
        container.args.clone().unwrap_or_default(),
        [
            "--webhook-port=9443",
            "--metrics-port=8443",
            "--cert-dir=/etc/webhook/certs"
        ]
    );
    assert_eq!(
        container.image.as_deref(),
        Some("localhost/kubevirt-rs/virt-template-validator:latest")
    );
    let probe = container.readiness_probe.clone().expect("a readiness probe");
    assert_eq!(probe.http_get.expect("http").path.as_deref(), Some("/readyz"));
    assert_eq!(pod.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
    let webhooks: ValidatingWebhookConfiguration = wanted[6].typed().expect("a webhook configuration");
    let webhook = &webhooks.webhooks.expect("webhooks")[0];
    assert_eq!(webhook.name, VM_WEBHOOK);
    assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(
        webhook.client_config.ca_bundle.as_ref().map(|b| b.0.clone()),
        Some(b"PEM".to_vec())
    );
    let service = webhook.client_config.service.clone().expect("a service");
    assert_eq!(
        (
            service.namespace.as_str(),
            service.name.as_str(),
            service.path.as_deref()
        ),
        ("kubevirt", VALIDATOR, Some(VM_WEBHOOK_PATH))
    );
    let rule = &webhook.rules.clone().expect("rules")[0];
    assert_eq!(rule.operations.clone().unwrap_or_default(), ["CREATE", "UPDATE"]);
    assert_eq!(rule.api_versions.clone().unwrap_or_default(), ["v1alpha3", "v1"]);
}

#[test]
fn namespaced_objects_are_owned_and_cluster_scoped_ones_are_annotated() {
    let cr = ssp(None);
    for desired in render(&cr, &settings(), "PEM").expect("renders") {
        let meta = &desired.object.metadata;
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(MANAGED_BY.0).map(String::as_str),
            Some(MANAGED_BY.1),
            "{}",
            desired.describe()
        );
        assert_eq!(
            owner_of(meta),
            Some(("kubevirt".to_owned(), "ssp".to_owned())),
            "{}",
            desired.describe()
        );
        if desired.namespace.is_some() {
            assert!(meta.annotations.is_none(), "{}", desired.describe());
        } else {
            assert!(meta.owner_references.is_none(), "{}", desired.describe());
            assert!(made_for(meta.annotations.as_ref(), &cr), "{}", desired.describe());
        }
    }
    let mut other = ssp(None);
    other.metadata.name = Some("other".to_owned());
    let wanted = render(&other, &settings(), "PEM").expect("renders");
    assert!(!made_for(wanted[0].object.metadata.annotations.as_ref(), &cr));
}

#[test]
fn replicas_placement_and_labels_follow_the_cr() {
    let placement = serde_json::from_value(json!({
        "nodeSelector": { "disk": "ssd" },
        "tolerations": [{ "key": "infra", "operator": "Exists" }],
        "affinity": { "podAntiAffinity": { "preferredDuringSchedulingIgnoredDuringExecution": [
            { "weight": 5, "podAffinityTerm": { "topologyKey": "zone" } }
        ] } },
    }))
    .expect("a placement");
    let mut cr = ssp(Some(TemplateValidator {
        replicas: Some(3),
        placement: Some(placement),
    }));
    cr.metadata.labels = Some([("app.kubernetes.io/part-of".to_owned(), "hco".to_owned())].into());
    let wanted = render(&cr, &settings(), "PEM").expect("renders");
    assert_eq!(
        names(&wanted).last().map(String::as_str),
        Some("PodDisruptionBudget kubevirt/virt-template-validator"),
        "two or more replicas keep one up through drains"
    );
    let deployment: Deployment = wanted[5].typed().expect("a Deployment");
    let labels = deployment.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app.kubernetes.io/part-of").map(String::as_str), Some("hco"));
    assert_eq!(labels.get("app.kubernetes.io/version").map(String::as_str), Some(""));
    let spec = deployment.spec.expect("spec");
    assert_eq!(spec.replicas, Some(3));
    let pod = spec.template.spec.expect("pod");
    assert_eq!(
        pod.node_selector.unwrap_or_default().get("disk").map(String::as_str),
        Some("ssd")
    );
    assert_eq!(pod.tolerations.unwrap_or_default().len(), 1);
    let terms = pod
        .affinity
        .and_then(|a| a.pod_anti_affinity)
        .and_then(|a| a.preferred_during_scheduling_ignored_during_execution)
        .unwrap_or_default();
    let keys: Vec<(i32, &str)> = terms
        .iter()
        .map(|t| (t.weight, t.pod_affinity_term.topology_key.as_str()))
        .collect();
    assert_eq!(keys, [(1, "kubernetes.io/hostname"), (5, "zone")]);
}

#[test]
fn the_serving_certificate_names_the_service() {
    let chain = chain("kubevirt");
    let leaf = chain.leaf.expect("a serving certificate");
    assert_eq!(leaf.secret, CERT_SECRET);
    assert_eq!(leaf.common_name, "virt-template-validator.kubevirt.svc");
    assert_eq!(
        leaf.usage,
        operator_kit::certificates::issue::Usage::Server(vec![
            "virt-template-validator.kubevirt.svc".to_owned(),
            "virt-template-validator.kubevirt.svc.cluster.local".to_owned(),
            "virt-template-validator.kubevirt".to_owned(),
            "virt-template-validator".to_owned(),
        ])
    );
}

#[test]
fn an_ssp_without_a_uid_is_not_rendered() {
    let mut cr = ssp(None);
    cr.metadata.uid = None;
    assert!(matches!(render(&cr, &settings(), "PEM"), Err(RenderError::NoUid(name)) if name == "ssp"));
}
