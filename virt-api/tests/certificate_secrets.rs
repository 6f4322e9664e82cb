//! virt-api's certificate Secrets over the real kube client and a mock API server (tower-test)
//! that keeps Secrets as the API server does (404 for a missing one, 409 for a create of an
//! existing one or a replace at an old resource version, 422 for a change of a Secret's type):
//! every request is asserted, on a fresh cluster, when certificates are due, when the CA is due,
//! when another replica wins a race, and over the layout an earlier kubevirt-rs left.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use http::{Request, Response};
use kube::client::Body;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use virt_api::certificates::issue::{Pair, new_ca, sign};
use virt_api::certificates::plan::Rotation;
use virt_api::certificates::{CA_SECRET, Certificates, ensure, wanted};
use virt_api::tls::CertFacts;

/// The Secrets, keyed by name, as JSON.
type Store = Arc<Mutex<BTreeMap<String, Value>>>;
type Log = Arc<Mutex<Vec<(String, String)>>>;

const NS: &str = "kubevirt";
const PATH: &str = "/api/v1/namespaces/kubevirt/secrets";
const HOUR: i64 = 3600;

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code,
           "message": reason})
}

/// Answers one request against `store`; `race` is put into the store before the first create,
/// as if another replica had written it.
fn answer(store: &Store, race: &Mutex<Option<Vec<Value>>>, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let mut secrets = store.lock().expect("store");
    let name = path.trim_start_matches(PATH).trim_start_matches('/');
    let name = name.split('?').next().unwrap_or_default().to_owned();
    match method {
        "GET" => secrets
            .get(&name)
            .map_or((404, status(404, "NotFound")), |s| (200, s.clone())),
        "POST" => {
            if let Some(winner) = race.lock().expect("race").take() {
                for secret in winner {
                    secrets.insert(
                        secret["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                        secret,
                    );
                }
            }
            let name = body["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            if secrets.contains_key(&name) {
                return (409, status(409, "AlreadyExists"));
            }
            let mut stored = body.clone();
            stored["metadata"]["resourceVersion"] = json!("1");
            secrets.insert(name, stored.clone());
            (201, stored)
        }
        "PUT" => {
            let current = secrets.get(&name).map(|s| s["metadata"]["resourceVersion"].clone());
            if current.as_ref() != Some(&body["metadata"]["resourceVersion"]) {
                return (409, status(409, "Conflict"));
            }
            if secrets.get(&name).map(|s| &s["type"]) != Some(&body["type"]) {
                return (422, status(422, "Invalid"));
            }
            let version = current.and_then(|v| v.as_str()?.parse::<u64>().ok()).unwrap_or(0) + 1;
            let mut stored = body.clone();
            stored["metadata"]["resourceVersion"] = json!(version.to_string());
            secrets.insert(name, stored.clone());
            (200, stored)
        }
        _ => (500, status(500, "unexpected request")),
    }
}

fn api_server(store: Store, race: Option<Vec<Value>>) -> (kube::Client, Log) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log: Log = Arc::default();
    let record = log.clone();
    let race = Mutex::new(race);
    tokio::spawn(async move {
        while let Some((request, respond)) = handle.next_request().await {
            let method = request.method().to_string();
            let path = request.uri().path().to_owned();
            let bytes = request.into_body().collect_bytes().await.expect("body");
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let shown = path.trim_start_matches(PATH).trim_start_matches('/').to_owned();
            record.lock().expect("log").push((method.clone(), shown));
            let (code, answer) = answer(&store, &race, &method, &path, &body);
            respond.send_response(
                Response::builder()
                    .status(code)
                    .body(Body::from(serde_json::to_vec(&answer).expect("answer")))
                    .expect("response"),
            );
        }
    });
    (kube::Client::new(service, "default"), log)
}

fn encode(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn secret_json(name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data.iter().map(|(k, v)| ((*k).to_owned(), json!(encode(v)))).collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "resourceVersion": "7"},
           "type": "kubernetes.io/tls", "data": data})
}

fn data(store: &Store, name: &str, key: &str) -> String {
    let secrets = store.lock().expect("store");
    let encoded = secrets[name]["data"][key].as_str().unwrap_or_default().to_owned();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64"),
    )
    .expect("utf-8")
}

