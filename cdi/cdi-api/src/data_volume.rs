//! `DataVolume` (`dv`, `dvs`): a PersistentVolumeClaim and where its data comes from, with
//! upstream CDI's fields, phases, conditions and printer columns.

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaimSpec, TypedLocalObjectReference, TypedObjectReference, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec` of a `DataVolume`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "DataVolume",
    plural = "datavolumes",
    singular = "datavolume",
    shortname = "dv",
    shortname = "dvs",
    category = "all",
    namespaced,
    status = "DataVolumeStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase","description":"The phase the data volume is in"}"#,
    printcolumn = r#"{"name":"Progress","type":"string","jsonPath":".status.progress","description":"Transfer progress in percentage if known, N/A otherwise"}"#,
    printcolumn = r#"{"name":"Restarts","type":"integer","jsonPath":".status.restartCount","description":"The number of times the transfer has been restarted."}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSpec {
    /// Where the data comes from.
    pub source: Option<DataVolumeSource>,
    /// An indirect source: a `DataSource`.
    pub source_ref: Option<DataVolumeSourceRef>,
    /// The claim's spec, as given (CDI adds nothing).
    pub pvc: Option<PersistentVolumeClaimSpec>,
    /// The claim's spec, completed from the StorageProfile (access and volume modes) and with the
    /// size inflated by the filesystem overhead.
    pub storage: Option<StorageSpec>,
    /// The priority class of the importer, cloner and upload pods.
    pub priority_class_name: Option<String>,
    /// The service account of the importer and upload pods.
    pub service_account_name: Option<String>,
    /// `kubevirt` (a disk image, the default) or `archive` (a tar to extract).
    #[schemars(extend("enum" = ["kubevirt", "archive"]))]
    pub content_type: Option<String>,
    /// The stages of a multistage (warm) import.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<DataVolumeCheckpoint>,
    /// Whether the current checkpoint is the last.
    pub final_checkpoint: Option<bool>,
    /// Allocate the claim's storage in advance.
    pub preallocation: Option<bool>,
}

/// `spec.storage`: a claim's spec that CDI completes.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// Access modes; from the StorageProfile when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    /// Volumes to consider for binding.
    pub selector: Option<LabelSelector>,
    /// The size asked for.
    pub resources: Option<VolumeResourceRequirements>,
    /// A PersistentVolume to bind to.
    pub volume_name: Option<String>,
    /// The StorageClass; the default class when unset.
    pub storage_class_name: Option<String>,
    /// `Filesystem`, `Block` or `FromStorageProfile`; from the StorageProfile when unset.
    pub volume_mode: Option<String>,
    /// What to populate the volume from (a snapshot or a claim).
    pub data_source: Option<TypedLocalObjectReference>,
    /// What to populate the volume from (any populator).
    pub data_source_ref: Option<TypedObjectReference>,
}

/// The volume mode that asks for the StorageProfile's.
pub const VOLUME_MODE_FROM_STORAGE_PROFILE: &str = "FromStorageProfile";

/// One stage of a warm import.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeCheckpoint {
    /// The previous checkpoint's snapshot.
    pub previous: String,
    /// This checkpoint's snapshot.
    pub current: String,
}

/// `spec.source`: exactly one kind.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSource {
    /// An HTTP(S) URL.
    pub http: Option<DataVolumeSourceHttp>,
    /// An S3 bucket.
    pub s3: Option<DataVolumeSourceS3>,
    /// A Google Cloud Storage object.
    pub gcs: Option<DataVolumeSourceGcs>,
    /// A container image's disk.
    pub registry: Option<DataVolumeSourceRegistry>,
    /// A claim to clone.
    pub pvc: Option<NamespacedName>,
    /// An upload through the upload proxy.
    pub upload: Option<Empty>,
    /// An empty raw disk.
    pub blank: Option<Empty>,
    /// An oVirt disk.
    pub imageio: Option<DataVolumeSourceImageIo>,
    /// A VMware disk.
    pub vddk: Option<DataVolumeSourceVddk>,
    /// A VolumeSnapshot to restore.
    pub snapshot: Option<NamespacedName>,
}

/// A source kind without fields (`blank: {}`, `upload: {}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Empty {}

/// A namespaced object: a claim, a snapshot or a DataSource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedName {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// `source.http`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceHttp {
    /// The URL.
    pub url: String,
    /// A Secret with `accessKeyId` (user) and `secretKey` (password) for basic auth.
    pub secret_ref: Option<String>,
    /// A ConfigMap with the CA to trust.
    pub cert_config_map: Option<String>,
    /// Extra headers, `Name: value`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_headers: Vec<String>,
    /// Secrets, each with an extra header.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_extra_headers: Vec<String>,
    /// The expected checksum, `algorithm:hash`.
    pub checksum: Option<String>,
    /// Skip the server's certificate verification.
    pub insecure_skip_verify: Option<bool>,
}

