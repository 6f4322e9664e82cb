//! Sending the image to the upload proxy, as upstream's `uploadData`: each attempt asks with a
//! `HEAD` whether the proxy takes async uploads (`/v1beta1/upload-async`), else posts to
//! `/v1beta1/upload`; the body is the file with its length and a progress bar; 200 is success,
//! anything else is retried (a 401 after the first attempt with a new token, at most three
//! times).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use control_loop::https_client::{self, Answer, RequestBody, send};
use http_body_util::{BodyExt as _, Empty};

use super::objects::proxy_url;
use super::progress::Bar;

/// The sync upload path.
pub const SYNC_PATH: &str = "/v1beta1/upload";
/// The async upload path.
pub const ASYNC_PATH: &str = "/v1beta1/upload-async";
/// How many times a token is asked for again after a 401 (upstream's).
pub const TOKEN_REFRESHES: u32 = 3;

/// Where new tokens come from.
pub trait Tokens {
    /// A new upload token.
    fn token(&self) -> impl Future<Output = Result<String, String>>;
}

/// How the upload is sent.
#[derive(Clone, Debug)]
pub struct Sending<'a> {
    /// The proxy's base URL.
    pub base: &'a str,
    /// TLS for an https URL.
    pub tls: Arc<rustls::ClientConfig>,
    /// Attempts before giving up (`--retry`; at least one).
    pub attempts: u32,
}

/// The file at `path` as a request body, counting what is read into `sent`.
fn file_body(path: &Path, sent: Arc<AtomicU64>) -> Result<RequestBody, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?;
    Ok(https_client::reader_body(file, sent))
}

/// One attempt: the async probe, then the post; gives the answer.
async fn attempt(sending: &Sending<'_>, token: &str, path: &Path, size: u64, bar: &mut Bar) -> Result<Answer, String> {
    let authorization = format!("Bearer {token}");
    let async_url = proxy_url(sending.base, ASYNC_PATH);
    let empty = Empty::<Bytes>::new().map_err(|never| match never {}).boxed();
    let probe = send(
        &sending.tls,
        "HEAD",
        &async_url,
        &[("authorization", authorization.clone())],
        empty,
    )
    .await;
    let url = match probe {
        Ok(answer) if answer.status == 200 => async_url,
        _ => proxy_url(sending.base, SYNC_PATH),
    };
    let sent = Arc::new(AtomicU64::new(0));
    let body = file_body(path, Arc::clone(&sent))?;
    let headers = [
        ("authorization", authorization),
        ("content-type", "application/octet-stream".to_owned()),
        ("content-length", size.to_string()),
    ];
    let sending_request = send(&sending.tls, "POST", &url, &headers, body);
    tokio::pin!(sending_request);
    let mut ticks = tokio::time::interval(std::time::Duration::from_millis(200));
    loop {
        tokio::select! {
            answer = &mut sending_request => {
                bar.show(sent.load(Ordering::Relaxed), true);
                return answer;
            }
            _ = ticks.tick() => bar.show(sent.load(Ordering::Relaxed), false),
        }
    }
}

/// A pause of up to `attempt` times 50 ms before another attempt (upstream's jitter).
fn backoff(attempt: u32) -> std::time::Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::time::Duration::from_millis(u64::from(attempt) * u64::from(nanos % 50))
}

/// Sends the file at `path` (`size` bytes) with `token`, asking `tokens` for new ones after a
/// 401.
///
/// # Errors
/// Upstream's messages: `authentication failed: …`, `failed to get upload token: …`, `error
/// uploading image after N retries: …`.
pub async fn upload<T: Tokens>(
    sending: &Sending<'_>,
    tokens: &T,
    mut token: String,
    path: &Path,
    size: u64,
) -> Result<(), String> {
    let mut bar = Bar::new(size);
    let mut refreshes = 0;
    let mut last = String::new();
    println!();
    for attempt_number in 0..sending.attempts.max(1) {
        if attempt_number > 0 {
            bar.restart();
            tokio::time::sleep(backoff(attempt_number)).await;
        }
        match attempt(sending, &token, path, size, &mut bar).await {
            Ok(answer) if answer.status == 200 => {
                println!();
                return Ok(());
            }
            Ok(answer) if answer.status == 401 => {
                let error = format!("unexpected return value {}, {}", answer.status, answer.body);
                if attempt_number == 0 || refreshes >= TOKEN_REFRESHES {
                    println!();
                    return Err(format!("authentication failed: {error}"));
                }
                refreshes += 1;
                token = tokens
                    .token()
                    .await
                    .map_err(|e| format!("failed to get upload token: {e}"))?;
                last = error;
            }
            Ok(answer) => last = format!("unexpected return value {}, {}", answer.status, answer.body),
            Err(error) => last = error,
        }
    }
    println!();
    Err(format!(
        "error uploading image after {} retries: {last}",
        sending.attempts.max(1)
    ))
}
