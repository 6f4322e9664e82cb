//! Label, annotation, finalizer and condition names that upstream KubeVirt defines and that other
//! tools (kubectl users, dashboards, upstream virtctl) rely on. Values are upstream's, letter for
//! letter.

/// `terminationGracePeriodSeconds` when unset (`v1.DefaultGracePeriodSeconds`).
pub const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// The uid (and gid) an unprivileged launcher pod runs as: upstream's `qemu` user.
pub const NON_ROOT_UID: u32 = 107;

/// The feature gate that keeps launcher pods running as root, as before upstream v0.59.
pub const ROOT_FEATURE_GATE: &str = "Root";

/// Labels.
pub mod labels {
    /// `kubevirt.io`: the component an object belongs to, e.g. `virt-launcher`.
    pub const APP: &str = "kubevirt.io";
    /// Value of [`APP`] on launcher pods.
    pub const APP_VIRT_LAUNCHER: &str = "virt-launcher";
    /// UID of the VMI that created a launcher pod.
    pub const CREATED_BY: &str = "kubevirt.io/created-by";
    /// Node a VMI was scheduled to.
    pub const NODE_NAME: &str = "kubevirt.io/nodeName";
    /// On nodes: whether virt-handler runs and VMIs may be scheduled there.
    pub const NODE_SCHEDULABLE: &str = "kubevirt.io/schedulable";
    /// Name of the VM that owns a VMI or launcher pod.
    pub const VM_NAME: &str = "vm.kubevirt.io/name";
    /// On VMIs (empty value): their launcher image differs from the installed one.
    pub const OUTDATED_LAUNCHER_IMAGE: &str = "kubevirt.io/outdatedLauncherImage";
    /// On launcher pods: the VMI's migration job, if any.
    pub const MIGRATION_JOB_UID: &str = "kubevirt.io/migrationJobUID";
    /// On migrations: the VMI they move.
    pub const MIGRATION_VMI_NAME: &str = "kubevirt.io/vmi-name";
    /// On VMIs: the node a migration moves them to, set at the hand-off.
    pub const MIGRATION_TARGET_NODE_NAME: &str = "kubevirt.io/migrationTargetNodeName";
    /// On nodes: the kubelet's CPU manager pins exclusive CPUs (static policy).
    pub const CPU_MANAGER: &str = "cpumanager";
    /// On nodes: realtime VMIs may run here.
    pub const REALTIME: &str = "kubevirt.io/realtime";
}

/// Annotations.
pub mod annotations {
    /// On launcher pods: the VMI name, so logs can be matched to the domain.
    pub const DOMAIN: &str = "kubevirt.io/domain";
    /// On a VMI's temporary pod, which only makes its claims that wait for their first consumer
    /// bind (upstream's `EphemeralProvisioningObject`).
    pub const EPHEMERAL_PROVISIONING: &str = "kubevirt.io/ephemeral-provisioning";
    /// On VMIs created by a VM: the VM generation they were created from.
    pub const VM_GENERATION: &str = "kubevirt.io/vm-generation";
    /// On nodes: the last heartbeat of virt-handler.
    pub const HEARTBEAT: &str = "kubevirt.io/heartbeat";
    /// Opt out of memfd memory backing: `"false"`.
    pub const MEMFD: &str = "kubevirt.io/memfd";
    /// On VMIs (copied from the KubeVirt CR under the AlignCPUs gate): give an isolated emulator
    /// thread a second CPU when the vCPU count is even, so the pod asks for an even number of
    /// CPUs (whole SMT cores). Only its presence counts.
    pub const EMULATOR_THREAD_COMPLETE_TO_EVEN_PARITY: &str = "alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity";
    /// On the KubeVirt CR: EFI guests on x86 get a VGA display instead of bochs. Only its presence
    /// counts.
    pub const VGA_DISPLAY_FOR_EFI_GUESTS: &str = "kubevirt.io/vga-display-efi-x86";
    /// Remove the 64-bit PCI hole: `"true"`.
    pub const DISABLE_PCI_HOLE64: &str = "kubevirt.io/disablePCIHole64";
    /// Ignition config passed to the guest through fw_cfg.
    pub const IGNITION: &str = "kubevirt.io/ignitiondata";
    /// The API version a component last observed.
    pub const LATEST_OBSERVED_API_VERSION: &str = "kubevirt.io/latest-observed-api-version";
    /// The API version the object is stored as.
    pub const STORAGE_OBSERVED_API_VERSION: &str = "kubevirt.io/storage-observed-api-version";
    /// On migration target pods: the migration's name.
    pub const MIGRATION_JOB_NAME: &str = "kubevirt.io/migrationJobName";
    /// On migrations the evacuation controller creates: the node being evacuated.
    pub const EVACUATION_MIGRATION: &str = "kubevirt.io/evacuationMigration";
    /// On migrations virt-controller's workload updater creates (empty value).
    pub const WORKLOAD_UPDATE_MIGRATION: &str = "kubevirt.io/workloadUpdateMigration";
    /// On launcher pods: the container `kubectl logs` and `exec` pick.
    pub const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";
    /// kubevirt-rs only, on the `KubeVirt` resource: `"true"` makes every launcher emulate (TCG)
    /// even where `/dev/kvm` exists, for nodes whose `/dev/kvm` cannot run guests (nested
    /// virtualization). Upstream's `useEmulation` only falls back where `/dev/kvm` is missing.
    pub const FORCE_EMULATION: &str = "kubevirt-rs.io/force-emulation";
}

/// Finalizers.
pub mod finalizers {
    /// On VMIs: removed by virt-controller once the VMI is final and its pods are gone.
    pub const VMI_FOREGROUND_DELETE: &str = "foregroundDeleteVirtualMachine";
    /// On VMs: removed by the VM controller once the VMI is gone.
    pub const VM_CONTROLLER: &str = "kubevirt.io/virtualMachineControllerFinalize";
    /// On migrations: removed by the migration controller once the migration is final.
    pub const MIGRATION: &str = "kubevirt.io/migrationJobFinalize";
}

/// Condition types.
pub mod conditions {
    /// The guest is up and passed its readiness probe.
    pub const READY: &str = "Ready";
    /// The guest is paused.
    pub const PAUSED: &str = "Paused";
    /// The guest agent is connected.
    pub const AGENT_CONNECTED: &str = "AgentConnected";
    /// Access credentials reached the guest through its agent.
    pub const ACCESS_CREDENTIALS_SYNCHRONIZED: &str = "AccessCredentialsSynchronized";
    /// The VMI can be live-migrated.
    pub const LIVE_MIGRATABLE: &str = "LiveMigratable";
    /// On migrations: the user asked to cancel it.
    pub const MIGRATION_ABORT_REQUESTED: &str = "migrationAbortRequested";
    /// On VMs: the VMI failed to start.
    pub const FAILURE: &str = "Failure";
    /// Status value `True`.
    pub const TRUE: &str = "True";
    /// Status value `False`.
    pub const FALSE: &str = "False";
    /// Status value `Unknown`.
    pub const UNKNOWN: &str = "Unknown";
}
