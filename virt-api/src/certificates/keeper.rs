//! Keeping the certificates current while virt-api runs: wake when the next one is due (within
//! the hour) or the KubeVirt CR asks for other lifetimes, renew what [`super::ensure`] finds
//! due, serve virt-api's renewed certificates from the next handshake on, and publish a changed
//! CA bundle to the webhooks and APIServices.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::backends::HandlerConnector;
use crate::tls::HeldCert;

use super::plan::Rotation;
use super::{API_SECRET, Certificates, publish_ca_bundle};

/// What virt-api serves and presents with its certificates.
#[derive(Debug)]
pub struct Holders {
    /// The serving certificate.
    pub serving: Arc<HeldCert>,
    /// The handler connection, with the client certificate.
    pub handlers: HandlerConnector,
}

/// How long to wait after a failed look.
const RETRY: Duration = Duration::from_secs(30);

fn until(next: i64) -> Duration {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    Duration::from_secs(u64::try_from(next - now).unwrap_or(0).max(1))
}

/// Uses `certificates` from now on; publishes the bundle when it is not `published`.
async fn take(
    client: &kube::Client,
    namespace: &str,
    certificates: &Certificates,
    published: &mut String,
    holders: &Holders,
) -> Result<(), String> {
    // The bundle first: callers trust a renewed certificate only once they have it.
    if *published != certificates.ca_bundle {
        publish_ca_bundle(client, &certificates.ca_bundle)
            .await
            .map_err(|e| e.to_string())?;
        published.clone_from(&certificates.ca_bundle);
    }
    let origin = format!("secret {namespace}/{API_SECRET}");
    holders
        .serving
        .replace(&origin, &certificates.serving.cert, &certificates.serving.key)
        .map_err(|e| e.to_string())?;
    holders
        .handlers
        .replace_pem(&origin, &certificates.ca_bundle, &certificates.handler_client)
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Looks again at `next` (seconds since the epoch), after each renewal, and when `rotation`
/// changes, until `stop`.
pub async fn keep(
    client: kube::Client,
    namespace: String,
    mut next: i64,
    mut published: String,
    holders: Holders,
    mut rotation: watch::Receiver<Rotation>,
    stop: CancellationToken,
) {
    let mut wait = until(next);
    let mut following = true;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
            changed = rotation.changed(), if following => if changed.is_err() {
                // The KubeVirt watch ended: the lifetimes stay as they are, the timer goes on.
                following = false;
                wait = until(next);
                continue;
            },
        }
        let lifetimes = *rotation.borrow_and_update();
        let looked = match super::ensure(&client, &namespace, &lifetimes).await {
            Ok((certificates, due)) => {
                next = due;
                take(&client, &namespace, &certificates, &mut published, &holders).await
            }
            Err(error) => Err(error.to_string()),
        };
        wait = match looked {
            Ok(()) => until(next),
            Err(error) => {
                tracing::warn!(%error, "keeping the certificates failed; trying again");
                RETRY
            }
        };
    }
}
