//! A registry on the loopback that speaks enough of the distribution API for the importer's
//! tests: manifests and blobs by repository, an optional Bearer token service or Basic auth, blobs
//! that may redirect to a second server, and a log of what each request carried.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use sha2::Digest as _;
use tokio::net::TcpListener;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

/// A tar layer of these files.
pub fn layer(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, path, *data).expect("append");
    }
    builder.into_inner().expect("tar")
}

/// How the registry wants its clients to authenticate.
#[derive(Clone, Debug)]
pub enum Auth {
    /// Anyone may pull.
    Anonymous,
    /// A Bearer token from `/token`, given to these credentials.
    Bearer { user: String, password: String },
    /// Basic auth with these credentials.
    Basic { user: String, password: String },
}

#[derive(Default)]
pub struct State {
    manifests: HashMap<String, (String, Vec<u8>)>,
    blobs: HashMap<String, Vec<u8>>,
    /// Blobs answered with a redirect to this server instead.
    redirect_blobs_to: Option<SocketAddr>,
    /// Each request: its path and its Authorization header.
    pub log: Vec<(String, Option<String>)>,
    /// Tokens issued so far; the current one is `a-token-<count>`.
    tokens_issued: usize,
    /// How many requests a token is good for (none: any number).
    pub token_uses: Option<usize>,
    /// Requests made with the current token.
    token_used: usize,
}

pub struct FakeRegistry {
    pub address: SocketAddr,
    pub state: Arc<Mutex<State>>,
}

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

fn reply(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if !content_type.is_empty() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, content_type.parse().expect("type"));
    }
    response
}

fn unknown(code: &str, message: &str) -> Response<Full<Bytes>> {
    let body = format!(r#"{{"errors":[{{"code":"{code}","message":"{message}"}}]}}"#);
    reply(StatusCode::NOT_FOUND, "application/json", body.into_bytes())
}

fn respond(
    address: SocketAddr,
    auth: &Auth,
    state: &Mutex<State>,
    request: &Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let authorization = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|a| a.to_str().ok())
        .map(str::to_owned);
    let mut state = state.lock().expect("state");
    state.log.push((request.uri().to_string(), authorization.clone()));
    if path == "/token" {
        return match auth {
            Auth::Bearer { user, password } if authorization.as_deref() == Some(&basic(user, password)) => {
                state.tokens_issued += 1;
                state.token_used = 0;
                let token = format!("a-token-{}", state.tokens_issued);
                reply(
                    StatusCode::OK,
                    "application/json",
                    format!(r#"{{"token":"{token}"}}"#).into_bytes(),
                )
            }
            _ => reply(StatusCode::UNAUTHORIZED, "", Vec::new()),
        };
    }
    let challenge = match auth {
        Auth::Anonymous => None,
        Auth::Bearer { .. }
            if authorization.as_deref() == Some(&format!("Bearer a-token-{}", state.tokens_issued))
                && state.token_uses.is_none_or(|uses| state.token_used < uses) =>
        {
            state.token_used += 1;
            None
        }
        Auth::Bearer { .. } => Some(format!(
            r#"Bearer realm="http://{address}/token",service="fake-registry""#
        )),
        Auth::Basic { user, password } if authorization.as_deref() == Some(&basic(user, password)) => None,
        Auth::Basic { .. } => Some(r#"Basic realm="fake""#.to_owned()),
    };
    if let Some(challenge) = challenge {
        let mut response = reply(StatusCode::UNAUTHORIZED, "", Vec::new());
        response
            .headers_mut()
            .insert(hyper::header::WWW_AUTHENTICATE, challenge.parse().expect("challenge"));
        return response;
    }
    if path == "/v2/" {
        return reply(StatusCode::OK, "application/json", b"{}".to_vec());
    }
    let Some(rest) = path.strip_prefix("/v2/") else {
        return reply(StatusCode::NOT_FOUND, "", Vec::new());
    };
    if rest.contains("/manifests/") {
        return match state.manifests.get(rest) {
            Some((content_type, body)) => reply(StatusCode::OK, content_type, body.clone()),
            None => unknown("MANIFEST_UNKNOWN", "manifest unknown"),
        };
    }
    if let Some((_, digest)) = rest.split_once("/blobs/") {
        if let Some(other) = state.redirect_blobs_to.filter(|_| state.blobs.contains_key(digest)) {
            let mut response = reply(StatusCode::TEMPORARY_REDIRECT, "", Vec::new());
            let location = format!("http://localhost:{}/blobs/{digest}", other.port());
            response
                .headers_mut()
                .insert(hyper::header::LOCATION, location.parse().expect("location"));
            return response;
        }
        return match state.blobs.get(digest) {
            Some(blob) => reply(StatusCode::OK, "application/octet-stream", blob.clone()),
            None => unknown("BLOB_UNKNOWN", "blob unknown to registry"),
        };
    }
    reply(StatusCode::NOT_FOUND, "", Vec::new())
}

async fn serve<F>(handler: F) -> SocketAddr
where
    F: Fn(SocketAddr, &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let address = listener.local_addr().expect("address");
    let handler = Arc::new(handler);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handler = Arc::clone(&handler);
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                TokioIo::new(stream),
                service_fn(move |r| {
                    let handler = Arc::clone(&handler);
                    async move { Ok::<_, Infallible>(handler(address, &r)) }
                }),
            ));
        }
    });
    address
}

