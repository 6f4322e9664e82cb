//! Why a reconcile stopped early: the write it could not make, with the API error. The reconcile
//! entry points log it once, inside their span that names the object, and retry after [`RETRY`].

use std::time::Duration;

use crate::cluster_api::ApiError;

/// Retry delay after a failed write.
pub const RETRY: Duration = Duration::from_secs(1);

/// A write a reconcile could not make.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action}")]
pub struct ReconcileError {
    /// What was attempted, as "cannot …" finishes it.
    pub action: String,
    /// The API server's answer.
    #[source]
    pub source: ApiError,
}

impl ReconcileError {
    /// `action` failed with `source`.
    pub fn new(action: impl Into<String>, source: ApiError) -> Self {
        Self {
            action: action.into(),
            source,
        }
    }
}

/// Logs why a reconcile stopped, once, with its cause (the reconcile's span names the object);
/// returns the retry delay.
pub fn log_and_retry(error: &ReconcileError) -> Duration {
    tracing::warn!(error = %error.source, "{error}; retrying");
    RETRY
}

/// Helps `?` name the write: `api.call().await.map_err(cannot("write the status"))?`.
pub fn cannot(action: &str) -> impl FnOnce(ApiError) -> ReconcileError + '_ {
    move |source| ReconcileError::new(action, source)
}
