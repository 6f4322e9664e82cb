//! `manifests/operator`: the KubeVirt CRD it carries is the one the types generate, its objects
//! and the sample CR read as their types, the operator's image and its default registry agree,
//! and its RBAC lets it write every object it renders.
//!
//! Set `KUBEVIRT_RS_UPDATE_GOLDEN=1` to rewrite the CRD copy from the types.

use std::path::{Path, PathBuf};

#[path = "../../kubevirt-tests/support/generated.rs"]
mod generated;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::core::ObjectMeta;
use kubevirt_api::v1::KubeVirt;
use operator_kit::manifests::documents;
use virt_operator::render::{self, Settings};

fn operator_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/operator")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(operator_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn the_kubevirt_crd_copy_matches_the_types() {
    let files = kubevirt_api::crd::render_all()
        .expect("CRDs render")
        .into_iter()
        .filter(|c| c.file_name == "kubevirts.kubevirt.io.yaml")
        .map(|c| (c.file_name, c.yaml))
        .collect::<Vec<_>>();
    assert_eq!(files.len(), 1);
    generated::assert_committed(
        &operator_dir().join("crds"),
        files,
        "KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p virt-operator --test manifests",
    );
}

#[test]
fn the_sample_cr_reads_as_a_kubevirt_in_the_operators_namespace() {
    let cr: KubeVirt = serde_saphyr::from_str(&read("kubevirt_cr.yaml")).expect("a KubeVirt");
    assert_eq!(cr.metadata.namespace.as_deref(), Some("kubevirt"));
    assert_eq!(cr.spec.image_pull_policy.as_deref(), Some("IfNotPresent"));
}

fn operator_objects() -> Vec<kube::core::DynamicObject> {
    let text: &'static str = Box::leak(read("operator.yaml").into_boxed_str());
    documents("manifests/operator/operator.yaml", text).expect("reads")
}

#[test]
fn the_operators_image_is_its_default_registry_and_tag() {
    let object = operator_objects()
        .into_iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .expect("the Deployment");
    let deployment: Deployment = operator_kit::objects::parse(&object, "virt-operator").expect("a Deployment");
    let container = &deployment.spec.and_then(|s| s.template.spec).expect("a pod").containers[0];
    let env_image = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "VIRT_OPERATOR_IMAGE")
        .and_then(|e| e.value.clone());
    assert_eq!(env_image, container.image, "the image it runs is the one it reads");
    let settings = Settings::from_image("kubevirt", "1", env_image.as_deref().unwrap_or_default());
    assert_eq!(
        (settings.registry.as_str(), settings.tag.as_str()),
        ("localhost/kubevirt-rs", "latest"),
        "the templates' images, so a default install renders them unchanged"
    );
}

#[test]
fn the_operators_cluster_role_lets_it_write_everything_it_renders() {
    let object = operator_objects()
        .into_iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "ClusterRole"))
        .expect("the ClusterRole");
    let role: ClusterRole = operator_kit::objects::parse(&object, "kubevirt-operator").expect("a ClusterRole");
    let rules = role.rules.unwrap_or_default();
    let allows = |group: &str, plural: &str, verb: &str| {
        rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|p| p == plural)
                && r.verbs.iter().any(|v| v == verb)
        })
    };
    let cr = KubeVirt {
        metadata: ObjectMeta {
            name: Some("kubevirt".to_owned()),
            namespace: Some("kubevirt".to_owned()),
            uid: Some("uid".to_owned()),
            ..ObjectMeta::default()
        },
        spec: kubevirt_api::v1::KubeVirtSpec::default(),
        status: None,
    };
    let settings = Settings::from_image("kubevirt", "1", "localhost/kubevirt-rs/virt-operator:latest");
    let rendered = render::render(&cr, &settings).expect("renders");
    let common = rendered.instancetypes.iter();
    assert!(
        common.len() > 100,
        "the common instance types and preferences are rendered"
    );
    for desired in rendered.always.iter().chain(rendered.workloads.values()).chain(common) {
        let resource = &desired.resource;
        for verb in ["get", "list", "watch", "create", "patch", "update", "delete"] {
            assert!(
                allows(&resource.group, &resource.plural, verb),
                "{verb} {}.{} for {}",
                resource.plural,
                resource.group,
                desired.describe()
            );
        }
    }
    for (plural, verb) in [
        ("kubevirts", "patch"),
        ("kubevirts/status", "update"),
        ("kubevirts/finalizers", "update"),
        ("virtualmachineinstances", "list"),
        ("virtualmachines", "list"),
        ("virtualmachineinstancereplicasets", "list"),
    ] {
        assert!(allows("kubevirt.io", plural, verb), "{verb} {plural}");
    }
    for plural in ["secrets", "configmaps"] {
        assert!(!allows("", plural, "get"), "{plural} are not readable cluster-wide");
    }
}

#[test]
fn the_operators_role_keeps_its_webhooks_certificate_in_its_namespace() {
    let object = operator_objects()
        .into_iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Role"))
        .expect("the Role");
    assert_eq!(object.metadata.namespace.as_deref(), Some("kubevirt"));
    let role: k8s_openapi::api::rbac::v1::Role =
        operator_kit::objects::parse(&object, "kubevirt-operator").expect("a Role");
    for plural in ["secrets", "configmaps"] {
        for verb in ["get", "list", "watch", "create", "patch", "delete"] {
            assert!(
                role.rules.iter().flatten().any(|r| {
                    r.api_groups.iter().flatten().any(String::is_empty)
                        && r.resources.iter().flatten().any(|p| p == plural)
                        && r.verbs.iter().any(|v| v == verb)
                }),
                "{verb} {plural}"
            );
        }
    }
    let binding = operator_objects()
        .into_iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "RoleBinding"))
        .expect("the RoleBinding");
    assert_eq!(binding.data["roleRef"]["name"], "kubevirt-operator");
    assert_eq!(binding.data["subjects"][0]["name"], "kubevirt-operator");
}
