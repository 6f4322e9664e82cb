//! virt-api's process: bind, serve, and connect to the cluster in the background. The server is
//! up before the cluster is reachable (the webhooks and discovery need no cluster); the kube
//! connection is retried until it works, and the KubeVirt CR's configuration is watched from then on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use kubevirt_api::clock::SystemClock;
use kubevirt_api::v1::{ClusterConfig, KubeVirt, Rotation};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::admission::AdmissionContext;
use crate::app_state::AppState;
use crate::backends::{HandlerConnector, KubeSubresourceCluster};
use crate::certificates;
use crate::server::{router, serve};
use crate::subresources::authorize::Authentication;
use crate::tls::{CertSource, ClientCa, ServerTls, server_tls_for};

/// How virt-api runs.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Where the serving certificate comes from; `None`: from the cluster (see
    /// [`crate::certificates`]), which is then awaited before serving.
    pub cert: Option<CertSource>,
    /// KubeVirt's namespace.
    pub install_namespace: String,
    /// How virt-api reaches the handlers.
    pub node: HandlerConnector,
    /// The aggregation layer's request-header CA; subresource callers must present a certificate
    /// it signed. `None` with `authentication: Disabled` is for local use only.
    pub requestheader_ca: Option<std::path::PathBuf>,
    /// The common names the request-header CA's client certificates may carry (the aggregation
    /// layer's `requestheader-allowed-names`); empty: any it signed.
    pub requestheader_allowed_names: Vec<String>,
    /// Whether subresource requests are authenticated and authorized.
    pub authentication: Authentication,
}

/// Why virt-api could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The cluster's certificates could not be set up.
    #[error(transparent)]
    Certificates(#[from] crate::certificates::CertificateError),
    /// Stopped before the cluster could be reached.
    #[error("stopped before the Kubernetes API server could be reached")]
    Stopped,
    /// The address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("serving HTTPS failed: {0}")]
    Serve(std::io::Error),
}

type KubeState = AppState<KubeSubresourceCluster, HandlerConnector>;

/// Serves until `stop` is cancelled.
pub async fn run(config: ApiConfig, stop: CancellationToken) -> Result<(), RunError> {
    // The certificates' lifetimes, as the KubeVirt CR asks for them.
    let (rotation, _) = tokio::sync::watch::channel(Rotation::default());
    let (tls, node) = match &config.cert {
        Some(source) => {
            let policy = config
                .requestheader_ca
                .clone()
                .map(|ca| front_proxy_clients(ClientCa::File(ca), &config.requestheader_allowed_names));
            (server_tls_for(source, policy.as_ref())?, config.node.clone())
        }
        None => cluster_tls(&config, &rotation, &stop).await?,
    };
    let listener = std::net::TcpListener::bind(config.listen).map_err(|source| RunError::Listen {
        address: config.listen,
        source,
    })?;
    let context = AdmissionContext {
        config: ClusterConfig::default(),
        install_namespace: config.install_namespace.clone(),
    };
    let state: Arc<KubeState> = Arc::new(AppState::new(
        context,
        config.authentication,
        Arc::new(SystemClock),
        Arc::new(node),
        "connecting",
    ));
    tracing::info!(address = %config.listen, "virt-api serving HTTPS");
    let connector = tokio::spawn(connect(
        state.clone(),
        config.install_namespace.clone(),
        rotation,
        stop.clone(),
    ));
    let served = serve(listener, tls.config, router(state), stop.clone()).await;
    stop.cancel();
    let _ = connector.await;
    served.map_err(RunError::Serve)
}

pub use control_loop::aggregation::front_proxy_clients;

