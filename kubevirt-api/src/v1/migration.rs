//! `VirtualMachineInstanceMigration`: a request to move a running VMI to another node, and how far
//! it got.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{MigrationState, VirtualMachineInstanceCondition};

/// `spec` of a `VirtualMachineInstanceMigration`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "VirtualMachineInstanceMigration",
    plural = "virtualmachineinstancemigrations",
    singular = "virtualmachineinstancemigration",
    shortname = "vmim",
    shortname = "vmims",
    category = "all",
    namespaced,
    status = "VirtualMachineInstanceMigrationStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase","description":"The current phase of VM instance migration"}"#,
    printcolumn = r#"{"name":"VMI","type":"string","jsonPath":".spec.vmiName","description":"The name of the VMI to perform the migration on"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceMigrationSpec {
    /// The VMI to migrate, in the migration's namespace.
    pub vmi_name: Option<String>,
    /// Node labels the target node must also have (merged under the VMI's own node selector).
    pub added_node_selector: Option<BTreeMap<String, String>>,
    /// `system-critical`, `user-triggered` or `system-maintenance` (upstream's
    /// `MigrationPriorityQueue` feature). Refused here.
    pub priority: Option<String>,
    /// Decentralized migration: where to send the VMI. Refused here.
    pub send_to: Option<MigrationSendTo>,
    /// Decentralized migration: what to receive. Refused here.
    pub receive: Option<MigrationReceive>,
}

/// `spec.sendTo` (decentralized migration).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MigrationSendTo {
    /// Pairs the two halves of the migration.
    #[serde(rename = "migrationID")]
    pub migration_id: Option<String>,
    /// The receiving cluster's synchronization address.
    #[serde(rename = "connectURL")]
    pub connect_url: Option<String>,
}

/// `spec.receive` (decentralized migration).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MigrationReceive {
    /// Pairs the two halves of the migration.
    #[serde(rename = "migrationID")]
    pub migration_id: Option<String>,
}

/// `status` of a `VirtualMachineInstanceMigration`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceMigrationStatus {
    /// Where the migration is.
    pub phase: Option<MigrationPhase>,
    /// Conditions, e.g. `migrationAbortRequested`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<VirtualMachineInstanceCondition>,
    /// One entry per phase entered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_transition_timestamps: Vec<MigrationPhaseTransition>,
    /// The VMI's migration state, copied once the migration is over.
    pub migration_state: Option<MigrationState>,
}

/// One entry of `status.phaseTransitionTimestamps`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationPhaseTransition {
    /// The phase entered.
    pub phase: Option<MigrationPhase>,
    /// When.
    pub phase_transition_timestamp: Option<Time>,
}

/// `status.phase` of a migration, upstream's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum MigrationPhase {
    /// Just created.
    #[default]
    #[serde(rename = "")]
    Unset,
    /// Accepted; the target pod is not created yet.
    Pending,
    /// The target pod exists and waits for a node.
    Scheduling,
    /// The target pod runs; virt-handler gets the migration.
    Scheduled,
    /// The target node's virt-handler prepares the target launcher.
    PreparingTarget,
    /// The target waits for the source.
    TargetReady,
    /// The guest's memory moves.
    Running,
    /// The guest runs on the target.
    Succeeded,
    /// The guest stays on the source.
    Failed,
}

impl MigrationPhase {
    /// Every phase, for tables and matrix tests.
    pub const ALL: [Self; 9] = [
        Self::Unset,
        Self::Pending,
        Self::Scheduling,
        Self::Scheduled,
        Self::PreparingTarget,
        Self::TargetReady,
        Self::Running,
        Self::Succeeded,
        Self::Failed,
    ];