fn names() -> Vec<&'static str> {
    std::iter::once(CA_SECRET)
        .chain(wanted(NS).iter().map(|w| w.secret))
        .collect()
}

fn requests(method: &str, secrets: &[&str]) -> Vec<(String, String)> {
    secrets
        .iter()
        .map(|name| {
            let shown = if method == "POST" {
                String::new()
            } else {
                (*name).to_owned()
            };
            (method.to_owned(), shown)
        })
        .collect()
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// A stored install: a CA made at `ca_at`, every certificate signed at `signed_at` for 24 hours.
fn stored_install(ca_at: i64, signed_at: i64) -> (Pair, Vec<Value>) {
    let ca = new_ca(ca_at, kubevirt_api::v1::DEFAULT_CA_SECONDS).expect("CA");
    let ca_name = format!("kubevirt.io@{ca_at}");
    let mut secrets = vec![secret_json(
        CA_SECRET,
        &[("tls.crt", &ca.cert), ("tls.key", &ca.key), ("ca.crt", &ca.cert)],
    )];
    for w in wanted(NS) {
        let pair = sign(&ca, &ca_name, &w, signed_at, kubevirt_api::v1::DEFAULT_SERVER_SECONDS).expect("sign");
        secrets.push(secret_json(
            w.secret,
            &[("tls.crt", &pair.cert), ("tls.key", &pair.key), ("ca.crt", &ca.cert)],
        ));
    }
    (ca, secrets)
}

fn store_of(secrets: Vec<Value>) -> Store {
    let map = secrets
        .into_iter()
        .map(|s| (s["metadata"]["name"].as_str().unwrap_or_default().to_owned(), s))
        .collect();
    Arc::new(Mutex::new(map))
}

fn facts(pem: &str) -> Vec<CertFacts> {
    CertFacts::from_pem(pem).expect("certificates")
}

#[tokio::test]
async fn a_fresh_cluster_gets_a_ca_and_one_certificate_per_holder() {
    let store = Store::default();
    let (client, log) = api_server(store.clone(), None);
    let (made, next): (Certificates, i64) = ensure(&client, NS, &Rotation::default()).await.expect("certificates");
    let leaves: Vec<&str> = wanted(NS).iter().map(|w| w.secret).collect();
    let mut expected = requests("GET", &names());
    expected.extend(requests("POST", &[CA_SECRET]));
    expected.extend(requests("GET", &names()));
    expected.extend(requests("POST", &leaves));
    expected.extend(requests("GET", &names()));
    assert_eq!(*log.lock().expect("log"), expected);

    let ca = data(&store, CA_SECRET, "tls.crt");
    assert_eq!(made.ca_bundle, ca);
    for w in wanted(NS) {
        let cert = facts(&data(&store, w.secret, "tls.crt")).remove(0);
        assert_eq!(cert.common_name, w.common_name, "{}", w.secret);
        assert_eq!(data(&store, w.secret, "ca.crt"), ca, "{}", w.secret);
        assert_ne!(data(&store, w.secret, "tls.key"), data(&store, CA_SECRET, "tls.key"));
    }
    assert_eq!(made.serving.cert, data(&store, "kubevirt-virt-api-certs", "tls.crt"));
    assert_eq!(
        made.handler_client.cert,
        data(&store, "kubevirt-virt-handler-certs", "tls.crt")
    );
    let expires = facts(&made.serving.cert).remove(0).not_after;
    assert!(expires - 24 * HOUR / 5 > now() + HOUR, "nothing is due within the hour");
    assert!(
        (now() + HOUR - 60..=now() + HOUR).contains(&next),
        "the next look is within the hour: {next}"
    );
}

#[tokio::test]
async fn certificates_due_are_signed_again_in_place_by_the_same_ca() {
    let (ca, secrets) = stored_install(now() - 2 * 24 * HOUR, now() - 20 * HOUR);
    let store = store_of(secrets);
    let (client, log) = api_server(store.clone(), None);
    let (made, _) = ensure(&client, NS, &Rotation::default()).await.expect("certificates");
    let leaves: Vec<&str> = wanted(NS).iter().map(|w| w.secret).collect();
    let mut expected = requests("GET", &names());
    expected.extend(requests("PUT", &leaves));
    expected.extend(requests("GET", &names()));
    assert_eq!(*log.lock().expect("log"), expected);
    assert_eq!(data(&store, CA_SECRET, "tls.crt"), ca.cert, "the CA stays");
    let renewed = facts(&made.serving.cert).remove(0);
    assert!(renewed.not_after >= now() + 24 * HOUR - 60, "{renewed:?}");
}

#[tokio::test]
async fn a_ca_due_is_replaced_and_every_secret_gets_both_cas_before_any_new_certificate() {
    let (old, secrets) = stored_install(now() - 6 * 24 * HOUR, now() - HOUR);
    let store = store_of(secrets);
    let (client, log) = api_server(store.clone(), None);
    let (made, next) = ensure(&client, NS, &Rotation::default()).await.expect("certificates");
    let leaves: Vec<&str> = wanted(NS).iter().map(|w| w.secret).collect();
    let mut expected = requests("GET", &names());
    expected.extend(requests("PUT", &[CA_SECRET]));
    expected.extend(requests("GET", &names()));
    expected.extend(requests("PUT", &leaves));
    expected.extend(requests("GET", &names()));
    assert_eq!(*log.lock().expect("log"), expected);
    let new_name = facts(&data(&store, CA_SECRET, "tls.crt")).remove(0).common_name;
    let old_name = facts(&old.cert).remove(0).common_name;
    let in_bundle: Vec<String> = facts(&made.ca_bundle).into_iter().map(|f| f.common_name).collect();
    assert_eq!(in_bundle, [new_name, old_name.clone()]);
    for secret in &leaves {
        assert_eq!(data(&store, secret, "ca.crt"), made.ca_bundle, "{secret}");
    }
    assert_eq!(
        facts(&made.serving.cert)[0].issuer_common_name,
        old_name,
        "still the old CA's until the bundle has spread"
    );
    assert!(
        (now() + 9 * 60..=now() + 10 * 60).contains(&next),
        "then signed again: {next}"
    );
}

#[tokio::test]
async fn an_earlier_layout_is_replaced_keeping_each_secrets_type() {
    // What an earlier kubevirt-rs stored: Opaque Secrets, a CA kept with virt-api's certificate.
    let old = virt_api::tls::test_pki::TestCa::new("kubevirt-rs CA");
    let serving = old.server("rcgen self signed cert", &["virt-api"]);
    let opaque = |name: &str| {
        let ca = old.cert_pem();
        let data = [
            ("tls.crt", serving.cert.as_str()),
            ("tls.key", serving.key.as_str()),
            ("ca.crt", ca.as_str()),
        ];
        let mut secret = secret_json(name, &data);
        secret["type"] = json!("Opaque");
        secret
    };
    let earlier = [
        "kubevirt-virt-api-certs",
        "kubevirt-virt-handler-certs",
        "kubevirt-controller-certs",
    ];
    let store = store_of(earlier.iter().map(|name| opaque(name)).collect());
    let (client, _) = api_server(store.clone(), None);
    let (made, _) = ensure(&client, NS, &Rotation::default()).await.expect("certificates");
    let secrets = store.lock().expect("store").clone();
    for name in earlier {
        assert_eq!(secrets[name]["type"], json!("Opaque"), "{name}");
    }
    assert_eq!(secrets[CA_SECRET]["type"], json!("kubernetes.io/tls"));
    assert_eq!(
        facts(&made.serving.cert)[0].common_name,
        "virt-api.kubevirt.pod.cluster.local"
    );
}

#[tokio::test]
async fn a_replica_that_loses_the_race_uses_the_winners_certificates() {
    let (_, winner) = stored_install(now() - HOUR, now() - HOUR);
    let (client, log) = api_server(Store::default(), Some(winner.clone()));
    let (made, _) = ensure(&client, NS, &Rotation::default()).await.expect("certificates");
    let mut expected = requests("GET", &names());
    expected.extend(requests("POST", &[CA_SECRET]));
    expected.extend(requests("GET", &names()));
    assert_eq!(*log.lock().expect("log"), expected);
    let winners_ca = winner[0]["data"]["tls.crt"].as_str().map(|b| {
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b).expect("base64")).expect("utf-8")
    });
    assert_eq!(Some(made.ca_bundle), winners_ca);
}
