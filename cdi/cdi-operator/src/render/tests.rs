use cdi_api::cdi::{CDISpec, ComponentConfig, NodePlacement};
use cdi_api::cdi_config::CDIConfigSpec;
use k8s_openapi::api::core::v1::Toleration;
use pretty_assertions::assert_eq;

use super::*;

fn settings() -> Settings {
    Settings {
        namespace: "cdi-ns".to_owned(),
        version: "v9".to_owned(),
        images: Images {
            controller: "example/controller:9".to_owned(),
            apiserver: "example/apiserver:9".to_owned(),
            uploadproxy: "example/uploadproxy:9".to_owned(),
            importer: "example/importer:9".to_owned(),
            uploadserver: "example/uploadserver:9".to_owned(),
            cloner: "example/cloner:9".to_owned(),
        },
    }
}

fn issued() -> Issued {
    Issued {
        apiserver_bundle: "API CA".to_owned(),
        next_renewal: 0,
    }
}

fn linux() -> NodePlacement {
    NodePlacement {
        node_selector: [("kubernetes.io/os".to_owned(), "linux".to_owned())].into(),
        tolerations: vec![Toleration {
            key: Some("CriticalAddonsOnly".to_owned()),
            operator: Some("Exists".to_owned()),
            ..Toleration::default()
        }],
        ..NodePlacement::default()
    }
}

/// Upstream's sample CR with every field the operator acts on, as the API server gives it.
fn sample() -> CDI {
    let mut cr = CDI::new(
        "cdi",
        CDISpec {
            image_pull_policy: Some("Always".to_owned()),
            infra: Some(ComponentConfig {
                placement: linux(),
                api_server_replicas: Some(2),
                upload_proxy_replicas: Some(3),
                ..ComponentConfig::default()
            }),
            workload: Some(NodePlacement {
                node_selector: [("disk".to_owned(), "fast".to_owned())].into(),
                ..NodePlacement::default()
            }),
            priority_class: Some("system-cluster-critical".to_owned()),
            config: Some(CDIConfigSpec {
                scratch_space_storage_class: Some("hostpath-csi".to_owned()),
                ..CDIConfigSpec::default()
            }),
            ..CDISpec::default()
        },
    );
    cr.metadata.uid = Some("cdi-uid".to_owned());
    cr
}

fn find<'a>(wanted: &'a [Desired], kind: &str, name: &str) -> &'a Desired {
    wanted
        .iter()
        .find(|d| d.resource.kind == kind && d.name == name)
        .unwrap_or_else(|| panic!("{kind} {name}"))
}

fn deployment(wanted: &[Desired], name: &str) -> Deployment {
    find(wanted, "Deployment", name).typed().expect("a Deployment")
}

#[test]
fn a_cr_becomes_cdis_crds_components_and_config_all_owned_and_labelled() {
    let wanted = render(&sample(), &settings(), &issued()).expect("renders");
    let crds: Vec<_> = wanted
        .iter()
        .filter(|d| d.resource.kind == "CustomResourceDefinition")
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(
        crds,
        [
            "datavolumes.cdi.kubevirt.io",
            "datasources.cdi.kubevirt.io",
            "volumeimportsources.cdi.kubevirt.io",
            "volumeuploadsources.cdi.kubevirt.io",
            "storageprofiles.cdi.kubevirt.io",
            "cdiconfigs.cdi.kubevirt.io",
        ],
        "every CRD but CDI's own, which the operator's install brings"
    );
    for desired in &wanted {
        let meta = &desired.object.metadata;
        let owner = meta.owner_references.as_ref().and_then(|o| o.first());
        assert_eq!(
            owner.map(|o| (o.kind.as_str(), o.name.as_str(), o.uid.as_str(), o.controller)),
            Some(("CDI", "cdi", "cdi-uid", Some(true))),
            "{}",
            desired.describe()
        );
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("app.kubernetes.io/managed-by").map(String::as_str),
            Some("cdi-operator"),
            "{}",
            desired.describe()
        );
        let namespaced = !CLUSTER_KINDS.contains(&desired.resource.kind.as_str())
            && !["CustomResourceDefinition", "CDIConfig"].contains(&desired.resource.kind.as_str());
        let reads_the_aggregation_ca =
            desired.describe() == "RoleBinding kube-system/cdi-apiserver-authentication-reader";
        assert_eq!(
            desired.namespace.as_deref(),
            namespaced.then_some(if reads_the_aggregation_ca {
                "kube-system"
            } else {
                "cdi-ns"
            }),
            "{}",
            desired.describe()
        );
    }
    for (kind, name) in [
        ("ServiceAccount", "cdi-sa"),
        ("ClusterRole", "cdi"),
        ("Deployment", "cdi-deployment"),
        ("Deployment", "cdi-apiserver"),
        ("Deployment", "cdi-uploadproxy"),
        ("Service", "cdi-api"),
        ("Service", "cdi-uploadproxy"),
        ("APIService", "v1beta1.upload.cdi.kubevirt.io"),
        ("MutatingWebhookConfiguration", "cdi-api-datavolume-mutate"),
        ("ValidatingWebhookConfiguration", "cdi-api-validate"),
        ("ClusterRole", "cdi.kubevirt.io:edit"),
    ] {
        find(&wanted, kind, name);
    }
    let config = find(&wanted, "CDIConfig", "config");
    assert_eq!(
        config.object.data["spec"],
        serde_json::json!({"scratchSpaceStorageClass": "hostpath-csi"})
    );
    let without_config = CDI {
        spec: CDISpec {
            config: None,
            ..sample().spec
        },
        ..sample()
    };
    let wanted = render(&without_config, &settings(), &issued()).expect("renders");
    assert!(
        wanted.iter().all(|d| d.resource.kind != "CDIConfig"),
        "CDIConfig's spec is left to its users"
    );
}

