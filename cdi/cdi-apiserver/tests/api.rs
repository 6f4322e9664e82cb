//! cdi-apiserver over real TLS: the aggregation layer's client certificate (from a test
//! request-header CA) and its user headers, reviews answered by a fake, and tokens checked with
//! the public key the proxy uses.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cdi_apiserver::server::{AccessReviews, Review, UploadApi, serve};
use cdi_token::{Issuer, Payload, UPLOAD_ISSUER, Validator, generate_key};
use control_loop::aggregation::front_proxy_clients;
use control_loop::tls::test_pki::{TestCa, TestPair, https_request};
use control_loop::tls::{CertSource, ClientCa, server_tls_for};
use http_body_util::Full;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Allows alice, denies everyone else, fails for "broken"; remembers each review's spec. Its
/// cluster has as many DataVolumes as the second field says.
#[derive(Clone, Default)]
struct Reviews(Arc<Mutex<Vec<Value>>>, Arc<std::sync::atomic::AtomicUsize>);

impl AccessReviews for Reviews {
    /// One DataSource: `images/golden`, pointing to the claim `src/golden`.
    async fn data_source(&self, namespace: &str, name: &str) -> Result<Option<cdi_api::DataSource>, String> {
        if (namespace, name) == ("images", "empty") {
            let empty = json!({
                "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
                "metadata": {"name": "empty", "namespace": "images"}, "spec": {"source": {}},
            });
            return Ok(Some(serde_json::from_value(empty).expect("a DataSource")));
        }
        Ok(((namespace, name) == ("images", "golden")).then(|| {
            serde_json::from_value(json!({
                "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
                "metadata": {"name": "golden", "namespace": "images"},
                "spec": {"source": {"pvc": {"namespace": "src", "name": "golden"}}},
            }))
            .expect("a DataSource")
        }))
    }

    async fn count_data_volumes(&self, limit: u32) -> Result<usize, String> {
        let limit = usize::try_from(limit).expect("limit");
        Ok(self.1.load(std::sync::atomic::Ordering::SeqCst).min(limit))
    }

    async fn review(&self, spec: Value) -> Result<Review, String> {
        self.0.lock().expect("reviews").push(spec.clone());
        match spec["user"].as_str() {
            Some("alice") => Ok(Review {
                allowed: true,
                reason: String::new(),
            }),
            Some("broken") => Err("the API server is gone".to_owned()),
            _ => Ok(Review {
                allowed: false,
                reason: "no RBAC policy matched".to_owned(),
            }),
        }
    }
}

