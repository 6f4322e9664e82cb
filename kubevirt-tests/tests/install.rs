//! `manifests/install`: every object it renders parses as its Kubernetes type with nothing lost,
//! and the names, ports, service accounts and webhook paths agree with the servers' routes and
//! flags, and `kubectl kustomize manifests/install` renders the same objects.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubevirt_api::v1::KubeVirt;
use pretty_assertions::assert_eq;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn install_dir() -> PathBuf {
    kubevirt_tests::repo_root().join("manifests/install")
}

/// The objects a kustomization renders: its resources in order, directories through their own
/// kustomization.
fn render(dir: &Path) -> Vec<Value> {
    let kustomization: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).expect("kustomization"))
            .expect("YAML");
    let mut objects = Vec::new();
    for resource in kustomization["resources"].as_array().expect("resources") {
        let path = dir.join(resource.as_str().expect("a path"));
        if path.is_dir() {
            objects.extend(render(&path));
        } else {
            let text = std::fs::read_to_string(&path).expect("resource");
            for doc in text
                .split("\n---\n")
                .filter(|d| d.lines().any(|l| !l.trim().is_empty() && !l.starts_with('#')))
            {
                objects.push(serde_saphyr::from_str(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
            }
        }
    }
    objects
}

/// Every field of `original` is in `round_tripped` with the same value: nothing was misspelt.
fn assert_kept(original: &Value, round_tripped: &Value, at: &str) {
    match (original, round_tripped) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let empty = matches!(value, Value::Null) || value.as_array().is_some_and(Vec::is_empty);
                match b.get(key) {
                    Some(other) => assert_kept(value, other, &format!("{at}.{key}")),
                    None => assert!(empty, "{at}.{key} is not a field of its type"),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_kept(x, y, &format!("{at}[{i}]"));
            }
        }
        (a, b) => assert_eq!(a, b, "{at}"),
    }
}

fn typed<T: DeserializeOwned + serde::Serialize>(object: &Value) -> T {
    let name = format!(
        "{}/{}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    );
    let value: T = serde_json::from_value(object.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_kept(object, &serde_json::to_value(&value).expect("serialize"), &name);
    value
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs the test cluster's kubectl: make test runs it (feature host-tests)"
)]
fn every_object_parses_as_its_kubernetes_type() {
    let objects = render(&install_dir());
    let mut kinds = BTreeSet::new();
    for object in &objects {
        let kind = object["kind"].as_str().expect("kind");
        kinds.insert(kind.to_owned());
        match kind {
            "Namespace" => drop(typed::<Namespace>(object)),
            "PriorityClass" => drop(typed::<PriorityClass>(object)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(object)),
            "ClusterRole" => drop(typed::<ClusterRole>(object)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(object)),
            "Role" => drop(typed::<Role>(object)),
            "RoleBinding" => drop(typed::<RoleBinding>(object)),
            "Deployment" => drop(typed::<Deployment>(object)),
            "DaemonSet" => drop(typed::<DaemonSet>(object)),
            "Service" => drop(typed::<Service>(object)),
            "MutatingWebhookConfiguration" => drop(typed::<MutatingWebhookConfiguration>(object)),
            "ValidatingWebhookConfiguration" => drop(typed::<ValidatingWebhookConfiguration>(object)),
            "CustomResourceDefinition" => drop(typed::<CustomResourceDefinition>(object)),
            "KubeVirt" => drop(typed::<KubeVirt>(object)),
            "APIService" => {
                // k8s-openapi has no kube-aggregator types: check the fields the aggregator needs.
                assert_eq!(object["apiVersion"], "apiregistration.k8s.io/v1");
                for field in ["group", "version", "groupPriorityMinimum", "versionPriority", "service"] {
                    assert!(!object["spec"][field].is_null(), "APIService spec.{field}");
                }
            }
            other => panic!("an unexpected kind {other}"),
        }
    }
    assert!(kinds.len() >= 15, "{kinds:?}");
    let out = std::process::Command::new(kubevirt_tests::kubectl_binary())
        .arg("kustomize")
        .arg(install_dir())
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("\nkind: ").count() + usize::from(text.starts_with("kind: ")),
        objects.len()
    );
}

