//! Domain states and reasons as KubeVirt names them, and the VMI phase each one means.
//!
//! The launcher maps libvirt's numeric state and reason into these (as upstream's
//! `pkg/virt-launcher/virtwrap/util/libvirt_helper.go` does), and the phase decision is shared by
//! local mode and virt-handler, which must not link libvirt.
//! Both mappings are exhaustive matches, tested as full tables.

use std::fmt;

use crate::v1::VirtualMachineInstancePhase;

/// `api.LifeCycle`: the domain's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DomainState {
    /// No state (or the domain does not exist).
    NoState,
    /// Running.
    Running,
    /// Blocked on a resource.
    Blocked,
    /// Paused.
    Paused,
    /// Being shut down.
    ShuttingDown,
    /// Off.
    Shutoff,
    /// Crashed.
    Crashed,
    /// Suspended by guest power management.
    PmSuspended,
}

/// `api.StateChangeReason`: why the domain is in its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StateReason {
    /// Unknown.
    Unknown,
    /// The domain does not exist.
    NonExistent,
    /// Asked for by a user (pause, shutdown).
    User,
    /// The guest shut down.
    Shutdown,
    /// Destroyed (forced off).
    Destroyed,
    /// Crashed.
    Crashed,
    /// Migrated away.
    Migrated,
    /// Saved.
    Saved,
    /// Failed to start or died.
    Failed,
    /// Restored from a snapshot.
    FromSnapshot,
    /// Guest panicked.
    Panicked,
    /// Paused for migration.
    Migration,
    /// Paused to save.
    Save,
    /// Paused to dump.
    Dump,
    /// Paused by an I/O error.
    IoError,
    /// Paused by the watchdog.
    Watchdog,
    /// Paused while shutting down.
    ShuttingDown,
    /// Paused for a snapshot.
    Snapshot,
    /// Paused while starting up.
    StartingUp,
    /// Paused in post-copy migration.
    Postcopy,
    /// Post-copy migration failed.
    PostcopyFailed,
}

impl DomainState {
    /// Every state, for matrix tests.
    pub const ALL: [Self; 8] = [
        Self::NoState,
        Self::Running,
        Self::Blocked,
        Self::Paused,
        Self::ShuttingDown,
        Self::Shutoff,
        Self::Crashed,
        Self::PmSuspended,
    ];

    /// From libvirt's `virDomainState`.
    #[must_use]
    pub fn from_libvirt(state: u32) -> Self {
        match state {
            1 => Self::Running,
            2 => Self::Blocked,
            3 => Self::Paused,
            4 => Self::ShuttingDown,
            5 => Self::Shutoff,
            6 => Self::Crashed,
            7 => Self::PmSuspended,
            _ => Self::NoState,
        }
    }

    /// Upstream's string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoState => "NoState",
            Self::Running => "Running",
            Self::Blocked => "Blocked",
            Self::Paused => "Paused",
            Self::ShuttingDown => "ShuttingDown",
            Self::Shutoff => "Shutoff",
            Self::Crashed => "Crashed",
            Self::PmSuspended => "PMSuspended",
        }
    }
}

impl StateReason {
    /// Every reason, for matrix tests.
    pub const ALL: [Self; 21] = [
        Self::Unknown,
        Self::NonExistent,
        Self::User,
        Self::Shutdown,
        Self::Destroyed,
        Self::Crashed,
        Self::Migrated,
        Self::Saved,
        Self::Failed,
        Self::FromSnapshot,
        Self::Panicked,
        Self::Migration,
        Self::Save,
        Self::Dump,
        Self::IoError,
        Self::Watchdog,
        Self::ShuttingDown,
        Self::Snapshot,
        Self::StartingUp,
        Self::Postcopy,
        Self::PostcopyFailed,
    ];

    /// From libvirt's per-state reason code.
    #[must_use]
    pub fn from_libvirt(state: DomainState, reason: u32) -> Self {
        match state {
            DomainState::ShuttingDown => match reason {
                1 => Self::User,
                _ => Self::Unknown,
            },
            DomainState::Shutoff => match reason {
                1 => Self::Shutdown,
                2 => Self::Destroyed,
                3 => Self::Crashed,
                4 => Self::Migrated,
                5 => Self::Saved,
                6 => Self::Failed,
                7 => Self::FromSnapshot,
                _ => Self::Unknown,
            },
            DomainState::Crashed => match reason {
                1 => Self::Panicked,
                _ => Self::Unknown,
            },
            DomainState::Paused => match reason {
                1 => Self::User,
                2 => Self::Migration,
                3 => Self::Save,
                4 => Self::Dump,
                5 => Self::IoError,
                6 => Self::Watchdog,
                7 => Self::FromSnapshot,
                8 => Self::ShuttingDown,
                9 => Self::Snapshot,
                10 => Self::Crashed,
                11 => Self::StartingUp,
                12 => Self::Postcopy,
                13 => Self::PostcopyFailed,
                _ => Self::Unknown,
            },
            DomainState::NoState | DomainState::Running | DomainState::Blocked | DomainState::PmSuspended => {
                Self::Unknown
            }
        }
    }