/// `source.s3`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceS3 {
    /// The URL.
    pub url: String,
    /// The credentials' Secret.
    pub secret_ref: Option<String>,
    /// A ConfigMap with the CA to trust.
    pub cert_config_map: Option<String>,
}

/// `source.gcs`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceGcs {
    /// The URL.
    pub url: String,
    /// The credentials' Secret.
    pub secret_ref: Option<String>,
}

/// `source.registry`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceRegistry {
    /// `docker://IMAGE` or `oci-archive://FILE`.
    pub url: Option<String>,
    /// An OpenShift image stream.
    pub image_stream: Option<String>,
    /// `pod` (the importer pulls) or `node` (the node's runtime pulls).
    #[schemars(extend("enum" = ["pod", "node"]))]
    pub pull_method: Option<String>,
    /// The registry credentials' Secret.
    pub secret_ref: Option<String>,
    /// A ConfigMap with the registry's CA.
    pub cert_config_map: Option<String>,
    /// Which platform's image.
    pub platform: Option<PlatformOptions>,
}

/// `source.registry.platform`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlatformOptions {
    /// The CPU architecture.
    pub architecture: Option<String>,
}

/// `source.imageio`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceImageIo {
    /// The oVirt engine's URL.
    pub url: String,
    /// The disk's ID.
    pub disk_id: String,
    /// The credentials' Secret.
    pub secret_ref: Option<String>,
    /// A ConfigMap with the CA.
    pub cert_config_map: Option<String>,
    /// Skip the certificate verification.
    pub insecure_skip_verify: Option<bool>,
}

/// `source.vddk`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceVddk {
    /// The vCenter or ESXi URL.
    pub url: Option<String>,
    /// The VM's UUID.
    pub uuid: Option<String>,
    /// The disk's backing file.
    pub backing_file: Option<String>,
    /// The host certificate's thumbprint.
    pub thumbprint: Option<String>,
    /// The credentials' Secret.
    pub secret_ref: Option<String>,
    /// A ConfigMap with the CA.
    pub cert_config_map: Option<String>,
    /// An image with the VDDK library.
    #[serde(rename = "initImageURL")]
    pub init_image_url: Option<String>,
    /// A ConfigMap with extra VDDK arguments.
    pub extra_args: Option<String>,
}

/// `spec.sourceRef`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSourceRef {
    /// `DataSource`, the only kind.
    pub kind: String,
    /// Its namespace; the DataVolume's when unset.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// The one kind a `sourceRef` may name.
pub const SOURCE_REF_DATA_SOURCE: &str = "DataSource";

/// `status` of a `DataVolume`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeStatus {
    /// The claim behind the DataVolume.
    pub claim_name: Option<String>,
    /// Where the DataVolume is.
    #[serde(default, skip_serializing_if = "DataVolumePhase::is_unset")]
    #[schemars(with = "Option<String>")]
    pub phase: DataVolumePhase,
    /// The transfer's progress, `NN.NN%`, or `N/A`.
    pub progress: Option<String>,
    /// How many times the pod filling the claim restarted.
    pub restart_count: Option<i32>,
    /// `Bound`, `Ready` and `Running`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DataVolumeCondition>,
}

/// One condition of a `DataVolume`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeCondition {
    /// `Bound`, `Ready` or `Running`.
    #[serde(rename = "type")]
    pub condition_type: String,
    /// Status, reason and times.
    #[serde(flatten)]
    pub state: ConditionState,
}

/// A condition's status, reason, message and times (upstream's `ConditionState`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConditionState {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the status last changed.
    pub last_transition_time: Option<Time>,
    /// When the condition was last looked at.
    pub last_heartbeat_time: Option<Time>,
    /// Why, as a word.
    pub reason: Option<String>,
    /// Why, as a sentence.
    pub message: Option<String>,
}

impl ConditionState {
    /// Sets the state, stamping the transition time when the status changes and the heartbeat
    /// when only the reason or message does (upstream's `updateConditionState`).
    pub fn update(&mut self, status: &str, message: &str, reason: &str, now: &Time) {
        let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        if self.status != status {
            self.last_transition_time = Some(now.clone());
            self.last_heartbeat_time = Some(now.clone());
            self.message = text(message);
            self.reason = text(reason);
        } else if self.message.as_deref().unwrap_or_default() != message
            || self.reason.as_deref().unwrap_or_default() != reason
        {
            self.message = text(message);
            self.reason = text(reason);
            self.last_heartbeat_time = Some(now.clone());
        }
        status.clone_into(&mut self.status);
    }
}

