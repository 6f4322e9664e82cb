//! The import's progress, read as upstream's controller reads it: while the importer pod runs,
//! `https://<pod IP>:8443/metrics` (the importer's own certificate, not verified, within 2 s) is
//! fetched, and the DataVolume's `kubevirt_cdi_import_progress_total{ownerUID="<uid>"}` becomes its
//! `status.progress`, `"45.67%"`. A pod that does not answer leaves the progress as it was.

use std::time::Duration;

use cdi_importer::http_source::{self, HttpSource};
use k8s_openapi::api::core::v1::Pod;

pub use cdi_api::importer_env::{METRICS_PORT as PORT, PROGRESS_METRIC as METRIC};
/// How long a scrape may take (upstream's).
const TIMEOUT: Duration = Duration::from_secs(2);
/// The most of a metrics page read.
const PAGE_LIMIT: usize = 1 << 20;

/// The percentage `metrics` gives for the DataVolume `owner_uid` (upstream's pattern: one to
/// three digits, a fraction optional).
#[must_use]
pub fn parse(metrics: &str, owner_uid: &str) -> Option<f64> {
    let prefix = format!("{METRIC}{{ownerUID=\"{owner_uid}\"}} ");
    let value = metrics.lines().find_map(|line| line.strip_prefix(&prefix))?.trim();
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !(1..=3).contains(&whole.len()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    value.parse().ok()
}

/// The progress as the DataVolume shows it.
#[must_use]
pub fn shown(percent: f64) -> String {
    format!("{percent:.2}%")
}

/// The running importer pod's address, if it has one: none once its container has exited (the
/// kubelet still says `Running` while it tears the pod down, and the metrics server is gone).
#[must_use]
pub fn pod_address(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?;
    let exited = status
        .container_statuses
        .iter()
        .flatten()
        .any(|s| s.state.as_ref().is_some_and(|state| state.terminated.is_some()));
    (status.phase.as_deref() == Some("Running") && !exited)
        .then_some(status.pod_ip.as_deref())
        .flatten()
        .filter(|ip| !ip.is_empty())
}

/// Where the importers' metrics are read.
pub trait ImporterMetrics: Send + Sync {
    /// The metrics page of the importer at `pod_ip`; `None` when it cannot be read (the failure
    /// is logged).
    fn scrape(&self, pod_ip: &str) -> impl Future<Output = Option<String>> + Send;
}

/// The importers' endpoints over HTTPS, on their port.
#[derive(Clone, Copy, Debug)]
pub struct HttpsMetrics {
    /// The port ([`PORT`] in the cluster).
    pub port: u16,
}

impl Default for HttpsMetrics {
    fn default() -> Self {
        Self { port: PORT }
    }
}

impl ImporterMetrics for HttpsMetrics {
    async fn scrape(&self, pod_ip: &str) -> Option<String> {
        let host = if pod_ip.contains(':') {
            format!("[{pod_ip}]")
        } else {
            pod_ip.to_owned()
        };
        let source = HttpSource {
            url: format!("https://{host}:{}/metrics", self.port),
            // The importer's certificate is its own, made at start, as upstream's; a pod that
            // answers with a redirect is not followed elsewhere in the cluster.
            skip_tls_verify: true,
            no_redirects: true,
            ..HttpSource::default()
        };
        let fetch = async {
            let tls = http_source::tls_config(&source)?;
            let answer = http_source::get(&source, &tls).await?;
            if !answer.status.is_success() {
                return Err(http_source::HttpError::Status {
                    url: answer.url,
                    status: answer.status,
                });
            }
            answer.bytes(PAGE_LIMIT).await
        };
        match tokio::time::timeout(TIMEOUT, fetch).await {
            Ok(Ok(page)) => Some(String::from_utf8_lossy(&page).into_owned()),
            Ok(Err(error)) => {
                tracing::debug!(%error, pod_ip, "the importer's progress could not be read");
                None
            }
            Err(_) => {
                tracing::debug!(pod_ip, "the importer's progress did not come within 2 s");
                None
            }
        }
    }
}

/// Metrics pages kept in memory by pod address (tests only).
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Default)]
pub struct FakeMetrics(pub std::sync::Mutex<std::collections::BTreeMap<String, String>>);

#[cfg(any(test, feature = "testing"))]
impl ImporterMetrics for FakeMetrics {
    async fn scrape(&self, pod_ip: &str) -> Option<String> {
        self.0.lock().ok()?.get(pod_ip).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_s_percentage_is_read_as_upstream_s_pattern_reads_it() {
        let page = "# HELP kubevirt_cdi_import_progress_total The import progress in percentage\n\
                    # TYPE kubevirt_cdi_import_progress_total counter\n\
                    kubevirt_cdi_import_progress_total{ownerUID=\"other\"} 99.00\n\
                    kubevirt_cdi_import_progress_total{ownerUID=\"dv-uid\"} 45.67\n";
        assert_eq!(parse(page, "dv-uid"), Some(45.67));
        assert_eq!(parse(page, "other"), Some(99.0));
        assert_eq!(parse(page, "missing"), None);
        let whole = "kubevirt_cdi_import_progress_total{ownerUID=\"u\"} 100\n";
        assert_eq!(parse(whole, "u"), Some(100.0));
        for bad in ["1000.0", "-1", "1e2", "abc", ""] {
            let page = format!("kubevirt_cdi_import_progress_total{{ownerUID=\"u\"}} {bad}\n");
            assert_eq!(parse(&page, "u"), None, "{bad}");
        }
        assert_eq!(shown(45.678), "45.68%");
        assert_eq!(shown(0.0), "0.00%");
    }

    #[test]
    fn only_a_running_pod_with_an_address_is_read() {
        let pod = |phase: &str, ip: Option<&str>| -> Pod {
            serde_json::from_value(serde_json::json!({"status": {"phase": phase, "podIP": ip}})).expect("pod")
        };
        assert_eq!(pod_address(&pod("Running", Some("10.244.1.5"))), Some("10.244.1.5"));
        assert_eq!(pod_address(&pod("Pending", Some("10.244.1.5"))), None);
        assert_eq!(pod_address(&pod("Running", None)), None);
        assert_eq!(pod_address(&pod("Running", Some(""))), None);
        // Its container exited: the kubelet still says Running while it tears the pod down.
        let exited: Pod = serde_json::from_value(serde_json::json!({"status": {
            "phase": "Running", "podIP": "10.244.1.5",
            "containerStatuses": [{"name": "importer", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}]}}))
        .expect("pod");
        assert_eq!(pod_address(&exited), None);
    }
}