impl FakeRegistry {
    pub async fn start(auth: Auth) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        let address = serve(move |address, request| respond(address, &auth, &shared, request)).await;
        Self { address, state }
    }

    /// Blobs are redirected to a second server on another host name (`localhost` rather than
    /// `127.0.0.1`), which logs what it is sent into the same log.
    pub async fn redirect_blobs(&self) {
        let state = Arc::clone(&self.state);
        let other = serve(move |_, request| {
            let authorization = request
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|a| a.to_str().ok())
                .map(str::to_owned);
            let mut state = state.lock().expect("state");
            let path = request.uri().path().to_owned();
            state.log.push((format!("other{path}"), authorization));
            let digest = path.trim_start_matches("/blobs/");
            match state.blobs.get(digest) {
                Some(blob) => reply(StatusCode::OK, "application/octet-stream", blob.clone()),
                None => reply(StatusCode::NOT_FOUND, "", Vec::new()),
            }
        })
        .await;
        self.state.lock().expect("state").redirect_blobs_to = Some(other);
    }

    pub fn blob(&self, bytes: Vec<u8>) -> String {
        let digest = digest(&bytes);
        self.state.lock().expect("state").blobs.insert(digest.clone(), bytes);
        digest
    }

    /// Stores `body` as a manifest of `repository`, under `tag` and its digest; gives the digest.
    pub fn manifest(&self, repository: &str, tag: &str, content_type: &str, body: &[u8]) -> String {
        let digest = digest(body);
        let mut state = self.state.lock().expect("state");
        for reference in [tag, digest.as_str()] {
            state.manifests.insert(
                format!("{repository}/manifests/{reference}"),
                (content_type.to_owned(), body.to_vec()),
            );
        }
        digest
    }

    /// An image of `layers` (compressed as given) with a config of `architecture` and `labels`.
    pub fn image(&self, repository: &str, tag: &str, architecture: &str, labels: &str, layers: Vec<Vec<u8>>) -> String {
        let config = format!(
            r#"{{"architecture":"{architecture}","os":"linux","config":{{"Labels":{labels}}},"rootfs":{{"type":"layers","diff_ids":[]}}}}"#
        );
        self.image_with_config(repository, tag, config, layers)
    }

    /// An image of `layers` with the config `config` (JSON).
    pub fn image_with_config(&self, repository: &str, tag: &str, config: String, layers: Vec<Vec<u8>>) -> String {
        let config_size = config.len();
        let config_digest = self.blob(config.into_bytes());
        let layers: Vec<String> = layers
            .into_iter()
            .map(|layer| {
                let size = layer.len();
                let digest = self.blob(layer);
                format!(
                    r#"{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{digest}","size":{size}}}"#
                )
            })
            .collect();
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config_digest}","size":{config_size}}},"layers":[{}]}}"#,
            layers.join(",")
        );
        self.manifest(repository, tag, OCI_MANIFEST, manifest.as_bytes())
    }

    pub fn log(&self) -> Vec<(String, Option<String>)> {
        self.state.lock().expect("state").log.clone()
    }
}
