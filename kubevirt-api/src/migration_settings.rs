//! The cluster's live-migration settings (`KubeVirt.spec.configuration.migrations`) with
//! upstream's defaults, and the settings kubevirt-rs refuses.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::v1::MigrationConfiguration;

/// Upstream's `ParallelMigrationsPerClusterDefault`.
pub const DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER: u32 = 5;
/// Upstream's `ParallelOutboundMigrationsPerNodeDefault`.
pub const DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE: u32 = 2;
/// Upstream's `MigrationCompletionTimeoutPerGiB`.
pub const DEFAULT_COMPLETION_TIMEOUT_PER_GIB: u64 = 150;
/// Upstream's `MigrationProgressTimeout`.
pub const DEFAULT_PROGRESS_TIMEOUT: u64 = 150;

/// The longest maximum downtime, in milliseconds (upstream's `QEMUMaxMigrationDowntimeMS`).
pub const MAX_DOWNTIME_MS: u64 = 2_000_000;

/// What an unsupported disruption setting's entry ends with.
pub(crate) const PAUSED_MODE: &str = " without allowPostCopy (the guest paused until the migration ends)";
/// The cluster's disruption setting.
pub(crate) const CLUSTER_DISRUPTION_PATH: &str = "spec.configuration.migrations.allowWorkloadDisruption";

/// The settings in effect.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools, reason = "each is one upstream setting")]
pub struct MigrationSettings {
    /// Migrations in the cluster at once.
    pub parallel_migrations_per_cluster: u32,
    /// Outbound migrations per node at once.
    pub parallel_outbound_migrations_per_node: u32,
    /// Bandwidth per migration, MiB/s; 0 is unlimited.
    pub bandwidth_mib_per_second: u64,
    /// Seconds per GiB before a migration is aborted (or switched to post-copy).
    pub completion_timeout_per_gib: u64,
    /// Seconds without progress before a migration is aborted.
    pub progress_timeout: u64,
    /// Throttle the guest's vCPUs so that a migration converges.
    pub allow_auto_converge: bool,
    /// Switch to post-copy when pre-copy runs out of time (when disruption is allowed too).
    pub allow_post_copy: bool,
    /// Disrupt the guest to finish a migration that runs out of time: post-copy, when allowed.
    /// Unset, what `allowPostCopy` says, as upstream's virt-handler reads it.
    pub allow_workload_disruption: bool,
    /// Longest pause of the guest at the switch-over (libvirt's maximum downtime), in
    /// milliseconds; `None` leaves QEMU's default.
    pub max_downtime_ms: Option<u64>,
    /// Plain TCP between the nodes instead of mutual TLS.
    pub disable_tls: bool,
    /// Migrate even what libvirt considers unsafe (disks whose cache mode is not `none`):
    /// libvirt's `VIR_MIGRATE_UNSAFE`, as upstream passes it.
    pub unsafe_migration_override: bool,
    /// Settings that are set but not supported: each field's path. A migration is refused while
    /// any is set.
    pub unsupported: Vec<String>,
}

impl Default for MigrationSettings {
    fn default() -> Self {
        Self::from_configuration(None)
    }
}

/// A bandwidth quantity (per second) in MiB, rounded down; `None` when it is not a quantity.
pub(crate) fn mib(bandwidth: &Quantity) -> Option<u64> {
    let bytes = crate::quantity::to_bytes(bandwidth).ok()?;
    Some(bytes / (1 << 20))
}