#[test]
fn webhook_paths_services_and_apiservices_match_virt_api() {
    let objects = render(&install_dir());
    let served: BTreeSet<&str> = virt_api::admission::Webhook::ALL.iter().map(|w| w.path()).collect();
    let mut configured = BTreeSet::new();
    for (kind, name) in [
        ("MutatingWebhookConfiguration", "virt-api-mutator"),
        ("ValidatingWebhookConfiguration", "virt-api-validator"),
    ] {
        let config = find(&objects, kind, name);
        assert_eq!(
            name,
            if kind.starts_with("Mutating") {
                virt_api::certificates::MUTATOR
            } else {
                virt_api::certificates::VALIDATOR
            }
        );
        for webhook in config["webhooks"].as_array().expect("webhooks") {
            let client = &webhook["clientConfig"]["service"];
            assert_eq!(
                (
                    client["name"].as_str(),
                    client["namespace"].as_str(),
                    client["port"].as_i64()
                ),
                (Some("virt-api"), Some("kubevirt"), Some(443))
            );
            // Evictions are not blocked while virt-api is down (upstream's choice); every other
            // webhook fails closed.
            let path = client["path"].as_str().unwrap_or_default();
            let policy = if path == virt_api::admission::Webhook::PodEviction.path() {
                "Ignore"
            } else {
                "Fail"
            };
            assert_eq!(webhook["failurePolicy"], policy, "{path}");
            assert_eq!(webhook["timeoutSeconds"], 10);
            configured.insert(client["path"].as_str().expect("path"));
        }
    }
    assert_eq!(
        configured, served,
        "every webhook virt-api serves is configured, and nothing else"
    );

    let service: Service = typed(find(&objects, "Service", "virt-api"));
    let port = &service.spec.as_ref().expect("spec").ports.as_ref().expect("ports")[0];
    assert_eq!(port.port, 443);
    let target = port.target_port.clone().expect("targetPort");
    let deployment: Deployment = typed(find(&objects, "Deployment", "virt-api"));
    let pod = deployment.spec.expect("spec").template.spec.expect("pod");
    let container = &pod.containers[0];
    let container_port = container.ports.as_ref().expect("ports")[0].container_port;
    assert_eq!(
        target,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(container_port)
    );
    let args = container.args.clone().unwrap_or_default();
    assert!(args.contains(&format!("--listen=0.0.0.0:{container_port}")), "{args:?}");
    let labels = pod_labels(&objects, "Deployment", "virt-api").unwrap_or_default();
    let selector = service
        .spec
        .as_ref()
        .and_then(|s| s.selector.clone())
        .unwrap_or_default();
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "the Service selects virt-api's pods"
    );

    let names: BTreeSet<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "APIService")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, virt_api::certificates::API_SERVICES.into_iter().collect());
    for name in names {
        let spec = &find(&objects, "APIService", name)["spec"];
        assert_eq!(spec["group"], virt_api::subresources::discovery::GROUP);
        assert!(virt_api::subresources::discovery::VERSIONS.contains(&spec["version"].as_str().expect("version")));
        assert_eq!(
            format!(
                "{}.{}",
                spec["version"].as_str().expect("version"),
                spec["group"].as_str().expect("group")
            ),
            name
        );
        assert_eq!(
            (spec["service"]["name"].as_str(), spec["service"]["port"].as_i64()),
            (Some("virt-api"), Some(443))
        );
    }
}

fn pod_labels(objects: &[Value], kind: &str, name: &str) -> Option<std::collections::BTreeMap<String, String>> {
    serde_json::from_value(find(objects, kind, name)["spec"]["template"]["metadata"]["labels"].clone()).ok()
}

fn pod_spec(objects: &[Value], kind: &str, name: &str) -> PodSpec {
    serde_json::from_value(find(objects, kind, name)["spec"]["template"]["spec"].clone()).expect("pod spec")
}

#[test]
fn every_component_runs_as_a_bound_service_account_and_the_handler_as_virt_api_expects() {
    let objects = render(&install_dir());
    for (kind, name, account) in [
        ("Deployment", "virt-api", "kubevirt-apiserver"),
        ("Deployment", "virt-controller", "kubevirt-controller"),
        ("DaemonSet", "virt-handler", "kubevirt-handler"),
    ] {
        let pod = pod_spec(&objects, kind, name);
        assert_eq!(pod.service_account_name.as_deref(), Some(account), "{name}");
        find(&objects, "ServiceAccount", account);
        let bound = objects.iter().any(|o| {
            o["kind"] == "ClusterRoleBinding" && o["roleRef"]["name"] == account && o["subjects"][0]["name"] == account
        });
        assert!(bound, "{account} has its ClusterRole");
    }
    let handler = pod_spec(&objects, "DaemonSet", "virt-handler");
    let container = &handler.containers[0];
    assert_eq!(
        container.security_context.as_ref().and_then(|s| s.privileged),
        Some(true)
    );
    let args = container.args.clone().unwrap_or_default();
    let console: Vec<i32> = container
        .ports
        .iter()
        .flatten()
        .filter(|p| p.name.as_deref() == Some("console"))
        .map(|p| p.container_port)
        .collect();
    assert_eq!(console, [8186]);
    assert!(args.contains(&"--console-server-port=8186".to_owned()));
    let api_args = pod_spec(&objects, "Deployment", "virt-api").containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(
        api_args.contains(&"--console-server-port=8186".to_owned()),
        "virt-api dials the handler's port"
    );
    let secrets: Vec<String> = handler
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
        .collect();
    assert_eq!(
        secrets,
        [
            virt_api::certificates::HANDLER_SERVER_SECRET,
            virt_api::certificates::MIGRATION_CLIENT_SECRET
        ],
        "the handler mounts what virt-api makes for it"
    );
    let controller = find(&objects, "Deployment", "virt-controller");
    assert_eq!(controller["spec"]["replicas"], 2);
    let image = controller["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .and_then(|a| a.iter().find_map(|x| x.as_str()?.strip_prefix("--launcher-image=")))
        .expect("--launcher-image");
    assert!(image.contains("virt-launcher"));
    let kubevirt: KubeVirt = typed(find(&objects, "KubeVirt", "kubevirt"));
    let developer = kubevirt
        .spec
        .configuration
        .and_then(|c| c.developer_configuration)
        .expect("developerConfiguration");
    assert!(
        developer.use_emulation.is_some(),
        "useEmulation is spelled out, for docs/install.md to point at"
    );
}
