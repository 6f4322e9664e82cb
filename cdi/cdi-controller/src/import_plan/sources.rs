//! Which sources this controller imports, and what a registry source's host says.

use cdi_api::{DataVolume, DataVolumePhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{ImportFacts, Step, UNSUPPORTED};

use crate::importer_pod::ImportSource;

/// A `sourceRef` that gives no source to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceRefProblem {
    /// Its DataSource is missing or points to nothing yet: the DataVolume waits (`Pending`).
    Waiting(String),
    /// It cannot be cloned here (another kind than `DataSource`): the DataVolume fails.
    Unsupported(String),
}

/// The DataVolume as its `sourceRef` resolves: `resolved` as its `source`, no `sourceRef`.
#[must_use]
pub fn with_source(data_volume: &DataVolume, resolved: cdi_api::DataVolumeSource) -> DataVolume {
    let mut effective = data_volume.clone();
    effective.spec.source = Some(resolved);
    effective.spec.source_ref = None;
    effective
}

/// The steps of a DataVolume this controller does not fill, or waits with, before anything is
/// made: a proxied import, a `sourceRef` without a source, a source it does not support.
pub(super) fn refusal(facts: &ImportFacts<'_>, now: &Time) -> Option<Vec<Step>> {
    let data_volume = facts.data_volume;
    if facts.settings.import_proxy
        && data_volume
            .spec
            .source
            .as_ref()
            .is_some_and(|s| s.http.is_some() || s.registry.is_some())
    {
        let why = "CDIConfig's importProxy is set, and this CDI does not import through a proxy yet".to_owned();
        return Some(super::blocked(facts, DataVolumePhase::Failed, UNSUPPORTED, why, now));
    }
    match facts.source_ref {
        Some(SourceRefProblem::Unsupported(why)) => {
            return Some(super::blocked(
                facts,
                DataVolumePhase::Failed,
                UNSUPPORTED,
                why.clone(),
                now,
            ));
        }
        Some(SourceRefProblem::Waiting(why)) => {
            return Some(super::blocked(
                facts,
                DataVolumePhase::Pending,
                super::clone::WITHOUT_SOURCE,
                why.clone(),
                now,
            ));
        }
        None => {}
    }
    if let Some(why) = unsupported(data_volume) {
        return Some(super::blocked(facts, DataVolumePhase::Failed, UNSUPPORTED, why, now));
    }
    None
}

/// Why a DataVolume is not imported here, if it is not.
pub(super) fn unsupported(data_volume: &DataVolume) -> Option<String> {
    let spec = &data_volume.spec;
    if spec.source_ref.is_some() {
        return Some("the DataVolume's sourceRef was not resolved".to_owned());
    }
    if spec.content_type.as_deref().is_some_and(|c| c != "kubevirt") {
        return Some("contentType archive is not supported yet".to_owned());
    }
    if !spec.checkpoints.is_empty() || spec.final_checkpoint.is_some() {
        return Some("checkpoints (multi-stage imports) are not supported yet".to_owned());
    }
    let source = spec.source.as_ref()?;
    let kinds = [
        ("s3", source.s3.is_some()),
        ("gcs", source.gcs.is_some()),
        ("snapshot", source.snapshot.is_some()),
        ("imageio", source.imageio.is_some()),
        ("vddk", source.vddk.is_some()),
    ];
    if let Some((kind, _)) = kinds.iter().find(|(_, set)| *set) {
        return Some(format!("the {kind} source is not supported by this CDI yet"));
    }
    if let Some(registry) = &source.registry {
        if registry.pull_method.as_deref() == Some("node") {
            return Some(
                "registry.pullMethod node (the node pulls the image) is not supported by this CDI yet".to_owned(),
            );
        }
        if registry.image_stream.is_some() {
            return Some("registry.imageStream (an OpenShift image stream) is not supported by this CDI".to_owned());
        }
        return match registry.url.as_deref() {
            None => Some("registry.url is not set".to_owned()),
            Some(url) if url.starts_with("oci-archive:") => {
                Some("registry.url: the oci-archive transport is not supported by this CDI yet".to_owned())
            }
            Some(url) if !url.starts_with("docker://") => {
                Some(format!("registry.url {url:?} must start with docker://"))
            }
            // A reference the importer could not read fails here, not in a restarting pod.
            Some(url) => cdi_importer::registry::reference::parse(url)
                .err()
                .map(|e| format!("registry.url: {e}")),
        };
    }
    let http = source.http.as_ref()?;
    if !http.secret_extra_headers.is_empty() {
        return Some("http.secretExtraHeaders is not supported yet".to_owned());
    }
    if http.insecure_skip_verify == Some(true) {
        return Some("http.insecureSkipVerify is not supported yet".to_owned());
    }
    None
}

/// Whether a registry source's host (`host[:port]`, as its URL gives it) is one of CDIConfig's
/// `insecureRegistries` (upstream's exact comparison).
pub(super) fn insecure_registry(source: &ImportSource, insecure_registries: &[String]) -> bool {
    let ImportSource::Registry(_) = source else {
        return false;
    };
    let host = source
        .endpoint()
        .strip_prefix("docker://")
        .and_then(|rest| rest.split(['/', '@']).next())
        .unwrap_or_default();
    !host.is_empty() && insecure_registries.iter().any(|r| r == host)
}
