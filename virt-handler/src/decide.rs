//! What virt-handler does for one VMI on its node: a pure decision from the VMI and the domain
//! its launcher reports (upstream's `defaultExecute` in `pkg/virt-handler/vm.go`).
//!
//! Priority, as upstream: shutdown > delete > cleanup > update. Migration-specific actions
//! (force-ignore, irrecoverable post-copy destroy) are not modelled yet.
//!
//! Upstream's launcher, on SIGTERM, only marks its domain for a graceful shutdown and the handler
//! then stops it. Ours stops its guest itself (ACPI for the grace period, then kill; see the
//! launcher's `cluster::serve`), so the table has no "marked for graceful shutdown" column: a
//! domain whose pod is deleted simply goes Shutoff and the VMI follows on Update.

use kubevirt_api::domain_state::DomainState;
use kubevirt_api::v1::VirtualMachineInstancePhase;

/// The VMI as the handler's cache sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmiView {
    /// Gone from the API (or never seen).
    Missing,
    /// Present.
    Present {
        /// Its phase.
        phase: VirtualMachineInstancePhase,
        /// It has a deletion timestamp.
        is_deleting: bool,
    },
}

/// The domain as the launcher reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DomainView {
    /// No domain (or no launcher).
    Missing,
    /// A domain.
    Present {
        /// Its state.
        state: DomainState,
    },
}

impl DomainView {
    /// Upstream's `domainAlive`: exists and is neither off, crashed nor stateless.
    #[must_use]
    pub fn is_alive(self) -> bool {
        match self {
            Self::Missing => false,
            Self::Present { state, .. } => match state {
                DomainState::Shutoff | DomainState::Crashed | DomainState::NoState => false,
                DomainState::Running
                | DomainState::Blocked
                | DomainState::Paused
                | DomainState::ShuttingDown
                | DomainState::PmSuspended => true,
            },
        }
    }
}

/// The handler's action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Stop the guest gracefully (ACPI, then kill after the grace period).
    Shutdown,
    /// Undefine the dead domain.
    Delete,
    /// Release what the handler holds for the VMI (launcher client, local data).
    Cleanup,
    /// Sync the VMI to the launcher (define and start if needed) and update its status.
    Update,
}

/// Decides the action for one VMI.
#[must_use]
pub fn decide(vmi: VmiView, domain: DomainView) -> Action {
    let alive = domain.is_alive();
    let exists = domain != DomainView::Missing;
    let is_going_away = match vmi {
        VmiView::Missing => true,
        VmiView::Present { is_deleting, .. } => is_deleting,
    };
    if is_going_away {
        return if alive {
            Action::Shutdown
        } else if exists {
            Action::Delete
        } else {
            Action::Cleanup
        };
    }
    let VmiView::Present { phase, .. } = vmi else {
        return Action::Cleanup;
    };
    if phase.is_final() {
        return if exists { Action::Delete } else { Action::Cleanup };
    }
    Action::Update
}

#[cfg(test)]
mod tests {
    use super::*;
    use VirtualMachineInstancePhase as Phase;

    fn present(phase: Phase, is_deleting: bool) -> VmiView {
        VmiView::Present { phase, is_deleting }
    }

    fn domain(state: DomainState) -> DomainView {
        DomainView::Present { state }
    }

    #[test]
    fn upstreams_rows() {
        use DomainState::{Running, Shutoff};
        // A domain its launcher stopped (the pod was deleted) is synced: the VMI gets its final
        // phase on Update, and is deleted on the next pass.
        assert_eq!(decide(present(Phase::Running, false), domain(Shutoff)), Action::Update);
        assert_eq!(decide(VmiView::Missing, domain(Running)), Action::Shutdown);
        assert_eq!(decide(VmiView::Missing, domain(Shutoff)), Action::Delete);
        assert_eq!(decide(VmiView::Missing, DomainView::Missing), Action::Cleanup);
        assert_eq!(decide(present(Phase::Running, true), domain(Running)), Action::Shutdown);
        assert_eq!(
            decide(present(Phase::Succeeded, false), domain(Shutoff)),
            Action::Delete
        );
        assert_eq!(
            decide(present(Phase::Failed, false), DomainView::Missing),
            Action::Cleanup
        );
        assert_eq!(
            decide(present(Phase::Scheduled, false), DomainView::Missing),
            Action::Update
        );
        assert_eq!(decide(present(Phase::Running, false), domain(Running)), Action::Update);
    }

    /// Every VMI view x every domain view, against the table written out independently.
    #[test]
    fn full_matrix() {
        let mut vmis = vec![VmiView::Missing];
        for phase in Phase::ALL {
            for is_deleting in [false, true] {
                vmis.push(present(phase, is_deleting));
            }
        }
        let mut domains = vec![DomainView::Missing];
        for state in DomainState::ALL {
            domains.push(domain(state));
        }
        for vmi in &vmis {
            for dom in &domains {
                let alive = !matches!(
                    dom,
                    DomainView::Missing
                        | DomainView::Present {
                            state: DomainState::Shutoff | DomainState::Crashed | DomainState::NoState,
                            ..
                        }
                );
                let exists = *dom != DomainView::Missing;
                let expected = match vmi {
                    VmiView::Missing | VmiView::Present { is_deleting: true, .. } => {
                        if alive {
                            Action::Shutdown
                        } else if exists {
                            Action::Delete
                        } else {
                            Action::Cleanup
                        }
                    }
                    VmiView::Present {
                        phase: Phase::Succeeded | Phase::Failed,
                        ..
                    } => {
                        if exists {
                            Action::Delete
                        } else {
                            Action::Cleanup
                        }
                    }
                    VmiView::Present { .. } => Action::Update,
                };
                assert_eq!(decide(*vmi, *dom), expected, "{vmi:?} {dom:?}");
            }
        }
    }
}
