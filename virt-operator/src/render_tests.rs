use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Toleration;
use kube::core::ObjectMeta;
use kubevirt_api::v1::{ComponentConfig, KubeVirtSpec};
use operator_kit::placement::NodePlacement;
use pretty_assertions::assert_eq;

use super::*;

pub fn settings() -> Settings {
    Settings::from_image("kubevirt", "1.0.0", "localhost/kubevirt-rs/virt-operator:latest")
}

pub fn kubevirt(spec: KubeVirtSpec) -> KubeVirt {
    KubeVirt {
        metadata: ObjectMeta {
            name: Some("kubevirt".to_owned()),
            namespace: Some("kubevirt".to_owned()),
            uid: Some("kv-uid".to_owned()),
            generation: Some(1),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

fn deployment(rendered: &Rendered, component: Component) -> Deployment {
    rendered.workloads[&component].typed().expect("a Deployment")
}

fn images(pod: &PodSpec) -> Vec<String> {
    pod.containers.iter().filter_map(|c| c.image.clone()).collect()
}

#[test]
fn the_operators_image_gives_the_default_registry_and_tag() {
    let cases = [
        (
            "localhost/kubevirt-rs/virt-operator:latest",
            "localhost/kubevirt-rs",
            "latest",
        ),
        ("quay.io/kubevirt/virt-operator:v1.6.0", "quay.io/kubevirt", "v1.6.0"),
        ("registry:5000/kv/virt-operator", "registry:5000/kv", "latest"),
        ("virt-operator:v1", "", "v1"),
    ];
    for (image, registry, tag) in cases {
        let settings = Settings::from_image("ns", "1", image);
        assert_eq!(
            (settings.registry.as_str(), settings.tag.as_str()),
            (registry, tag),
            "{image}"
        );
    }
}

#[test]
fn the_crs_registry_and_tag_win_over_the_operators() {
    let cr = kubevirt(KubeVirtSpec {
        image_registry: Some("quay.io/mirror".to_owned()),
        image_tag: Some("v2".to_owned()),
        ..KubeVirtSpec::default()
    });
    let target = Target::of(&cr, &settings());
    assert_eq!(target.image("virt-api"), "quay.io/mirror/virt-api:v2");
    let empty = kubevirt(KubeVirtSpec {
        image_tag: Some(String::new()),
        ..KubeVirtSpec::default()
    });
    assert_eq!(
        Target::of(&empty, &settings()).image("virt-api"),
        "localhost/kubevirt-rs/virt-api:latest"
    );
}

#[test]
fn every_template_renders_with_its_component_and_every_crd_but_kubevirts() {
    let rendered = render(&kubevirt(KubeVirtSpec::default()), &settings()).expect("renders");
    assert_eq!(
        rendered.workloads.keys().copied().collect::<Vec<_>>(),
        Component::ALL.to_vec()
    );
    let crds: Vec<&str> = rendered
        .always
        .iter()
        .filter(|d| d.resource.kind == "CustomResourceDefinition")
        .map(|d| d.name.as_str())
        .collect();
    assert!(crds.contains(&"virtualmachineinstances.kubevirt.io"), "{crds:?}");
    assert!(
        !crds.contains(&"kubevirts.kubevirt.io"),
        "the operator's install brings it"
    );
    let names: Vec<String> = rendered.always.iter().map(Desired::describe).collect();
    for expected in [
        "PriorityClass kubevirt-cluster-critical",
        "ServiceAccount kubevirt/kubevirt-apiserver",
        "RoleBinding kube-system/kubevirt-apiserver-authentication-reader",
        "APIService v1.subresources.kubevirt.io",
        "ValidatingWebhookConfiguration virt-api-validator",
        "Service kubevirt/virt-api",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} in {names:?}");
    }
    assert_eq!(
        rendered.workloads[&Component::Handler].describe(),
        "DaemonSet kubevirt/virt-handler"
    );
}

#[test]
fn namespaced_objects_are_owned_and_cluster_scoped_ones_name_their_cr() {
    let rendered = render(&kubevirt(KubeVirtSpec::default()), &settings()).expect("renders");
    for desired in rendered.always.iter().chain(rendered.workloads.values()) {
        let meta = &desired.object.metadata;
        assert_eq!(
            meta.labels
                .as_ref()
                .and_then(|l| l.get(MANAGED_BY.0))
                .map(String::as_str),
            Some("virt-operator"),
            "{}",
            desired.describe()
        );
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(annotations[VERSION_ANNOTATION], "latest", "{}", desired.describe());
        assert_eq!(annotations[REGISTRY_ANNOTATION], "localhost/kubevirt-rs");
        assert_eq!(annotations[IDENTIFIER_ANNOTATION], rendered.deployment_id);
        let owner = owner_of(meta);
        // The CR's namespace: its own for the objects it owns, the annotation's for the others.
        let expected_namespace = "kubevirt";
        assert_eq!(
            owner,
            Some((expected_namespace.to_owned(), "kubevirt".to_owned())),
            "{}",
            desired.describe()
        );
        if desired.namespace.as_deref() == Some("kubevirt") {
            assert!(!annotations.contains_key(OWNER_ANNOTATION), "{}", desired.describe());
        } else {
            assert!(meta.owner_references.is_none(), "{}", desired.describe());
        }
    }
    let unowned: Vec<String> = rendered
        .unowned()
        .iter()
        .map(|(r, ns, n)| operator_kit::objects::describe(&r.kind, ns.as_deref(), n))
        .collect();
    for expected in [
        "ClusterRole kubevirt-controller",
        "RoleBinding kube-system/kubevirt-apiserver-authentication-reader",
    ] {
        assert!(unowned.iter().any(|u| u == expected), "{expected} in {unowned:?}");
    }
}

#[test]
fn the_operators_namespace_replaces_the_templates() {
    let settings = Settings::from_image("virt", "1", "localhost/kubevirt-rs/virt-operator:latest");
    let rendered = render(&kubevirt(KubeVirtSpec::default()), &settings).expect("renders");
    let binding = rendered
        .always
        .iter()
        .find(|d| d.describe() == "ClusterRoleBinding kubevirt-controller")
        .expect("the controller's binding");
    assert_eq!(binding.object.data["subjects"][0]["namespace"], "virt");
    let webhook = rendered
        .always
        .iter()
        .find(|d| d.name == "virt-api-mutator")
        .expect("the mutator");
    assert_eq!(
        webhook.object.data["webhooks"][0]["clientConfig"]["service"]["namespace"],
        "virt"
    );
    let service = rendered
        .always
        .iter()
        .find(|d| d.name == "v1.subresources.kubevirt.io")
        .expect("an APIService");
    assert_eq!(service.object.data["spec"]["service"]["namespace"], "virt");
    assert_eq!(rendered.workloads[&Component::Api].namespace.as_deref(), Some("virt"));
    assert!(
        rendered
            .always
            .iter()
            .any(|d| d.describe() == "RoleBinding kube-system/kubevirt-apiserver-authentication-reader")
    );
}

#[test]
fn images_pull_policy_and_the_launcher_image_follow_the_target() {
    let cr = kubevirt(KubeVirtSpec {
        image_tag: Some("v9".to_owned()),
        image_pull_policy: Some("Always".to_owned()),
        ..KubeVirtSpec::default()
    });
    let rendered = render(&cr, &settings()).expect("renders");
    let controller = deployment(&rendered, Component::Controller);
    let pod = controller.spec.and_then(|s| s.template.spec).expect("a pod");
    assert_eq!(images(&pod), ["localhost/kubevirt-rs/virt-controller:v9"]);
    assert_eq!(pod.containers[0].image_pull_policy.as_deref(), Some("Always"));
    let args = pod.containers[0].args.clone().unwrap_or_default();
    assert!(
        args.contains(&"--launcher-image=localhost/kubevirt-rs/virt-launcher:v9".to_owned()),
        "{args:?}"
    );
    let handler: DaemonSet = rendered.workloads[&Component::Handler].typed().expect("a DaemonSet");
    let pod = handler.spec.and_then(|s| s.template.spec).expect("a pod");
    for container in pod.containers.iter().chain(pod.init_containers.iter().flatten()) {
        let image = container.image.as_deref().unwrap_or_default();
        assert!(image.ends_with(":v9"), "{image}");
        assert_eq!(container.image_pull_policy.as_deref(), Some("Always"));
    }
}

#[test]
fn infra_and_workloads_place_their_components_on_top_of_the_templates() {
    let toleration = Toleration {
        key: Some("dedicated".to_owned()),
        operator: Some("Exists".to_owned()),
        ..Toleration::default()
    };
    let placement = |label: &str| ComponentConfig {
        node_placement: Some(NodePlacement {
            node_selector: BTreeMap::from([("role".to_owned(), label.to_owned())]),
            affinity: None,
            tolerations: vec![toleration.clone()],
        }),
        replicas: None,
    };
    let cr = kubevirt(KubeVirtSpec {
        infra: Some(ComponentConfig {
            replicas: Some(3),
            ..placement("infra")
        }),
        workloads: Some(placement("vms")),
        ..KubeVirtSpec::default()
    });
    let rendered = render(&cr, &settings()).expect("renders");
    for component in [Component::Api, Component::Controller] {
        let spec = deployment(&rendered, component).spec.expect("a spec");
        assert_eq!(spec.replicas, Some(3), "{component:?}");
        let pod = spec.template.spec.expect("a pod");
        assert_eq!(pod.node_selector.unwrap_or_default()["role"], "infra");
        assert!(pod.tolerations.unwrap_or_default().contains(&toleration));
    }
    let controller = deployment(&rendered, Component::Controller);
    let tolerations = controller
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.tolerations)
        .unwrap_or_default();
    assert!(
        tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("CriticalAddonsOnly")),
        "the template's own toleration stays: {tolerations:?}"
    );
    let handler: DaemonSet = rendered.workloads[&Component::Handler].typed().expect("a DaemonSet");
    let pod = handler.spec.and_then(|s| s.template.spec).expect("a pod");
    assert_eq!(pod.node_selector.unwrap_or_default()["role"], "vms");
}

#[test]
fn the_deployment_id_changes_with_what_is_deployed_only() {
    let id = |spec: KubeVirtSpec| render(&kubevirt(spec), &settings()).expect("renders").deployment_id;
    let plain = id(KubeVirtSpec::default());
    assert_eq!(plain, id(KubeVirtSpec::default()));
    assert_eq!(plain.len(), 64);
    let other_tag = id(KubeVirtSpec {
        image_tag: Some("v2".to_owned()),
        ..KubeVirtSpec::default()
    });
    assert_ne!(plain, other_tag);
    let configured = id(KubeVirtSpec {
        configuration: Some(kubevirt_api::v1::KubeVirtConfiguration {
            machine_type: Some("q35".to_owned()),
            ..Default::default()
        }),
        ..KubeVirtSpec::default()
    });
    assert_eq!(plain, configured, "the components read spec.configuration themselves");
}

#[test]
fn a_cr_without_uid_is_refused() {
    let mut cr = kubevirt(KubeVirtSpec::default());
    cr.metadata.uid = None;
    let error = render(&cr, &settings()).expect_err("no owner");
    assert_eq!(error.to_string(), "the KubeVirt kubevirt has no uid");
}
