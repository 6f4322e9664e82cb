//! A VM's `status.printableStatus` (upstream's `setPrintableStatus`, first match wins) and its
//! crash-loop backoff (upstream's `calculateStartBackoffTime`). Pure.

use std::time::Duration;

use kubevirt_api::v1::{RunStrategy, VirtualMachineInstancePhase as Phase};

/// What the printable status is computed from.
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent observations, as upstream checks them"
)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusInputs {
    /// The VM has a deletion timestamp.
    pub vm_deleting: bool,
    /// The VMI's phase, if a VMI exists.
    pub vmi_phase: Option<Phase>,
    /// The VMI has a deletion timestamp, or the controller expects to delete it.
    pub vmi_stopping: bool,
    /// The VMI has `Paused=True`.
    pub vmi_paused: bool,
    /// The VMI's `Synchronized=False` reason, if any.
    pub sync_failure_reason: Option<String>,
    /// The VMI's `PodScheduled=False` reason, if any.
    pub pod_scheduled_false_reason: Option<String>,
    /// The controller expects to create a VMI.
    pub creation_expected: bool,
    /// `status.startFailure.consecutiveFailCount`.
    pub consecutive_fail_count: u32,
    /// The run strategy.
    pub strategy: Option<RunStrategy>,
    /// What the VM's volumes say.
    pub volumes: VolumeStates,
}

/// What a VM's volumes say for its printable status (upstream's `HasDataVolumeErrors`,
/// `HasDataVolumeProvisioning` and `HasUnboundPVC`).
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent observations, as upstream checks them"
)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VolumeStates {
    /// A template volume's DataVolume failed, or its pod fails.
    pub data_volume_error: bool,
    /// A template volume's DataVolume is still being filled.
    pub provisioning: bool,
    /// A claim a template volume names is there but not bound.
    pub unbound_claim: bool,
}

/// The printable status.
#[must_use]
pub fn printable_status(inputs: &StatusInputs) -> &'static str {
    let phase = inputs.vmi_phase;
    let is_final = phase.is_some_and(Phase::is_final);
    let sync = inputs.sync_failure_reason.as_deref();
    if inputs.vm_deleting {
        return "Terminating";
    }
    if phase.is_some() && !is_final && inputs.vmi_stopping {
        return "Stopping";
    }
    if phase == Some(Phase::Running) {
        return if inputs.vmi_paused { "Paused" } else { "Running" };
    }
    if sync == Some("FailedPvcNotFound") {
        return "ErrorPvcNotFound";
    }
    if inputs.volumes.data_volume_error {
        return "DataVolumeError";
    }
    if inputs.pod_scheduled_false_reason.as_deref() == Some("Unschedulable") {
        return "ErrorUnschedulable";
    }
    if inputs.volumes.provisioning {
        return "Provisioning";
    }
    let set_to_start = inputs.creation_expected || phase.is_some_and(|p| !p.is_final());
    if set_to_start && inputs.volumes.unbound_claim {
        return "WaitingForVolumeBinding";
    }
    if let Some(reason @ ("ErrImagePull" | "ImagePullBackOff")) = sync {
        return if reason == "ErrImagePull" {
            "ErrImagePull"
        } else {
            "ImagePullBackOff"
        };
    }
    if (phase.is_none() && inputs.creation_expected)
        || matches!(
            phase,
            Some(Phase::Unset | Phase::Pending | Phase::Scheduling | Phase::Scheduled)
        )
    {
        return "Starting";
    }
    let restarting_strategy = matches!(
        inputs.strategy,
        Some(RunStrategy::Always | RunStrategy::RerunOnFailure | RunStrategy::Once)
    );
    if (phase.is_none() || is_final)
        && !inputs.creation_expected
        && inputs.consecutive_fail_count > 0
        && restarting_strategy
    {
        return "CrashLoopBackOff";
    }
    if is_final || (phase.is_none() && !inputs.creation_expected) {
        return "Stopped";
    }
    "Unknown"
}

/// Upstream's cap on the crash-loop delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The delay before the next start after `failures` consecutive failed starts: 10 s × n², plus
/// up to half again (from `jitter` in 0..1), capped at 300 s.
#[must_use]
pub fn crash_loop_backoff(failures: u32, jitter: f64) -> Duration {
    let interval = 10_u64.max(MAX_BACKOFF.as_secs() / 30);
    let base = Duration::from_secs(interval.saturating_mul(u64::from(failures).saturating_pow(2))).min(MAX_BACKOFF);
    let spread = base.mul_f64(jitter.clamp(0.0, 1.0) / 2.0);
    (base + spread).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(change: impl FnOnce(&mut StatusInputs)) -> &'static str {
        let mut inputs = StatusInputs::default();
        change(&mut inputs);
        printable_status(&inputs)
    }

    #[test]
    fn the_first_matching_rule_wins() {
        assert_eq!(with(|_| {}), "Stopped", "no VMI and none expected");
        assert_eq!(with(|i| i.creation_expected = true), "Starting");
        assert_eq!(
            with(|i| {
                i.vm_deleting = true;
                i.vmi_phase = Some(Phase::Running);
            }),
            "Terminating"
        );
        assert_eq!(
            with(|i| {
                i.vmi_phase = Some(Phase::Running);
                i.vmi_stopping = true;
            }),
            "Stopping"
        );
        assert_eq!(
            with(|i| {
                i.vmi_phase = Some(Phase::Running);
                i.vmi_paused = true;
            }),
            "Paused"
        );
        assert_eq!(with(|i| i.vmi_phase = Some(Phase::Running)), "Running");
        assert_eq!(
            with(|i| {
                i.vmi_phase = Some(Phase::Scheduling);
                i.pod_scheduled_false_reason = Some("Unschedulable".to_owned());
            }),
            "ErrorUnschedulable"
        );
        assert_eq!(
            with(|i| {
                i.vmi_phase = Some(Phase::Scheduling);
                i.sync_failure_reason = Some("ImagePullBackOff".to_owned());
            }),
            "ImagePullBackOff"
        );
        assert_eq!(with(|i| i.vmi_phase = Some(Phase::Scheduled)), "Starting");
        assert_eq!(
            with(|i| {
                i.vmi_phase = Some(Phase::Failed);
                i.consecutive_fail_count = 2;
                i.strategy = Some(RunStrategy::Always);
            }),
            "CrashLoopBackOff"
        );
        assert_eq!(
            with(|i| {
                i.vmi_phase = Some(Phase::Failed);
                i.consecutive_fail_count = 2;
                i.strategy = Some(RunStrategy::Manual);
            }),
            "Stopped",
            "Manual VMs do not crash-loop"
        );
        assert_eq!(with(|i| i.vmi_phase = Some(Phase::Succeeded)), "Stopped");
    }

    #[test]
    fn the_backoff_grows_quadratically_with_jitter_and_stops_at_300_s() {
        assert_eq!(crash_loop_backoff(1, 0.0), Duration::from_secs(10));
        assert_eq!(crash_loop_backoff(1, 1.0), Duration::from_secs(15));
        assert_eq!(crash_loop_backoff(2, 0.0), Duration::from_secs(40));
        assert_eq!(crash_loop_backoff(3, 1.0), Duration::from_secs(135));
        assert_eq!(crash_loop_backoff(4, 0.5), Duration::from_secs(200));
        assert_eq!(crash_loop_backoff(6, 0.0), MAX_BACKOFF);
        assert_eq!(crash_loop_backoff(u32::MAX, 1.0), MAX_BACKOFF);
    }
}
