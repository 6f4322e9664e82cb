//! The VM controller's side of DataVolumes: the templates handled before the run strategy acts
//! (created at once, or at the start with `kubevirt.io/immediate-data-volume-creation: "false"`;
//! orphans adopted on every pass), the decision held back while they fill, what the template's
//! volumes say for the printable status, and which VMs a claim's or DataVolume's change wakes.

use kubevirt_api::v1::{RunStrategy, VirtualMachine};

use super::VmController;
use crate::cluster_api::ControllerApi;
use crate::data_volumes::{plan_templates, template_volume_states};
use crate::printable_status::VolumeStates;
use crate::run_strategy::Action;
use kubevirt_api::clock::Clock;

/// The decision while the VM's DataVolumes hold its VMI back: as upstream returns before the run
/// strategy, nothing is started or stopped and the requests wait; a start shows as expected.
pub(super) fn held_back(decision: crate::run_strategy::Decision) -> crate::run_strategy::Decision {
    crate::run_strategy::Decision {
        action: match decision.action {
            Action::Create { paused } => Action::Create { paused },
            _ => Action::Nothing,
        },
        trim_first_request: false,
        append_start_request: false,
    }
}

/// What the VM's DataVolumes decided for this pass.
#[derive(Debug, Default)]
pub(super) struct VolumesOutcome {
    /// The VMI waits for them.
    pub(super) holds_back: bool,
    /// A DataVolume could not be made: look again.
    pub(super) retry: bool,
    /// Upstream's `FailedCreate` message for the VM's `Failure` condition.
    pub(super) error: Option<String>,
}

impl<A: ControllerApi, K: Clock> VmController<A, K> {
    /// The VMs whose templates or template volumes name any of `changed` (`namespace/name` of
    /// claims or DataVolumes): their status (or their start) may change with it.
    #[must_use]
    pub fn users_of(&self, changed: &[String]) -> Vec<String> {
        if changed.is_empty() {
            return Vec::new();
        }
        self.known().volume_users.users_of(changed)
    }

    /// What the VM's template volumes say for its printable status: a DataVolume in error or
    /// still filling, a claim not bound yet.
    pub(super) fn volume_states(&self, vm: &VirtualMachine) -> VolumeStates {
        let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
        let (data_volume_error, provisioning) =
            template_volume_states(vm, |name| self.data_volumes.get(namespace, name));
        let unbound_claim = vm.spec.template.spec.as_ref().is_some_and(|s| {
            s.volumes
                .iter()
                .filter_map(crate::claims::claim_of)
                .any(|name| self.claims.is_bound(namespace, name) == Some(false))
        });
        VolumeStates {
            data_volume_error,
            provisioning,
            unbound_claim,
        }
    }

    /// Adopts the orphans of the VM's templates, creates their missing DataVolumes (at once,
    /// unless the VM says to wait for its start), and says whether they hold its VMI back.
    pub(super) async fn handle_data_volumes(
        &self,
        vm: &VirtualMachine,
        strategy: RunStrategy,
        decision: &crate::run_strategy::Decision,
    ) -> VolumesOutcome {
        if vm.spec.data_volume_templates.is_empty() {
            return VolumesOutcome::default();
        }
        let immediate = vm
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::vm_data_volumes::IMMEDIATE_CREATION))
            .is_none_or(|v| v != "false");
        let starting = matches!(decision.action, Action::Create { .. });
        let creating = immediate || starting;
        let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
        let plan = plan_templates(vm, |name| self.data_volumes.get(namespace, name));
        let handled = crate::vm_data_volumes::apply_templates(&self.api, vm, &plan, creating).await;
        let holds_back = creating && !handled.ready && (strategy != RunStrategy::Halted || starting);
        VolumesOutcome {
            holds_back,
            retry: handled.error.is_some(),
            error: handled.error,
        }
    }
}

/// The claims and DataVolumes a VM's templates name: its DataVolume templates and its template's
/// claim volumes.
pub(super) fn names_used(vm: &VirtualMachine) -> impl Iterator<Item = &str> {
    let volumes = vm.spec.template_volumes();
    vm.spec
        .data_volume_templates
        .iter()
        .map(crate::data_volumes::template_name)
        .chain(volumes.iter().filter_map(crate::claims::claim_of))
}