struct Setup {
    dir: tempfile::TempDir,
    server_ca: TestCa,
    front_proxy: TestPair,
    public_key: Vec<u8>,
    reviews: Reviews,
    address: SocketAddr,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let server_ca = TestCa::new("cdi-apiserver-signer");
    let requestheader_ca = TestCa::new("front-proxy-ca");
    let serving = server_ca.server("cdi-api.cdi.svc", &["localhost"]);
    let policy = front_proxy_clients(
        ClientCa::Pem {
            origin: "test".to_owned(),
            pem: requestheader_ca.cert_pem(),
        },
        &["front-proxy-client".to_owned()],
    );
    let tls = server_tls_for(
        &CertSource::Pem {
            origin: "test".to_owned(),
            cert: serving.cert,
            key: serving.key,
        },
        Some(&policy),
    )
    .expect("tls");
    let issuer = Issuer::new(&generate_key().expect("key"), UPLOAD_ISSUER, 300).expect("issuer");
    let public_key = issuer.public_key();
    let reviews = Reviews::default();
    let api = Arc::new(UploadApi {
        reviews: reviews.clone(),
        issuer,
        header_names: control_loop::aggregation::HeaderNames::default(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
    let address = listener.local_addr().expect("address");
    tokio::spawn(serve(
        listener,
        tls.config,
        api,
        tokio_util::sync::CancellationToken::new(),
    ));
    Setup {
        dir,
        server_ca,
        front_proxy: requestheader_ca.client("front-proxy-client"),
        public_key,
        reviews,
        address,
    }
}

const TOKENS: &str = "/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/vms/uploadtokenrequests";

impl Setup {
    /// Sends a request, as the aggregation layer when `front_proxy`.
    async fn send(
        &self,
        method: &str,
        path: &str,
        front_proxy: bool,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let config = if front_proxy {
            control_loop::tls::client_tls_pem(
                "test",
                &self.server_ca.cert_pem(),
                &self.front_proxy.cert,
                &self.front_proxy.key,
            )
            .expect("tls")
        } else {
            let ca = self.dir.path().join("ca.crt");
            std::fs::write(&ca, self.server_ca.cert_pem()).expect("ca");
            control_loop::tls::client_tls(&ca, None).expect("tls")
        };
        let answer = https_request(
            config,
            self.address,
            method,
            path,
            headers,
            Full::new(Bytes::from(body.to_owned())),
        )
        .await
        .expect("answer");
        (answer.status, answer.body)
    }

    async fn request_token(&self, user: &str, body: &str) -> (u16, String) {
        let headers = [("X-Remote-User", user), ("X-Remote-Group", "system:authenticated")];
        self.send("POST", TOKENS, true, &headers, body).await
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).expect("seconds"))
        .expect("clock")
}

const REQUEST: &str = r#"{"apiVersion":"upload.cdi.kubevirt.io/v1beta1","kind":"UploadTokenRequest","metadata":{"name":"disk","namespace":"vms"},"spec":{"pvcName":"disk"}}"#;

#[tokio::test]
async fn an_allowed_caller_gets_a_token_for_the_claim_that_the_proxy_accepts() {
    let setup = setup().await;
    let (status, body) = setup.request_token("alice", REQUEST).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["kind"], "UploadTokenRequest");
    let token = answer["status"]["token"].as_str().expect("token");
    let payload = Validator::new(&setup.public_key, UPLOAD_ISSUER, 10)
        .validate(token, now())
        .expect("the proxy's check");
    assert_eq!(payload, Payload::upload("vms", "disk"));
    assert_eq!(
        setup.reviews.0.lock().expect("reviews")[0]["resourceAttributes"],
        json!({"namespace": "vms", "verb": "create", "group": "upload.cdi.kubevirt.io",
               "version": "v1beta1", "resource": "uploadtokenrequests"})
    );
}

#[tokio::test]
async fn callers_without_the_right_get_401_and_a_failed_review_500() {
    let setup = setup().await;
    assert_eq!(
        setup
            .send("POST", TOKENS, false, &[("X-Remote-User", "alice")], REQUEST)
            .await,
        (401, "request is not authenticated".to_owned()),
        "only the aggregation layer names the user"
    );
    assert_eq!(
        setup
            .send("POST", TOKENS, true, &[("X-Remote-Group", "g")], REQUEST)
            .await,
        (
            401,
            "one of these headers required for authorization: [x-remote-user]".to_owned()
        )
    );
    assert_eq!(
        setup.request_token("bob", REQUEST).await,
        (401, "no RBAC policy matched".to_owned())
    );
    assert_eq!(setup.request_token("broken", REQUEST).await.0, 500);
    assert_eq!(
        setup.request_token("alice", r#"{"spec":{}}"#).await,
        (400, "spec.pvcName is required".to_owned())
    );
    assert_eq!(setup.send("GET", TOKENS, true, &[], "").await.0, 405);
}

#[tokio::test]
async fn discovery_and_health_need_no_certificate() {
    let setup = setup().await;
    let (status, body) = setup
        .send("GET", "/apis/upload.cdi.kubevirt.io/v1beta1", false, &[], "")
        .await;
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(list["resources"][0]["kind"], "UploadTokenRequest");
    assert_eq!(
        setup.send("GET", "/healthz", false, &[], "").await,
        (200, "ok".to_owned())
    );
    assert_eq!(setup.send("GET", "/nothing", false, &[], "").await.0, 404);
}

fn clone_review(user: &str) -> String {
    review_of(
        user,
        &json!({"source": {"pvc": {"namespace": "src", "name": "golden"}}}),
    )
}

/// A DataVolume `dst/copy` with `spec`, created by `user`, as the API server sends it.
fn review_of(user: &str, spec: &Value) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "req-7",
            "operation": "CREATE",
            "namespace": "dst",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "cdi.kubevirt.io/v1beta1",
                "kind": "DataVolume",
                "metadata": {"name": "copy", "namespace": "dst", "annotations": {"a": "b"}},
                "spec": spec,
            },
        },
    })
    .to_string()
}