impl MigrationSettings {
    /// `migrations` with upstream's defaults.
    #[must_use]
    pub fn from_configuration(migrations: Option<&MigrationConfiguration>) -> Self {
        let m = migrations.cloned().unwrap_or_default();
        let mut unsupported = Vec::new();
        let mut refuse = |set: bool, path: &'static str| {
            if set {
                unsupported.push(path.to_owned());
            }
        };
        refuse(m.network.is_some(), "spec.configuration.migrations.network");
        refuse(
            m.match_selinux_level_on_migration.is_some(),
            "spec.configuration.migrations.matchSELinuxLevelOnMigration",
        );
        refuse(m.experimental.is_some(), "spec.configuration.migrations.experimental");
        // Evictions are turned into migrations by the eviction webhook; the deprecated drain
        // taint is not watched.
        refuse(
            m.node_drain_taint_key.is_some(),
            "spec.configuration.migrations.nodeDrainTaintKey",
        );
        refuse(
            m.utility_volumes_timeout.is_some(),
            "spec.configuration.migrations.utilityVolumesTimeout",
        );
        // Upstream's bounds (its MigrationPolicy schema's); QEMU refuses more.
        refuse(
            m.max_downtime_ms.is_some_and(|ms| !(1..=MAX_DOWNTIME_MS).contains(&ms)),
            "spec.configuration.migrations.maxDowntimeMs (from 1 to 2000000)",
        );
        let bandwidth = m.bandwidth_per_migration.as_ref().map(mib);
        refuse(
            bandwidth.is_some_and(|b| b.is_none()),
            "spec.configuration.migrations.bandwidthPerMigration",
        );
        let seconds = |value: Option<i64>, default: u64| value.map_or(default, |v| u64::try_from(v).unwrap_or(0));
        let allow_post_copy = m.allow_post_copy.unwrap_or(false);
        let mut settings = Self {
            parallel_migrations_per_cluster: m
                .parallel_migrations_per_cluster
                .unwrap_or(DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER),
            parallel_outbound_migrations_per_node: m
                .parallel_outbound_migrations_per_node
                .unwrap_or(DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE),
            bandwidth_mib_per_second: bandwidth.flatten().unwrap_or(0),
            completion_timeout_per_gib: seconds(m.completion_timeout_per_gib, DEFAULT_COMPLETION_TIMEOUT_PER_GIB),
            progress_timeout: seconds(m.progress_timeout, DEFAULT_PROGRESS_TIMEOUT),
            allow_auto_converge: m.allow_auto_converge.unwrap_or(false),
            allow_post_copy,
            allow_workload_disruption: m.allow_workload_disruption.unwrap_or(allow_post_copy),
            max_downtime_ms: m.max_downtime_ms,
            disable_tls: m.disable_tls.unwrap_or(false),
            unsafe_migration_override: m.unsafe_migration_override.unwrap_or(false),
            unsupported,
        };
        settings.check_disruption(CLUSTER_DISRUPTION_PATH);
        settings
    }

    /// Whether a migration out of time switches to post-copy: both allowed.
    #[must_use]
    pub fn post_copy(&self) -> bool {
        self.allow_post_copy && self.allow_workload_disruption
    }

    /// Disruption without post-copy is upstream's `Paused` mode (the guest paused until the
    /// migration ends), which kubevirt-rs does not have: recorded as unsupported under `path`.
    pub(crate) fn check_disruption(&mut self, path: &str) {
        if self.allow_workload_disruption && !self.allow_post_copy {
            self.unsupported.push(format!("{path}{PAUSED_MODE}"));
        }
    }

    /// The configuration as `status.migrationState.migrationConfiguration` records it.
    #[must_use]
    pub fn as_configuration(&self) -> MigrationConfiguration {
        MigrationConfiguration {
            parallel_outbound_migrations_per_node: Some(self.parallel_outbound_migrations_per_node),
            parallel_migrations_per_cluster: Some(self.parallel_migrations_per_cluster),
            allow_auto_converge: Some(self.allow_auto_converge),
            bandwidth_per_migration: Some(Quantity(format!("{}Mi", self.bandwidth_mib_per_second))),
            completion_timeout_per_gib: i64::try_from(self.completion_timeout_per_gib).ok(),
            progress_timeout: i64::try_from(self.progress_timeout).ok(),
            allow_post_copy: Some(self.allow_post_copy),
            allow_workload_disruption: Some(self.allow_workload_disruption),
            max_downtime_ms: self.max_downtime_ms,
            disable_tls: Some(self.disable_tls),
            unsafe_migration_override: Some(self.unsafe_migration_override),
            ..MigrationConfiguration::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_set_is_upstreams_defaults() {
        let settings = MigrationSettings::default();
        assert_eq!(settings.parallel_migrations_per_cluster, 5);
        assert_eq!(settings.parallel_outbound_migrations_per_node, 2);
        assert_eq!(settings.bandwidth_mib_per_second, 0);
        assert_eq!(settings.completion_timeout_per_gib, 150);
        assert_eq!(settings.progress_timeout, 150);
        assert!(!settings.allow_auto_converge && !settings.allow_post_copy && !settings.disable_tls);
        assert!(!settings.unsafe_migration_override);
        assert!(settings.unsupported.is_empty());
    }

    #[test]
    fn every_supported_setting_is_read() {
        let config: MigrationConfiguration = serde_json::from_value(serde_json::json!({
            "bandwidthPerMigration": "64Mi", "completionTimeoutPerGiB": 800, "progressTimeout": 20,
            "parallelMigrationsPerCluster": 9, "parallelOutboundMigrationsPerNode": 3,
            "allowAutoConverge": true, "allowPostCopy": true, "disableTLS": true,
            "unsafeMigrationOverride": true, "maxDowntimeMs": 300
        }))
        .expect("configuration");
        let settings = MigrationSettings::from_configuration(Some(&config));
        assert_eq!(
            settings,
            MigrationSettings {
                parallel_migrations_per_cluster: 9,
                parallel_outbound_migrations_per_node: 3,
                bandwidth_mib_per_second: 64,
                completion_timeout_per_gib: 800,
                progress_timeout: 20,
                allow_auto_converge: true,
                allow_post_copy: true,
                allow_workload_disruption: true,
                max_downtime_ms: Some(300),
                disable_tls: true,
                unsafe_migration_override: true,
                unsupported: Vec::new(),
            }
        );
        assert!(
            settings.post_copy(),
            "post-copy allowed, disruption unset: as post-copy says"
        );
        assert_eq!(
            MigrationSettings::from_configuration(Some(&settings.as_configuration())),
            settings,
            "what the status records reads back"
        );
    }

    #[test]
    fn unsupported_settings_are_named() {
        let config: MigrationConfiguration = serde_json::from_value(serde_json::json!({
            "network": "migration-net", "allowWorkloadDisruption": true, "bandwidthPerMigration": "fast",
            "nodeDrainTaintKey": "example.com/drain", "maxDowntimeMs": 2_000_001
        }))
        .expect("configuration");
        assert_eq!(
            MigrationSettings::from_configuration(Some(&config)).unsupported,
            [
                "spec.configuration.migrations.network",
                "spec.configuration.migrations.nodeDrainTaintKey",
                "spec.configuration.migrations.maxDowntimeMs (from 1 to 2000000)",
                "spec.configuration.migrations.bandwidthPerMigration",
                "spec.configuration.migrations.allowWorkloadDisruption without allowPostCopy (the guest paused until the migration ends)"
            ]
        );
    }

    #[test]
    fn post_copy_needs_disruption_allowed() {
        let read = |json: serde_json::Value| {
            let config: MigrationConfiguration = serde_json::from_value(json).expect("configuration");
            MigrationSettings::from_configuration(Some(&config))
        };
        let matrix = [
            (serde_json::json!({}), false),
            (serde_json::json!({"allowPostCopy": true}), true),
            (
                serde_json::json!({"allowPostCopy": true, "allowWorkloadDisruption": true}),
                true,
            ),
            (
                serde_json::json!({"allowPostCopy": true, "allowWorkloadDisruption": false}),
                false,
            ),
            (
                serde_json::json!({"allowPostCopy": false, "allowWorkloadDisruption": false}),
                false,
            ),
        ];
        for (json, post_copy) in matrix {
            let settings = read(json.clone());
            assert_eq!(settings.post_copy(), post_copy, "{json}");
            assert!(settings.unsupported.is_empty(), "{json}");
        }
    }
}