/// The certificates kept in the cluster: waits for the API server, reads the lifetimes the
/// KubeVirt CR asks for, then makes or reads the certificates, publishes the CA, reads the
/// request-header CA (unless a file was given), and keeps the certificates current from then on,
/// with the lifetimes `rotation` gives.
async fn cluster_tls(
    config: &ApiConfig,
    rotation: &watch::Sender<Rotation>,
    stop: &CancellationToken,
) -> Result<(ServerTls, HandlerConnector), RunError> {
    let client = loop {
        match kube::Client::try_default().await {
            Ok(client) => break client,
            Err(e) => tracing::warn!(error = %e, "waiting for the Kubernetes API server to read the certificates"),
        }
        tokio::select! {
            () = stop.cancelled() => return Err(RunError::Stopped),
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    };
    let namespace = &config.install_namespace;
    rotation.send_replace(certificates::read_rotation(&client, namespace).await?);
    let lifetimes = *rotation.borrow();
    let (made, next) = certificates::ensure(&client, namespace, &lifetimes).await?;
    certificates::publish_ca_bundle(&client, &made.ca_bundle).await?;
    let origin = format!("secret {namespace}/{}", certificates::API_SECRET);
    let source = CertSource::Pem {
        origin: origin.clone(),
        cert: made.serving.cert.clone(),
        key: made.serving.key.clone(),
    };
    let policy = if let Some(path) = &config.requestheader_ca {
        Some(front_proxy_clients(
            ClientCa::File(path.clone()),
            &config.requestheader_allowed_names,
        ))
    } else {
        let header = certificates::requestheader(&client).await?;
        if header.ca.is_none() {
            tracing::warn!("the cluster has no request-header CA: subresource requests cannot be authenticated");
        }
        header.ca.map(|pem| {
            let ca = ClientCa::Pem {
                origin: "configmap kube-system/extension-apiserver-authentication".to_owned(),
                pem,
            };
            front_proxy_clients(ca, &header.allowed_names)
        })
    };
    let tls = server_tls_for(&source, policy.as_ref())?;
    let node = HandlerConnector::from_pem(config.node.port(), &origin, &made.ca_bundle, &made.handler_client)?;
    if let Some(serving) = tls.held.clone() {
        let holders = certificates::Holders {
            serving,
            handlers: node.clone(),
        };
        tokio::spawn(certificates::keep(
            client,
            namespace.clone(),
            next,
            made.ca_bundle,
            holders,
            rotation.subscribe(),
            stop.clone(),
        ));
    }
    Ok((tls, node))
}

/// Connects to the API server, retrying every few seconds, then follows the KubeVirt CR: its
/// configuration, and the certificates' lifetimes the one in `install_namespace` asks for.
async fn connect(
    state: Arc<KubeState>,
    install_namespace: String,
    rotation: watch::Sender<Rotation>,
    stop: CancellationToken,
) {
    let mut delay = Duration::from_secs(1);
    let client = loop {
        let attempt = async {
            let client = kube::Client::try_default().await.map_err(|e| e.to_string())?;
            client.apiserver_version().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(client)
        };
        match attempt.await {
            Ok(client) => break client,
            Err(why) => {
                tracing::warn!(error = %why, "no Kubernetes API server yet; retrying");
                state.set_cluster_unavailable(&why);
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    };
    tracing::info!("connected to the Kubernetes API server");
    state.set_cluster(Arc::new(KubeSubresourceCluster::new(
        client.clone(),
        install_namespace.clone(),
    )));
    let api: kube::Api<KubeVirt> = kube::Api::all(client);
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    // The last refusal of the CR's lifetimes, logged once until it changes.
    let mut refused: Option<String> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => match event {
                Some(Ok(watcher::Event::Apply(kv) | watcher::Event::InitApply(kv))) => {
                    state.set_config(ClusterConfig::from_kubevirt(&kv));
                    let ours = kv.metadata.namespace.as_deref() == Some(install_namespace.as_str())
                        && kv.metadata.deletion_timestamp.is_none();
                    if ours {
                        let wanted = match certificates::rotation_of(&kv) {
                            Ok(wanted) => {
                                refused = None;
                                wanted
                            }
                            Err(error) => {
                                let reasons = error.to_string();
                                if refused.as_ref() != Some(&reasons) {
                                    tracing::error!(%error, "the KubeVirt CR's certificateRotateStrategy is refused; keeping the default lifetimes");
                                }
                                refused = Some(reasons);
                                Rotation::default()
                            }
                        };
                        rotation.send_if_modified(|held| std::mem::replace(held, wanted) != wanted);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => tracing::warn!(error = %e, "watching KubeVirt failed; retrying"),
                None => return,
            }
        }
    }
}
