//! Whole passes over the in-memory API server: the install, the status as the Deployments roll
//! out, certificate renewal, and the CRs that are refused.

use cdi_api::cdi::{CDISpec, CDIStatus};
use k8s_openapi::api::apps::v1::DeploymentStatus;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::Timestamp;
use operator_kit::conditions::{AVAILABLE, DEGRADED, PROGRESSING};
use operator_kit::objects::Desired;
use operator_kit::objects::fake::FakeObjects;
use pretty_assertions::assert_eq;

use super::*;
use crate::render::Images;

const START: i64 = 1_796_000_000;
const HOUR: i64 = 3600;

fn settings() -> Settings {
    Settings {
        namespace: "cdi".to_owned(),
        version: "v9".to_owned(),
        images: Images::default(),
    }
}

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a valid second"))
}

fn cr(name: &str, created: i64) -> CDI {
    let mut cr = CDI::new(name, CDISpec::default());
    cr.metadata.uid = Some(format!("{name}-uid"));
    cr.metadata.creation_timestamp = Some(at(created));
    cr
}

fn installed(objects: &FakeObjects, cr: &CDI) {
    objects.put(&Desired::from_typed(cr).expect("a CDI"));
}

/// The CR as the fake holds it, with its status.
fn stored(objects: &FakeObjects, name: &str) -> CDI {
    let object = objects
        .state()
        .objects
        .get(&format!("CDI {name}"))
        .cloned()
        .expect("the CDI");
    parse(&object, "CDI").expect("a CDI")
}

fn conditions(status: &CDIStatus) -> Vec<(String, String)> {
    status
        .conditions
        .iter()
        .map(|c| (c.condition_type.clone(), c.status.clone()))
        .collect()
}

fn expect_conditions(status: &CDIStatus, available: &str, progressing: &str, degraded: &str) {
    assert_eq!(
        conditions(status),
        [
            (AVAILABLE.to_owned(), available.to_owned()),
            (PROGRESSING.to_owned(), progressing.to_owned()),
            (DEGRADED.to_owned(), degraded.to_owned()),
        ]
    );
}

/// The Deployments' controller reports every replica of the latest spec Ready.
fn roll_out(objects: &FakeObjects) {
    for name in DEPLOYMENTS {
        let key = format!("Deployment cdi/{name}");
        let mut state = objects.state();
        let object = state.objects.get_mut(&key).expect("applied");
        let replicas = object.data["spec"]["replicas"].as_i64().unwrap_or(1);
        let replicas = i32::try_from(replicas).expect("small");
        object.data["status"] = serde_json::to_value(DeploymentStatus {
            observed_generation: object.metadata.generation,
            replicas: Some(replicas),
            updated_replicas: Some(replicas),
            ready_replicas: Some(replicas),
            available_replicas: Some(replicas),
            ..DeploymentStatus::default()
        })
        .expect("a status");
    }
}

fn secret_text(objects: &FakeObjects, name: &str, key: &str) -> String {
    let object = objects
        .state()
        .objects
        .get(&format!("Secret cdi/{name}"))
        .cloned()
        .unwrap_or_else(|| panic!("Secret {name}"));
    let secret: Secret = parse(&object, name).expect("a Secret");
    let bytes = secret.data.and_then(|mut d| d.remove(key)).expect("the key");
    String::from_utf8_lossy(&bytes.0).into_owned()
}

fn bundle_size(objects: &FakeObjects, name: &str) -> usize {
    let object = objects
        .state()
        .objects
        .get(&format!("ConfigMap cdi/{name}"))
        .cloned()
        .expect("the bundle");
    let config_map: ConfigMap = parse(&object, name).expect("a ConfigMap");
    let pem = config_map
        .data
        .and_then(|mut d| d.remove("ca-bundle.crt"))
        .expect("the bundle");
    pem.matches("BEGIN CERTIFICATE").count()
}

