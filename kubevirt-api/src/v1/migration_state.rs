//! Status types about moving a VMI or its volumes: `status.migrationState`, `status.migratedVolumes`
//! and the PVC details they carry, and changed block tracking. virt-handler writes
//! `migrationState` during a live migration; the volume-migration types are here so those statuses
//! parse and survive a round trip.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `status.migrationState`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationState {
    /// When the migration started.
    pub start_timestamp: Option<Time>,
    /// When it ended.
    pub end_timestamp: Option<Time>,
    /// When the target's domain was ready.
    pub target_node_domain_ready_timestamp: Option<Time>,
    /// The target's domain was seen.
    pub target_node_domain_detected: Option<bool>,
    /// Address of the target node's migration proxy.
    pub target_node_address: Option<String>,
    /// Ports of the target node's direct migration proxies.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub target_direct_migration_node_ports: BTreeMap<String, i32>,
    /// Target node.
    pub target_node: Option<String>,
    /// Target launcher pod.
    pub target_pod: Option<String>,
    /// UID of the target's attachment pod.
    #[serde(rename = "targetAttachmentPodUID")]
    pub target_attachment_pod_uid: Option<String>,
    /// Source node.
    pub source_node: Option<String>,
    /// Source launcher pod.
    pub source_pod: Option<String>,
    /// The migration finished.
    pub completed: Option<bool>,
    /// The migration failed.
    pub failed: Option<bool>,
    /// Someone asked to abort it.
    pub abort_requested: Option<bool>,
    /// `Succeeded`, `Failed` or `Aborting`.
    pub abort_status: Option<String>,
    /// Why it failed.
    pub failure_reason: Option<String>,
    /// UID of the VirtualMachineInstanceMigration.
    pub migration_uid: Option<String>,
    /// `PreCopy`, `PostCopy` or `Paused`.
    pub mode: Option<String>,
    /// The MigrationPolicy in effect.
    pub migration_policy_name: Option<String>,
    /// The configuration in effect.
    pub migration_configuration: Option<MigrationConfiguration>,
    /// CPUs of the target pod.
    #[serde(rename = "targetCPUSet", default, skip_serializing_if = "Vec::is_empty")]
    pub target_cpu_set: Vec<i32>,
    /// NUMA topology of the target node.
    pub target_node_topology: Option<String>,
    /// Source PVC of the persistent state (TPM, EFI).
    #[serde(rename = "sourcePersistentStatePVCName")]
    pub source_persistent_state_pvc_name: Option<String>,
    /// Target PVC of the persistent state.
    #[serde(rename = "targetPersistentStatePVCName")]
    pub target_persistent_state_pvc_name: Option<String>,
    /// Source side of a decentralized migration.
    pub source_state: Option<MigrationSourceState>,
    /// Target side of a decentralized migration.
    pub target_state: Option<MigrationTargetState>,
    /// `Pod` or `Migration`.
    pub migration_network_type: Option<String>,
    /// Memory overhead of the target pod.
    pub target_memory_overhead: Option<Quantity>,
}

/// `status.migrationState.migrationConfiguration`: the cluster's migration settings in effect.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationConfiguration {
    /// Taint key that marks a node for draining.
    pub node_drain_taint_key: Option<String>,
    /// Outbound migrations per node at once.
    pub parallel_outbound_migrations_per_node: Option<u32>,
    /// Migrations in the cluster at once.
    pub parallel_migrations_per_cluster: Option<u32>,
    /// Slow the guest down so that the migration converges.
    pub allow_auto_converge: Option<bool>,
    /// Bandwidth per migration per second; 0 is unlimited.
    pub bandwidth_per_migration: Option<Quantity>,
    /// Seconds per GiB before the migration is cancelled.
    #[serde(rename = "completionTimeoutPerGiB")]
    pub completion_timeout_per_gib: Option<i64>,
    /// Longest pause at switchover, in milliseconds.
    pub max_downtime_ms: Option<u64>,
    /// Seconds without progress before the migration is cancelled.
    pub progress_timeout: Option<i64>,
    /// Seconds to wait for utility volumes.
    pub utility_volumes_timeout: Option<i64>,
    /// Migrate even what is unsafe to migrate.
    pub unsafe_migration_override: Option<bool>,
    /// Switch to post-copy when pre-copy does not converge.
    pub allow_post_copy: Option<bool>,
    /// Allow a disruptive migration (paused guest, post-copy).
    pub allow_workload_disruption: Option<bool>,
    /// Migrate without TLS.
    #[serde(rename = "disableTLS")]
    pub disable_tls: Option<bool>,
    /// NetworkAttachmentDefinition of a dedicated migration network.
    pub network: Option<String>,
    /// Keep the SELinux level across the migration.
    #[serde(rename = "matchSELinuxLevelOnMigration")]
    pub match_selinux_level_on_migration: Option<bool>,
    /// Experimental tuning.
    pub experimental: Option<ExperimentalMigrationOptions>,
}

/// `migrationConfiguration.experimental`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentalMigrationOptions {
    /// When a migration counts as stalled.
    pub stall_detector: Option<StallDetector>,
    /// How the allowed downtime grows.
    pub downtime_tuning: Option<DowntimeTuning>,
    /// `none` or `zstd`.
    pub compression: Option<String>,
}

