//! The import's progress as upstream's importer reports it: the share of the source read so far,
//! in percent, as the counter `kubevirt_cdi_import_progress_total{ownerUID="<DataVolume uid>"}`
//! on `https://<pod>:8443/metrics` (a certificate made at start, as upstream's), which
//! cdi-controller reads into the DataVolume's `status.progress`. A source of unknown length
//! reports no progress.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use cdi_api::importer_env::{METRICS_PORT, PROGRESS_METRIC as METRIC};

/// A source being read: the bytes read so far, and how many there are.
type Followed = (Arc<AtomicU64>, u64);

/// What is being read, shared between the import and the metrics endpoint.
#[derive(Clone, Debug, Default)]
pub struct Progress(Arc<Mutex<Option<Followed>>>);

impl Progress {
    /// Follows `read` towards `total` bytes (none known: no progress).
    pub fn follow(&self, read: Arc<AtomicU64>, total: Option<u64>) {
        if let Ok(mut current) = self.0.lock() {
            *current = total.filter(|t| *t > 0).map(|t| (read, t));
        }
    }

    /// The share read, in percent (at most 100), if the length is known.
    #[must_use]
    pub fn percent(&self) -> Option<f64> {
        let current = self.0.lock().ok()?;
        let (read, total) = current.as_ref()?;
        #[expect(
            clippy::cast_precision_loss,
            reason = "a percentage needs no more than f64's 52 bits"
        )]
        let share = read.load(Ordering::Relaxed) as f64 / *total as f64 * 100.0;
        Some(share.min(100.0))
    }

    /// The metrics text (Prometheus' exposition format) for the DataVolume `owner_uid`.
    #[must_use]
    pub fn metrics(&self, owner_uid: &str) -> String {
        let value = self.percent().unwrap_or(0.0);
        format!(
            "# HELP {METRIC} The import progress in percentage\n# TYPE {METRIC} counter\n{METRIC}{{ownerUID=\"{owner_uid}\"}} {value:.2}\n"
        )
    }
}

/// Why the metrics endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Its certificate.
    #[error("making the metrics endpoint's certificate: {0}")]
    Certificate(#[from] control_loop::tls::TlsError),
    /// Its port.
    #[error("binding port {port} for the metrics endpoint: {source}")]
    Bind {
        /// The port.
        port: u16,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The endpoint's content: the progress for its DataVolume.
struct Endpoint {
    progress: Progress,
    owner_uid: String,
}

impl control_loop::http::Endpoints for Endpoint {
    fn healthy(&self) -> bool {
        true
    }

    async fn metrics(&self) -> String {
        self.progress.metrics(&self.owner_uid)
    }
}

/// Serves `progress` on `https://:<port>/metrics` (port 0: any free one) with a certificate made
/// now, until `stop`; gives the address it listens on.
///
/// # Errors
/// [`ServeError`].
pub async fn serve(
    progress: Progress,
    owner_uid: String,
    port: u16,
    stop: tokio_util::sync::CancellationToken,
) -> Result<std::net::SocketAddr, ServeError> {
    let tls = control_loop::tls::server_tls(&control_loop::tls::CertSource::SelfSigned {
        names: vec!["cdi-importer".to_owned()],
    })?;
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
        .await
        .map_err(|source| ServeError::Bind { port, source })?;
    let address = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { port, source })?;
    let endpoint = Arc::new(Endpoint { progress, owner_uid });
    tokio::spawn(control_loop::http::serve(listener, endpoint, Some(tls.config), stop));
    Ok(address)
}

/// A reader that counts the bytes read through it.
#[derive(Debug)]
pub struct Counted<R> {
    inner: R,
    /// The bytes read so far.
    pub read: Arc<AtomicU64>,
}

impl<R> Counted<R> {
    /// Counts what is read from `inner`.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            read: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buffer)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metric_says_the_share_read_for_the_owner() {
        let progress = Progress::default();
        assert_eq!(progress.percent(), None);
        assert!(
            progress
                .metrics("uid-1")
                .ends_with("kubevirt_cdi_import_progress_total{ownerUID=\"uid-1\"} 0.00\n")
        );
        let mut counted = Counted::new(io::Cursor::new(vec![7_u8; 1000]));
        progress.follow(Arc::clone(&counted.read), Some(800));
        let mut buffer = [0_u8; 200];
        counted.read_exact(&mut buffer).expect("read");
        assert_eq!(progress.percent(), Some(25.0));
        assert!(progress.metrics("uid-1").contains("{ownerUID=\"uid-1\"} 25.00\n"));
        let mut rest = Vec::new();
        counted.read_to_end(&mut rest).expect("read");
        assert_eq!(progress.percent(), Some(100.0), "never past 100");
        progress.follow(Arc::clone(&counted.read), None);
        assert_eq!(progress.percent(), None, "an unknown length reports none");
        progress.follow(counted.read, Some(0));
        assert_eq!(progress.percent(), None);
    }
}
