//! What virt-api's handlers share: the admission context, how subresource requests are
//! authenticated, the clock, and the cluster and node connections. Its own module, so the server
//! and the subresource routes both depend on it and not on each other.

use std::sync::{Arc, PoisonError, RwLock};

use kubevirt_api::clock::Clock;

use crate::admission::AdmissionContext;
use crate::backends::{NodeConnector, SubresourceCluster};
use crate::subresources::ApiStatus;
use crate::subresources::authorize::Authentication;

/// Everything the handlers share.
pub struct AppState<C, N> {
    pub(crate) admission: RwLock<AdmissionContext>,
    /// How subresource requests are authenticated.
    pub authentication: Authentication,
    pub(crate) clock: Arc<dyn Clock>,
    cluster: RwLock<Result<Arc<C>, String>>,
    /// The node connection for pause, unpause and console.
    pub node: Arc<N>,
}

impl<C, N> std::fmt::Debug for AppState<C, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl<C: SubresourceCluster, N: NodeConnector> AppState<C, N> {
    /// A state with no cluster yet; `why` says so in every 503.
    pub fn new(
        admission: AdmissionContext,
        authentication: Authentication,
        clock: Arc<dyn Clock>,
        node: Arc<N>,
        why: &str,
    ) -> Self {
        Self {
            admission: RwLock::new(admission),
            authentication,
            clock,
            cluster: RwLock::new(Err(why.to_owned())),
            node,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// A state with upstream's default cluster configuration, KubeVirt in namespace `kubevirt`,
    /// a clock stopped at 2026-11-22T00:00:00Z and no cluster yet: for tests and demonstrations.
    #[must_use]
    pub fn with_defaults(authentication: Authentication, node: Arc<N>) -> Self {
        let context = AdmissionContext {
            config: kubevirt_api::v1::ClusterConfig::default(),
            install_namespace: "kubevirt".to_owned(),
        };
        let start = k8s_openapi::jiff::Timestamp::from_second(1_795_305_600)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let clock = Arc::new(kubevirt_api::clock::ManualClock::new(start));
        Self::new(context, authentication, clock, node, "none")
    }

    /// The cluster is reachable now.
    pub fn set_cluster(&self, cluster: Arc<C>) {
        *self.cluster.write().unwrap_or_else(PoisonError::into_inner) = Ok(cluster);
    }

    /// The cluster is not reachable, because `why`.
    pub fn set_cluster_unavailable(&self, why: &str) {
        let mut slot = self.cluster.write().unwrap_or_else(PoisonError::into_inner);
        if slot.is_err() {
            *slot = Err(why.to_owned());
        }
    }

    /// Replaces the cluster configuration the webhooks apply.
    pub fn set_config(&self, config: kubevirt_api::v1::ClusterConfig) {
        self.admission.write().unwrap_or_else(PoisonError::into_inner).config = config;
    }

    /// The cluster configuration the webhooks and `expand-spec` apply.
    pub(crate) fn admission_config(&self) -> kubevirt_api::v1::ClusterConfig {
        self.admission
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .config
            .clone()
    }

    /// The cluster, or the 503 that says why there is none.
    pub(crate) fn cluster(&self) -> Result<Arc<C>, ApiStatus> {
        self.cluster
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .map_err(|why| {
                ApiStatus::unavailable(format!("virt-api is not connected to a Kubernetes API server: {why}"))
            })
    }
}
