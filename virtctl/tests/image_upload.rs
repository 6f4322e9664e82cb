//! `virtctl image-upload`'s steps against a mock API server (each request asserted) and a fake
//! upload proxy on loopback: the DataVolume is made, the wait (watching it between looks) ends
//! when it is UploadReady, the token comes from an UploadTokenRequest, the image is sent (again
//! after a failed attempt) to the async path the proxy offers, and the command ends when the
//! claim's server succeeded.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use clap::Parser as _;
use http_body_util::{BodyExt as _, Full};
use pretty_assertions::assert_eq;
use serde_json::json;
use virtctl::cli::{Cli, Command};
use virtctl::image_upload::{flow, validate};

#[path = "../../kubevirt-tests/support/mock_api_server.rs"]
mod mock_api_server;

/// What the fake proxy got: method, path, authorization and body length of each request.
type Received = Arc<Mutex<Vec<(String, String, String, usize)>>>;

/// A proxy that takes async uploads, refusing the first POST with 503.
async fn fake_proxy() -> (std::net::SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
    let address = listener.local_addr().expect("address");
    let received: Received = Arc::default();
    let record = Arc::clone(&received);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let record = Arc::clone(&record);
            let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let record = Arc::clone(&record);
                async move {
                    let method = request.method().to_string();
                    let path = request.uri().path().to_owned();
                    let authorization = request
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let body = request.into_body().collect().await.expect("body").to_bytes();
                    let posts = {
                        let mut all = record.lock().expect("received");
                        all.push((method.clone(), path, authorization, body.len()));
                        all.iter().filter(|r| r.0 == "POST").count()
                    };
                    let status = if method == "POST" && posts == 1 { 503 } else { 200 };
                    let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"")));
                    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    (address, received)
}

#[tokio::test]
async fn a_new_data_volume_is_made_waited_for_uploaded_and_finished() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("disk.img");
    std::fs::write(&image, vec![7_u8; 600 * 1024]).expect("image");
    let (proxy, received) = fake_proxy().await;
    let line = format!(
        "virtctl image-upload dv disk --size 1Gi --image-path {} --uploadproxy-url http://{proxy} --insecure",
        image.display()
    );
    let Command::ImageUpload(args) = Cli::try_parse_from(line.split_whitespace()).expect("parses").command else {
        unreachable!()
    };
    let upload = validate(&args).expect("valid");
    let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
        "message": "persistentvolumeclaims \"disk\" not found"});
    let dv = |phase: &str| {
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "metadata": {"name": "disk", "namespace": "vms", "uid": "dv-uid"},
        "status": {"phase": phase, "claimName": "disk"}})
    };
    let claim = |annotations: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "disk", "namespace": "vms", "uid": "claim-uid", "annotations": annotations}, "spec": {}})
    };
    let (client, log) = mock_api_server::api_server(vec![
        (404, not_found),
        (201, dv("")),
        (200, dv("UploadScheduled")),
        (
            200,
            json!({"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": []}),
        ),
        (200, claim(json!({}))),
        (200, dv("UploadScheduled")),
        // The wait watches the DataVolume between its looks: a change ends the pause at once.
        (200, json!({"type": "MODIFIED", "object": dv("UploadReady")})),
        (200, dv("UploadReady")),
        (
            200,
            json!({"apiVersion": "upload.cdi.kubevirt.io/v1beta1", "kind": "UploadTokenRequest",
            "spec": {"pvcName": "disk"}, "status": {"token": "the-token"}}),
        ),
        (200, claim(json!({"cdi.kubevirt.io/storage.pod.phase": "Succeeded"}))),
    ]);
    flow::run(&client, "vms", &args, &upload).await.expect("uploaded");
    let requests: Vec<(String, String)> = log
        .lock()
        .expect("log")
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    let expected = [
        ("GET", "/api/v1/namespaces/vms/persistentvolumeclaims/disk"),
        ("POST", "/apis/cdi.kubevirt.io/v1beta1/namespaces/vms/datavolumes?"),
        ("GET", "/apis/cdi.kubevirt.io/v1beta1/namespaces/vms/datavolumes/disk"),
        ("GET", "/api/v1/namespaces/vms/events?"),
        ("GET", "/api/v1/namespaces/vms/persistentvolumeclaims/disk"),
        ("GET", "/apis/cdi.kubevirt.io/v1beta1/namespaces/vms/datavolumes/disk"),
        (
            "GET",
            "/apis/cdi.kubevirt.io/v1beta1/namespaces/vms/datavolumes?&watch=true&timeoutSeconds=290&fieldSelector=metadata.name%3Ddisk&allowWatchBookmarks=true&resourceVersion=0",
        ),
        ("GET", "/apis/cdi.kubevirt.io/v1beta1/namespaces/vms/datavolumes/disk"),
        (
            "POST",
            "/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/vms/uploadtokenrequests",
        ),
        ("GET", "/api/v1/namespaces/vms/persistentvolumeclaims/disk"),
    ]
    .map(|(m, p)| (m.to_owned(), p.to_owned()));
    assert_eq!(requests, expected);
    let created = log.lock().expect("log")[1].body.clone();
    assert_eq!(created["spec"]["source"], json!({"upload": {}}));
    assert_eq!(created["spec"]["storage"]["resources"]["requests"]["storage"], "1Gi");
    let token_request = log.lock().expect("log")[8].body.clone();
    assert_eq!(token_request["spec"], json!({"pvcName": "disk"}));
    let bearer = "Bearer the-token".to_owned();
    let size = 600 * 1024;
    assert_eq!(
        *received.lock().expect("received"),
        [
            ("HEAD".to_owned(), "/v1beta1/upload-async".to_owned(), bearer.clone(), 0),
            (
                "POST".to_owned(),
                "/v1beta1/upload-async".to_owned(),
                bearer.clone(),
                size
            ),
            ("HEAD".to_owned(), "/v1beta1/upload-async".to_owned(), bearer.clone(), 0),
            ("POST".to_owned(), "/v1beta1/upload-async".to_owned(), bearer, size),
        ],
        "probed and sent again after the 503"
    );
}