#[tokio::test]
async fn a_cr_installs_cdi_and_is_available_once_its_deployments_roll_out() {
    let objects = FakeObjects::default();
    let cdi = cr("cdi", START);
    installed(&objects, &cdi);
    let next = reconcile(&objects, &cdi, &settings(), &at(START))
        .await
        .expect("a pass");
    assert_eq!(next, Next::LookAgain, "not serving yet");
    let status = stored(&objects, "cdi").status.expect("a status");
    assert_eq!(status.phase.as_deref(), Some("Deploying"));
    expect_conditions(&status, "False", "True", "False");
    assert_eq!(status.observed_version, None);
    {
        let state = objects.state();
        for key in [
            "Secret cdi/cdi-apiserver-server-cert",
            "Secret cdi/cdi-uploadproxy-server-cert",
            "Secret cdi/cdi-uploadserver-client-cert",
            "Secret cdi/cdi-api-signing-key",
            "ConfigMap cdi/cdi-uploadserver-signer-bundle",
            "CustomResourceDefinition datavolumes.cdi.kubevirt.io",
            "Deployment cdi/cdi-deployment",
            "APIService v1beta1.upload.cdi.kubevirt.io",
        ] {
            assert!(state.objects.contains_key(key), "{key}");
        }
        assert!(
            !state.objects.keys().any(|k| k.starts_with("CDIConfig ")),
            "no config in the CR, none written"
        );
    }
    roll_out(&objects);
    let cdi = stored(&objects, "cdi");
    let next = reconcile(&objects, &cdi, &settings(), &at(START + 10))
        .await
        .expect("a pass");
    let status = stored(&objects, "cdi").status.expect("a status");
    assert_eq!(status.phase.as_deref(), Some("Deployed"));
    expect_conditions(&status, "True", "False", "False");
    assert_eq!(
        (status.observed_version.as_deref(), status.target_version.as_deref()),
        (Some("v9"), Some("v9"))
    );
    assert_eq!(
        next,
        Next::RestUntil(START + 12 * HOUR),
        "looked at again when the first certificate is due"
    );
    // A pass that changes nothing keeps the certificates and writes nothing.
    let key = secret_text(&objects, "cdi-api-signing-key", "id_ed25519");
    let cert = secret_text(&objects, "cdi-apiserver-server-cert", "tls.crt");
    objects.state().writes.clear();
    let cdi = stored(&objects, "cdi");
    reconcile(&objects, &cdi, &settings(), &at(START + 20))
        .await
        .expect("a pass");
    assert_eq!(secret_text(&objects, "cdi-api-signing-key", "id_ed25519"), key);
    assert_eq!(secret_text(&objects, "cdi-apiserver-server-cert", "tls.crt"), cert);
    assert_eq!(objects.state().writes, Vec::<String>::new());
}

#[tokio::test]
async fn certificates_are_renewed_when_due_and_bundles_keep_the_old_cas() {
    let objects = FakeObjects::default();
    let cdi = cr("cdi", START);
    installed(&objects, &cdi);
    reconcile(&objects, &cdi, &settings(), &at(START))
        .await
        .expect("a pass");
    let ca = secret_text(&objects, "cdi-apiserver-signer", "tls.crt");
    let cert = secret_text(&objects, "cdi-apiserver-server-cert", "tls.crt");
    let key = secret_text(&objects, "cdi-api-signing-key", "id_ed25519");
    // 12 hours on: the serving and client certificates are due, the CAs are not.
    reconcile(&objects, &cdi, &settings(), &at(START + 12 * HOUR))
        .await
        .expect("a pass");
    assert_eq!(secret_text(&objects, "cdi-apiserver-signer", "tls.crt"), ca);
    assert_ne!(secret_text(&objects, "cdi-apiserver-server-cert", "tls.crt"), cert);
    // 24 hours on: every CA, each bundle keeping the CA it replaces; the key stays.
    reconcile(&objects, &cdi, &settings(), &at(START + 24 * HOUR))
        .await
        .expect("a pass");
    assert_ne!(secret_text(&objects, "cdi-apiserver-signer", "tls.crt"), ca);
    assert_eq!(bundle_size(&objects, "cdi-apiserver-signer-bundle"), 2);
    assert_eq!(bundle_size(&objects, "cdi-uploadserver-signer-bundle"), 2);
    assert_eq!(secret_text(&objects, "cdi-api-signing-key", "id_ed25519"), key);
    let api_service = objects
        .state()
        .objects
        .get("APIService v1beta1.upload.cdi.kubevirt.io")
        .cloned()
        .expect("applied");
    let ca_bundle = api_service.data["spec"]["caBundle"]
        .as_str()
        .expect("a caBundle")
        .to_owned();
    let ca_bundle: k8s_openapi::ByteString =
        serde_json::from_value(serde_json::Value::String(ca_bundle)).expect("base64");
    let ca_bundle = String::from_utf8(ca_bundle.0).expect("pem");
    assert_eq!(
        ca_bundle.matches("BEGIN CERTIFICATE").count(),
        2,
        "the API server trusts the old and the new CA while both live"
    );
}