#[tokio::test]
async fn a_source_ref_is_checked_as_the_clone_of_its_data_sources_claim() {
    use base64::Engine as _;
    let setup = setup().await;
    let by_ref = |name: &str| json!({"sourceRef": {"kind": "DataSource", "namespace": "images", "name": name}});
    let (status, body) = setup
        .send(
            "POST",
            "/datavolume-mutate",
            false,
            &[],
            &review_of("alice", &by_ref("golden")),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().expect("patch"))
        .expect("base64");
    let patch: Value = serde_json::from_slice(&patch).expect("json");
    let payload = Validator::new(&setup.public_key, UPLOAD_ISSUER, 10)
        .validate(patch[0]["value"].as_str().expect("token"), now())
        .expect("the controller's check");
    assert_eq!(
        payload,
        Payload::clone_of("src", "golden", "dst", "copy"),
        "the DataSource's claim"
    );

    // Refused: without the right to the DataSource's claim's namespace, as any clone; a
    // DataSource that is not there, with the API server's words, as upstream's; one that points
    // to nothing yet (it could never get its token).
    for (user, data_source, message) in [
        ("bob", "golden", "insufficient permissions in clone source namespace"),
        ("alice", "gone", "datasources.cdi.kubevirt.io \"gone\" not found"),
        (
            "alice",
            "empty",
            "DataSource images/empty points to nothing yet: it may not be ready",
        ),
    ] {
        let (_, body) = setup
            .send(
                "POST",
                "/datavolume-mutate",
                false,
                &[],
                &review_of(user, &by_ref(data_source)),
            )
            .await;
        let answer: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(answer["response"]["allowed"], false, "{data_source}");
        assert_eq!(answer["response"]["status"]["message"], message);
    }

    // Another kind: admitted without a token (cdi-controller refuses it).
    let other = json!({"sourceRef": {"kind": "PersistentVolumeClaim", "name": "golden"}});
    let (_, body) = setup
        .send("POST", "/datavolume-mutate", false, &[], &review_of("alice", &other))
        .await;
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        (answer["response"]["allowed"].clone(), answer["response"].get("patch")),
        (json!(true), None)
    );
}

#[tokio::test]
async fn the_webhook_gives_an_allowed_clone_a_token_and_refuses_others() {
    use base64::Engine as _;
    let setup = setup().await;
    // The API server calls webhooks without a client certificate.
    let (status, body) = setup
        .send("POST", "/datavolume-mutate", false, &[], &clone_review("alice"))
        .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["response"]["uid"], "req-7");
    assert_eq!(answer["response"]["allowed"], true);
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().expect("patch"))
        .expect("base64");
    let patch: Value = serde_json::from_slice(&patch).expect("json");
    assert_eq!(
        patch[0]["path"],
        "/metadata/annotations/cdi.kubevirt.io~1storage.clone.token"
    );
    let payload = Validator::new(&setup.public_key, UPLOAD_ISSUER, 10)
        .validate(patch[0]["value"].as_str().expect("token"), now())
        .expect("the controller's check");
    assert_eq!(payload, Payload::clone_of("src", "golden", "dst", "copy"));
    let (status, body) = setup
        .send("POST", "/datavolume-mutate", false, &[], &clone_review("bob"))
        .await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "insufficient permissions in clone source namespace"
    );
    let reviews = setup.reviews.0.lock().expect("reviews").clone();
    let bobs: Vec<&Value> = reviews.iter().filter(|r| r["user"] == "bob").collect();
    assert_eq!(bobs.len(), 2, "datavolumes/source, then pods");
    assert_eq!(bobs[1]["resourceAttributes"]["resource"], "pods");
    assert_eq!(bobs[1]["resourceAttributes"]["namespace"], "src");
}

#[tokio::test]
async fn deleting_a_cdi_that_blocks_its_uninstall_waits_for_the_data_volumes_to_go() {
    let setup = setup().await;
    // The webhook's answer to the deletion of a deployed CDI with `strategy`.
    let answer = |strategy: &'static str| {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "del-1", "operation": "DELETE", "name": "cdi",
            "resource": {"group": "cdi.kubevirt.io", "version": "v1beta1", "resource": "cdis"},
            "oldObject": {"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI",
                          "metadata": {"name": "cdi"}, "spec": {"uninstallStrategy": strategy},
                          "status": {"phase": "Deployed"}}
        }});
        let setup = &setup;
        async move {
            let (status, body) = setup
                .send("POST", "/cdi-validate", false, &[], &review.to_string())
                .await;
            assert_eq!(status, 200, "{body}");
            let answer: Value = serde_json::from_str(&body).expect("json");
            assert_eq!(answer["response"]["uid"], "del-1");
            answer["response"].clone()
        }
    };
    setup.reviews.1.store(3, std::sync::atomic::Ordering::SeqCst);
    let refused = answer("BlockUninstallIfWorkloadsExist").await;
    assert_eq!(refused["allowed"], false);
    assert_eq!(
        refused["status"]["message"],
        "rejecting the uninstall request, since there are still 2 DataVolumes present. Either delete all DataVolumes or change the uninstall strategy before uninstalling CDI",
        "counted up to two, as upstream lists them"
    );
    assert_eq!(
        answer("RemoveWorkloads").await["allowed"],
        true,
        "the default strategy removes them"
    );
    setup.reviews.1.store(0, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        answer("BlockUninstallIfWorkloadsExist").await["allowed"],
        true,
        "no DataVolume left"
    );
}