    /// Upstream's string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "Unknown",
            Self::NonExistent => "NonExistent",
            Self::User => "User",
            Self::Shutdown => "Shutdown",
            Self::Destroyed => "Destroyed",
            Self::Crashed => "Crashed",
            Self::Migrated => "Migrated",
            Self::Saved => "Saved",
            Self::Failed => "Failed",
            Self::FromSnapshot => "FromSnapshot",
            Self::Panicked => "Panicked",
            Self::Migration => "Migration",
            Self::Save => "Save",
            Self::Dump => "Dump",
            Self::IoError => "IOError",
            Self::Watchdog => "Watchdog",
            Self::ShuttingDown => "ShuttingDown",
            Self::Snapshot => "Snapshot",
            Self::StartingUp => "StartingUp",
            Self::Postcopy => "Postcopy",
            Self::PostcopyFailed => "PostcopyFailed",
        }
    }
}

impl fmt::Display for DomainState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for StateReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The VMI phase a domain's state means, or `None` to leave the phase as it is (upstream's
/// `calculateVmPhaseForStatusReason`). `acpi_usable` is "the domain had a grace period and ACPI",
/// which makes a destroy a forced kill, hence Failed.
#[must_use]
pub fn phase_for_domain(
    state: DomainState,
    reason: StateReason,
    acpi_usable: bool,
) -> Option<VirtualMachineInstancePhase> {
    use VirtualMachineInstancePhase::{Failed, Running, Succeeded};
    match state {
        DomainState::Shutoff | DomainState::Crashed => match reason {
            StateReason::Crashed | StateReason::Panicked | StateReason::Failed => Some(Failed),
            StateReason::Destroyed => Some(if acpi_usable { Failed } else { Succeeded }),
            StateReason::Shutdown | StateReason::Saved | StateReason::FromSnapshot => Some(Succeeded),
            StateReason::Migrated
            | StateReason::Unknown
            | StateReason::NonExistent
            | StateReason::User
            | StateReason::Migration
            | StateReason::Save
            | StateReason::Dump
            | StateReason::IoError
            | StateReason::Watchdog
            | StateReason::ShuttingDown
            | StateReason::Snapshot
            | StateReason::StartingUp
            | StateReason::Postcopy
            | StateReason::PostcopyFailed => None,
        },
        DomainState::Paused => Some(if reason == StateReason::PostcopyFailed {
            Failed
        } else {
            Running
        }),
        DomainState::Running | DomainState::Blocked | DomainState::PmSuspended => Some(Running),
        DomainState::NoState | DomainState::ShuttingDown => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use VirtualMachineInstancePhase::{Failed, Running, Succeeded};

    #[test]
    fn libvirt_codes_map_to_upstream_names() {
        let names: Vec<&str> = (0..=8).map(|s| DomainState::from_libvirt(s).as_str()).collect();
        assert_eq!(
            names,
            [
                "NoState",
                "Running",
                "Blocked",
                "Paused",
                "ShuttingDown",
                "Shutoff",
                "Crashed",
                "PMSuspended",
                "NoState"
            ]
        );
        assert_eq!(
            StateReason::from_libvirt(DomainState::Shutoff, 2),
            StateReason::Destroyed
        );
        assert_eq!(StateReason::from_libvirt(DomainState::Shutoff, 3), StateReason::Crashed);
        assert_eq!(StateReason::from_libvirt(DomainState::Paused, 1), StateReason::User);
        assert_eq!(StateReason::from_libvirt(DomainState::Paused, 5).as_str(), "IOError");
        assert_eq!(
            StateReason::from_libvirt(DomainState::Crashed, 1),
            StateReason::Panicked
        );
        assert_eq!(StateReason::from_libvirt(DomainState::Running, 1), StateReason::Unknown);
    }

    /// The whole state x reason x ACPI matrix against upstream's table, written out independently.
    #[test]
    #[allow(clippy::match_same_arms, reason = "one arm per row of upstream's table")]
    fn phase_for_every_state_reason_and_acpi_combination() {
        for state in DomainState::ALL {
            for reason in StateReason::ALL {
                for acpi in [false, true] {
                    let expected = match (state, reason) {
                        (
                            DomainState::Shutoff | DomainState::Crashed,
                            StateReason::Crashed | StateReason::Panicked | StateReason::Failed,
                        ) => Some(Failed),
                        (DomainState::Shutoff | DomainState::Crashed, StateReason::Destroyed) => {
                            Some(if acpi { Failed } else { Succeeded })
                        }
                        (
                            DomainState::Shutoff | DomainState::Crashed,
                            StateReason::Shutdown | StateReason::Saved | StateReason::FromSnapshot,
                        ) => Some(Succeeded),
                        (DomainState::Paused, StateReason::PostcopyFailed) => Some(Failed),
                        (
                            DomainState::Paused
                            | DomainState::Running
                            | DomainState::Blocked
                            | DomainState::PmSuspended,
                            _,
                        ) => Some(Running),
                        _ => None,
                    };
                    assert_eq!(
                        phase_for_domain(state, reason, acpi),
                        expected,
                        "{state} {reason} acpi={acpi}"
                    );
                }
            }
        }
    }
}