/// `experimental.stallDetector`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StallDetector {
    /// Margin in percent.
    pub stall_margin: Option<i64>,
    /// Smoothing factor.
    pub ewma_alpha: Option<Quantity>,
    /// Seconds without progress.
    pub stall_progress_timeout: Option<i64>,
    /// Seconds allowed for the switchover.
    pub switchover_timeout: Option<i64>,
    /// Factor at which pre-copy is still possible.
    pub precopy_possible_factor: Option<Quantity>,
    /// Decay of the patience window.
    pub patience_window_decay_factor: Option<Quantity>,
    /// Look for local minima of the remaining data.
    pub search_local_minima: Option<bool>,
    /// Factor of the completion timeout.
    pub completion_timeout_factor: Option<Quantity>,
}

/// `experimental.downtimeTuning`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DowntimeTuning {
    /// First allowed downtime in milliseconds.
    pub initial_ms: Option<i64>,
    /// Steps up to the maximum.
    pub steps: Option<i32>,
    /// Iteration after which it grows.
    pub start_after_iteration: Option<i64>,
    /// Seconds between steps.
    pub cooldown_seconds: Option<i32>,
}

/// `migrationState.sourceState`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationSourceState {
    /// Node.
    pub node: Option<String>,
    /// Launcher pod.
    pub pod: Option<String>,
    /// UID of the migration.
    #[serde(rename = "migrationUID")]
    pub migration_uid: Option<String>,
    /// Domain name.
    pub domain_name: Option<String>,
    /// Domain namespace.
    pub domain_namespace: Option<String>,
    /// Address of the synchronisation endpoint.
    pub sync_address: Option<String>,
    /// PVC of the persistent state.
    #[serde(rename = "persistentStatePVCName")]
    pub persistent_state_pvc_name: Option<String>,
    /// SELinux context.
    pub selinux_context: Option<String>,
    /// UID of the VMI.
    #[serde(rename = "virtualMachineInstanceUID")]
    pub virtual_machine_instance_uid: Option<String>,
    /// Node selectors of the source.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selectors: BTreeMap<String, String>,
}

/// `migrationState.targetState`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationTargetState {
    /// Node.
    pub node: Option<String>,
    /// Launcher pod.
    pub pod: Option<String>,
    /// UID of the migration.
    #[serde(rename = "migrationUID")]
    pub migration_uid: Option<String>,
    /// Domain name.
    pub domain_name: Option<String>,
    /// Domain namespace.
    pub domain_namespace: Option<String>,
    /// Address of the synchronisation endpoint.
    pub sync_address: Option<String>,
    /// PVC of the persistent state.
    #[serde(rename = "persistentStatePVCName")]
    pub persistent_state_pvc_name: Option<String>,
    /// SELinux context.
    pub selinux_context: Option<String>,
    /// UID of the VMI.
    #[serde(rename = "virtualMachineInstanceUID")]
    pub virtual_machine_instance_uid: Option<String>,
    /// When the target's domain was ready.
    pub domain_ready_timestamp: Option<Time>,
    /// The target's domain was seen.
    pub domain_detected: Option<bool>,
    /// Address of the target node.
    pub node_address: Option<String>,
    /// Ports of the direct migration proxies.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub direct_migration_node_ports: BTreeMap<String, i32>,
    /// UID of the attachment pod.
    #[serde(rename = "attachmentPodUID")]
    pub attachment_pod_uid: Option<String>,
    /// CPUs of the target pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_set: Vec<i32>,
    /// NUMA topology of the target node.
    pub node_topology: Option<String>,
}

/// What a status says about a PVC (`persistentVolumeClaimInfo`, `sourcePVCInfo`, ...).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimInfo {
    /// Name of the PVC.
    pub claim_name: Option<String>,
    /// Access modes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    /// `Filesystem` or `Block`.
    pub volume_mode: Option<String>,
    /// Capacity.
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// Requests.
    pub requests: Option<BTreeMap<String, Quantity>>,
    /// The image is preallocated.
    pub preallocated: Option<bool>,
    /// File system overhead, a fraction such as `0.055`.
    pub filesystem_overhead: Option<String>,
}

/// One entry of `status.migratedVolumes`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageMigratedVolumeInfo {
    /// Volume name.
    pub volume_name: String,
    /// The PVC it moves from.
    #[serde(rename = "sourcePVCInfo")]
    pub source_pvc_info: Option<PersistentVolumeClaimInfo>,
    /// The PVC it moves to.
    #[serde(rename = "destinationPVCInfo")]
    pub destination_pvc_info: Option<PersistentVolumeClaimInfo>,
}

/// `status.changedBlockTracking` of a VMI or VM.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedBlockTrackingStatus {
    /// State of the tracking.
    #[serde(default)]
    pub state: String,
    /// The backup in progress.
    pub backup_status: Option<BackupStatus>,
}

/// `changedBlockTracking.backupStatus`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// Name of the backup.
    pub backup_name: Option<String>,
    /// When it started.
    pub start_timestamp: Option<Time>,
    /// When it ended.
    pub end_timestamp: Option<Time>,
    /// It finished.
    pub completed: Option<bool>,
    /// It failed.
    pub failed: Option<bool>,
    /// A message about it.
    pub backup_msg: Option<String>,
    /// Its checkpoint.
    pub checkpoint_name: Option<String>,
    /// Volumes in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<BackupVolumeInfo>,
    /// Whether the guest was quiesced.
    pub quiesce_status: Option<String>,
}

/// `backupStatus.volumes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupVolumeInfo {
    /// Volume name.
    pub volume_name: String,
}