    /// The string upstream writes.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unset => "",
            Self::Pending => "Pending",
            Self::Scheduling => "Scheduling",
            Self::Scheduled => "Scheduled",
            Self::PreparingTarget => "PreparingTarget",
            Self::TargetReady => "TargetReady",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }

    /// Succeeded and Failed are final.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }

    /// The target pod has been created (upstream's `TargetIsCreated`).
    #[must_use]
    pub fn is_target_created(self) -> bool {
        !matches!(self, Self::Unset | Self::Pending)
    }

    /// virt-handler has the migration (upstream's `TargetIsHandedOff`): the VMI's migration state
    /// names it.
    #[must_use]
    pub fn is_handed_off(self) -> bool {
        !matches!(self, Self::Unset | Self::Pending | Self::Scheduling | Self::Scheduled)
    }

    /// Counts against the parallel-migration limits (upstream's `IsRunning`).
    #[must_use]
    pub fn is_running(self) -> bool {
        !matches!(self, Self::Unset | Self::Pending | Self::Succeeded | Self::Failed)
    }
}

impl fmt::Display for MigrationPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use kube::{CustomResourceExt as _, Resource as _};

    use super::*;

    #[test]
    fn phases_have_upstreams_strings_and_round_trip() {
        let strings: Vec<&str> = MigrationPhase::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            strings,
            [
                "",
                "Pending",
                "Scheduling",
                "Scheduled",
                "PreparingTarget",
                "TargetReady",
                "Running",
                "Succeeded",
                "Failed"
            ]
        );
        for phase in MigrationPhase::ALL {
            let json = serde_json::to_string(&phase).expect("json");
            assert_eq!(json, format!("\"{phase}\""));
            assert_eq!(serde_json::from_str::<MigrationPhase>(&json).expect("parse"), phase);
        }
    }

    #[test]
    fn phase_predicates_follow_upstream() {
        use MigrationPhase::*;
        let final_: Vec<_> = MigrationPhase::ALL.into_iter().filter(|p| p.is_final()).collect();
        assert_eq!(final_, [Succeeded, Failed]);
        let created: Vec<_> = MigrationPhase::ALL
            .into_iter()
            .filter(|p| p.is_target_created())
            .collect();
        assert_eq!(
            created,
            [
                Scheduling,
                Scheduled,
                PreparingTarget,
                TargetReady,
                Running,
                Succeeded,
                Failed
            ]
        );
        let handed_off: Vec<_> = MigrationPhase::ALL.into_iter().filter(|p| p.is_handed_off()).collect();
        assert_eq!(handed_off, [PreparingTarget, TargetReady, Running, Succeeded, Failed]);
        let running: Vec<_> = MigrationPhase::ALL.into_iter().filter(|p| p.is_running()).collect();
        assert_eq!(running, [Scheduling, Scheduled, PreparingTarget, TargetReady, Running]);
    }

    #[test]
    fn the_crd_has_upstreams_names_and_columns() {
        let crd = VirtualMachineInstanceMigration::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("virtualmachineinstancemigrations.kubevirt.io")
        );
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["vmim".to_owned(), "vmims".to_owned()])
        );
        assert_eq!(crd.spec.names.categories, Some(vec!["all".to_owned()]));
        let version = &crd.spec.versions[0];
        let columns: Vec<(String, String)> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.json_path.clone()))
            .collect();
        assert_eq!(
            columns,
            [
                ("Phase".to_owned(), ".status.phase".to_owned()),
                ("VMI".to_owned(), ".spec.vmiName".to_owned())
            ]
        );
        assert!(version.subresources.as_ref().is_some_and(|s| s.status.is_some()));
        assert_eq!(
            VirtualMachineInstanceMigration::kind(&()),
            "VirtualMachineInstanceMigration"
        );
    }

    #[test]
    fn an_upstream_manifest_parses() {
        let yaml = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstanceMigration\n\
                    metadata: {name: migration-job}\nspec: {vmiName: vmi-fedora}\n";
        let migration: VirtualMachineInstanceMigration = serde_saphyr::from_str(yaml).expect("parse");
        assert_eq!(migration.spec.vmi_name.as_deref(), Some("vmi-fedora"));
        assert_eq!(migration.status, None);
    }
}