#[tokio::test]
async fn a_second_cdi_and_a_cr_with_fields_not_acted_on_are_refused() {
    let objects = FakeObjects::default();
    let first = cr("cdi", START);
    let second = cr("cdi-2", START + 5);
    installed(&objects, &first);
    installed(&objects, &second);
    let next = reconcile(&objects, &second, &settings(), &at(START + 10))
        .await
        .expect("a pass");
    assert_eq!(
        next,
        Next::RestUntil(START + 10 + i64::try_from(REFUSED_AGAIN_SECONDS).expect("small"))
    );
    let status = stored(&objects, "cdi-2").status.expect("a status");
    assert_eq!(status.phase.as_deref(), Some("Error"));
    expect_conditions(&status, "False", "False", "True");
    let degraded = status
        .conditions
        .iter()
        .find(|c| c.condition_type == DEGRADED)
        .expect("Degraded");
    assert_eq!(
        (degraded.reason.as_deref(), degraded.message.as_deref()),
        (Some("ConfigError"), Some(UNWANTED))
    );
    assert!(
        objects.state().writes.iter().all(|w| w.starts_with("status ")),
        "nothing installed for it: {:?}",
        objects.state().writes
    );
    let mut refused = cr("cdi", START);
    refused.spec.customize_components = Some(serde_json::json!({"flags": {"api": {"v": "5"}}}));
    let objects = FakeObjects::default();
    installed(&objects, &refused);
    reconcile(&objects, &refused, &settings(), &at(START))
        .await
        .expect("a pass");
    let status = stored(&objects, "cdi").status.expect("a status");
    assert_eq!(status.phase.as_deref(), Some("Error"));
    let degraded = status
        .conditions
        .iter()
        .find(|c| c.condition_type == DEGRADED)
        .expect("Degraded");
    assert!(
        degraded
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("spec.customizeComponents")),
        "{degraded:?}"
    );
    assert_eq!(objects.state().writes, ["status CDI cdi"]);
}

#[tokio::test]
async fn a_refused_apply_is_degraded_and_looked_at_again() {
    let objects = FakeObjects::default();
    let cdi = cr("cdi", START);
    installed(&objects, &cdi);
    objects.state().refuse_apply = Some(("Deployment cdi/cdi-apiserver".to_owned(), "quota exceeded".to_owned()));
    let next = reconcile(&objects, &cdi, &settings(), &at(START))
        .await
        .expect("a pass");
    assert_eq!(next, Next::LookAgain);
    let status = stored(&objects, "cdi").status.expect("a status");
    assert_eq!(status.phase.as_deref(), Some("Deploying"));
    expect_conditions(&status, "False", "True", "True");
    let degraded = status
        .conditions
        .iter()
        .find(|c| c.condition_type == DEGRADED)
        .expect("Degraded");
    assert_eq!(degraded.reason.as_deref(), Some("Reconcile Failed"));
    assert!(
        degraded
            .message
            .as_deref()
            .is_some_and(|m| m.contains("quota exceeded")),
        "{degraded:?}"
    );
}

#[test]
fn objects_map_to_their_controlling_cdi() {
    let cdi = cr("cdi", START);
    let meta = ObjectMeta {
        owner_references: owned_by(&cdi).map(|o| vec![o]),
        ..ObjectMeta::default()
    };
    assert_eq!(owner_of(&meta), Some("cdi".to_owned()));
    assert_eq!(owner_of(&ObjectMeta::default()), None);
}