#[test]
fn the_api_registrations_point_at_the_namespace_with_the_apiserver_ca() {
    let wanted = render(&sample(), &settings(), &issued()).expect("renders");
    let api_service = &find(&wanted, "APIService", "v1beta1.upload.cdi.kubevirt.io")
        .object
        .data;
    assert_eq!(api_service["spec"]["service"]["namespace"], "cdi-ns");
    assert_eq!(api_service["spec"]["caBundle"], "QVBJIENB", "base64 of the bundle");
    let webhook = &find(&wanted, "MutatingWebhookConfiguration", "cdi-api-datavolume-mutate")
        .object
        .data["webhooks"][0]["clientConfig"];
    assert_eq!(webhook["service"]["namespace"], "cdi-ns");
    assert_eq!(webhook["caBundle"], "QVBJIENB");
    let binding = &find(&wanted, "ClusterRoleBinding", "cdi-sa").object.data;
    assert_eq!(binding["subjects"][0]["namespace"], "cdi-ns");
}

#[test]
fn the_deployments_take_the_crs_images_placement_replicas_and_priority() {
    let wanted = render(&sample(), &settings(), &issued()).expect("renders");
    for (name, image, replicas) in [
        ("cdi-deployment", "example/controller:9", Some(1)),
        ("cdi-apiserver", "example/apiserver:9", Some(2)),
        ("cdi-uploadproxy", "example/uploadproxy:9", Some(3)),
    ] {
        let deployment = deployment(&wanted, name);
        let spec = deployment.spec.expect("spec");
        assert_eq!(spec.replicas, replicas, "{name}");
        let pod = spec.template.spec.expect("pod");
        assert_eq!(pod.node_selector, Some(linux().node_selector), "{name}");
        assert_eq!(pod.tolerations, Some(linux().tolerations), "{name}");
        assert_eq!(pod.priority_class_name.as_deref(), Some("system-cluster-critical"));
        let container = &pod.containers[0];
        assert_eq!(container.image.as_deref(), Some(image), "{name}");
        assert_eq!(container.image_pull_policy.as_deref(), Some("Always"), "{name}");
    }
    let controller = deployment(&wanted, "cdi-deployment");
    let template = controller.spec.expect("spec").template;
    let env: BTreeMap<String, Option<String>> = template.spec.expect("pod").containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    for (name, value) in [
        ("IMPORTER_IMAGE", "example/importer:9"),
        ("UPLOADSERVER_IMAGE", "example/uploadserver:9"),
        ("CLONER_IMAGE", "example/cloner:9"),
        ("PULL_POLICY", "Always"),
        (WORKLOAD_ENV, r#"{"nodeSelector":{"disk":"fast"}}"#),
    ] {
        assert_eq!(env.get(name).cloned().flatten().as_deref(), Some(value), "{name}");
    }
    assert_eq!(
        env.get("CDI_NAMESPACE"),
        Some(&None),
        "the namespace still comes from the pod"
    );
}

#[test]
fn fields_the_operator_does_not_act_on_are_refused_by_name() {
    assert_eq!(refusal(&sample()), None);
    let with = |spec: CDISpec| CDI { spec, ..sample() };
    let cases = [
        (
            with(CDISpec {
                customize_components: Some(serde_json::json!({"patches": [{"resourceName": "cdi-deployment"}]})),
                ..sample().spec
            }),
            "spec.customizeComponents",
        ),
        (
            with(CDISpec {
                infra: Some(ComponentConfig {
                    deployment_replicas: Some(2),
                    ..ComponentConfig::default()
                }),
                ..sample().spec
            }),
            "spec.infra.deploymentReplicas",
        ),
        (
            with(CDISpec {
                cert_config: Some(cdi_api::cdi::CDICertConfig {
                    ca: Some(cdi_api::cdi::CertConfig {
                        duration: Some("1h".to_owned()),
                        renew_before: Some("2h".to_owned()),
                    }),
                    ..cdi_api::cdi::CDICertConfig::default()
                }),
                ..sample().spec
            }),
            "spec.certConfig.ca",
        ),
    ];
    for (cr, field) in cases {
        let message = refusal(&cr).unwrap_or_else(|| panic!("{field} refused"));
        assert!(message.starts_with(field), "{message}");
    }
    let empty_customization = with(CDISpec {
        customize_components: Some(serde_json::json!({})),
        uninstall_strategy: Some("RemoveWorkloads".to_owned()),
        ..sample().spec
    });
    assert_eq!(refusal(&empty_customization), None);
}