/// The condition types.
pub mod conditions {
    /// The DataVolume's data is there to use.
    pub const READY: &str = "Ready";
    /// Its claim is bound.
    pub const BOUND: &str = "Bound";
    /// The pod filling the claim runs.
    pub const RUNNING: &str = "Running";
}

/// `status.phase`, upstream's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataVolumePhase {
    /// No phase yet.
    #[default]
    #[serde(rename = "")]
    Unset,
    /// Waiting for the claim or the pod.
    Pending,
    /// The claim is bound.
    #[serde(rename = "PVCBound")]
    PvcBound,
    /// The importer pod is created.
    ImportScheduled,
    /// The importer runs.
    ImportInProgress,
    /// The clone is scheduled.
    CloneScheduled,
    /// The clone runs.
    CloneInProgress,
    /// A snapshot for a smart clone is being taken.
    SnapshotForSmartCloneInProgress,
    /// A clone from a snapshot runs.
    CloneFromSnapshotSourceInProgress,
    /// A smart clone's claim is being made.
    #[serde(rename = "SmartClonePVCInProgress")]
    SmartClonePvcInProgress,
    /// A CSI clone runs.
    #[serde(rename = "CSICloneInProgress")]
    CsiCloneInProgress,
    /// The claim is being expanded.
    ExpansionInProgress,
    /// The claim is moving between namespaces.
    NamespaceTransferInProgress,
    /// The upload server pod is created.
    UploadScheduled,
    /// The upload server takes uploads.
    UploadReady,
    /// The claim waits for a pod to use it before it binds.
    WaitForFirstConsumer,
    /// A populator will fill the claim once it is bound.
    PendingPopulation,
    /// The data is there.
    Succeeded,
    /// It failed.
    Failed,
    /// Unknown.
    Unknown,
    /// A multistage import waits for its next checkpoint.
    Paused,
    /// The prime claim is being prepared.
    PrepClaimInProgress,
    /// The prime claim's volume is being rebound to the target claim.
    RebindInProgress,
}

impl DataVolumePhase {
    /// The phase as the API writes it (`""` when unset).
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Unset => "",
            Self::Pending => "Pending",
            Self::PvcBound => "PVCBound",
            Self::ImportScheduled => "ImportScheduled",
            Self::ImportInProgress => "ImportInProgress",
            Self::CloneScheduled => "CloneScheduled",
            Self::CloneInProgress => "CloneInProgress",
            Self::SnapshotForSmartCloneInProgress => "SnapshotForSmartCloneInProgress",
            Self::CloneFromSnapshotSourceInProgress => "CloneFromSnapshotSourceInProgress",
            Self::SmartClonePvcInProgress => "SmartClonePVCInProgress",
            Self::CsiCloneInProgress => "CSICloneInProgress",
            Self::ExpansionInProgress => "ExpansionInProgress",
            Self::NamespaceTransferInProgress => "NamespaceTransferInProgress",
            Self::UploadScheduled => "UploadScheduled",
            Self::UploadReady => "UploadReady",
            Self::WaitForFirstConsumer => "WaitForFirstConsumer",
            Self::PendingPopulation => "PendingPopulation",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
            Self::Paused => "Paused",
            Self::PrepClaimInProgress => "PrepClaimInProgress",
            Self::RebindInProgress => "RebindInProgress",
        }
    }

    /// No phase yet.
    #[must_use]
    pub fn is_unset(&self) -> bool {
        *self == Self::Unset
    }
}

#[cfg(test)]
mod tests {
    use super::DataVolumePhase;

    #[test]
    fn each_phase_is_written_as_serde_writes_it() {
        use DataVolumePhase::*;
        for phase in [
            Unset,
            Pending,
            PvcBound,
            ImportScheduled,
            ImportInProgress,
            CloneScheduled,
            CloneInProgress,
            SnapshotForSmartCloneInProgress,
            CloneFromSnapshotSourceInProgress,
            SmartClonePvcInProgress,
            CsiCloneInProgress,
            ExpansionInProgress,
            NamespaceTransferInProgress,
            UploadScheduled,
            UploadReady,
            WaitForFirstConsumer,
            PendingPopulation,
            Succeeded,
            Failed,
            Unknown,
            Paused,
            PrepClaimInProgress,
            RebindInProgress,
        ] {
            assert_eq!(
                serde_json::to_value(phase).ok(),
                Some(serde_json::json!(phase.as_str())),
                "{phase:?}"
            );
        }
    }
}
