//! The webhook's side of the API server: [`KubeCluster`] reads what the webhooks ask,
//! and [`follow_certificate`] serves the certificate of the Secret `kubevirt-operator-certs`
//! whenever it is made or renewed.

use std::sync::Arc;

use control_loop::tls::HeldCert;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kubevirt_api::v1::KubeVirt;
use tokio_util::sync::CancellationToken;

use crate::uninstall::{Cluster, Workload};
use crate::validator::CERT_SECRET;

/// The API server.
#[derive(Clone)]
pub struct KubeCluster(pub kube::Client);

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster").finish_non_exhaustive()
    }
}

impl Cluster for KubeCluster {
    async fn kubevirt(&self, namespace: &str, name: &str) -> Result<Option<KubeVirt>, String> {
        Api::<KubeVirt>::namespaced(self.0.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(|e| format!("reading KubeVirt {namespace}/{name}: {e}"))
    }

    async fn kubevirts(&self, namespace: &str) -> Result<Vec<KubeVirt>, String> {
        Api::<KubeVirt>::namespaced(self.0.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map(|list| list.items)
            .map_err(|e| format!("listing the KubeVirt CRs in {namespace}: {e}"))
    }

    async fn any_kubevirt(&self) -> Result<bool, String> {
        Api::<KubeVirt>::all(self.0.clone())
            .list_metadata(&ListParams::default().limit(1))
            .await
            .map(|list| !list.items.is_empty())
            .map_err(|e| format!("listing the KubeVirt CRs: {e}"))
    }

    async fn any(&self, workload: Workload) -> Result<bool, String> {
        let resource = workload.resource();
        match Api::<DynamicObject>::all_with(self.0.clone(), &resource)
            .list_metadata(&ListParams::default().limit(1))
            .await
        {
            Ok(list) => Ok(!list.items.is_empty()),
            // A kind the cluster does not serve (kubevirt-rs has no VMI replica sets) has none.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(e) => Err(format!("listing {}: {e}", resource.plural)),
        }
    }
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// Serves the certificate of `namespace/kubevirt-operator-certs` through `held` from each
/// handshake after it is written, until `stop`.
pub async fn follow_certificate(client: kube::Client, namespace: String, held: Arc<HeldCert>, stop: CancellationToken) {
    let api = Api::<Secret>::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={CERT_SECRET}"));
    let mut secrets = watcher(api, config).default_backoff().applied_objects().boxed();
    let origin = format!("secret {namespace}/{CERT_SECRET}");
    loop {
        let secret = tokio::select! {
            () = stop.cancelled() => return,
            next = secrets.next() => match next {
                Some(Ok(secret)) => secret,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching the webhook's certificate");
                    continue;
                }
                None => return,
            },
        };
        let (Some(cert), Some(key)) = (text(&secret, "tls.crt"), text(&secret, "tls.key")) else {
            continue;
        };
        if cert == held.cert_pem() {
            continue;
        }
        match held.replace(&origin, &cert, &key) {
            Ok(()) => tracing::info!(secret = origin.as_str(), "serving the webhook's new certificate"),
            Err(e) => tracing::warn!(secret = origin.as_str(), error = %e, "the webhook's certificate does not read"),
        }
    }
}
