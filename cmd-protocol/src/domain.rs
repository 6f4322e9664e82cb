//! The domain as the launcher reports it (`GetDomain`, notify events): what virt-handler needs to
//! compute the VMI's status, as JSON. The handler never parses libvirt XML.

use kubevirt_api::domain_state::{DomainState, StateReason};
use serde::{Deserialize, Serialize};

/// One domain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainSnapshot {
    /// Identity and graceful-shutdown bookkeeping.
    pub metadata: DomainMetadata,
    /// The parts of the definition the handler acts on.
    pub spec: DomainSpecSummary,
    /// State and reason, with upstream's names.
    pub status: DomainStatusSnapshot,
}

/// `metadata` of a [`DomainSnapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainMetadata {
    /// `<namespace>_<name>`.
    pub name: String,
    /// The VMI's namespace.
    pub namespace: String,
    /// The VMI's UID.
    pub uid: String,
    /// When the domain was gone (set on the final event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// The grace period the launcher records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i64>,
    /// When the first ACPI shutdown was sent (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown_started: Option<String>,
    /// The launcher's container image, as its pod declares it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_image: Option<String>,
    /// How the last propagation of access credentials through the guest agent went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_credential: Option<AccessCredentialStatus>,
    /// The live migration this launcher runs or ran as its source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<crate::migration::MigrationMetadata>,
}

/// The outcome of propagating access credentials through the guest agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessCredentialStatus {
    /// Everything reached the guest.
    pub succeeded: bool,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// `spec` of a [`DomainSnapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainSpecSummary {
    /// The domain has ACPI, so a graceful shutdown can work.
    pub has_acpi: bool,
    /// The resolved machine type, e.g. `pc-q35-7.2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The network interfaces, named as the VMI spec names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<DomainInterface>,
    /// Whether the guest agent's channel is connected; `None` when the domain has no agent channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_agent_connected: Option<bool>,
}

/// One network interface of a [`DomainSnapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainInterface {
    /// The interface's name in the VMI spec.
    pub name: String,
    /// Its MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// `status` of a [`DomainSnapshot`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainStatusSnapshot {
    /// `Running`, `Paused`, `Shutoff`, ...
    pub status: String,
    /// `User`, `Shutdown`, `Destroyed`, ...
    pub reason: String,
}

impl DomainSnapshot {
    /// The VMI's `namespace/name`: the domain is named `<namespace>_<name>`.
    #[must_use]
    pub fn vmi_key(&self) -> String {
        let name = self
            .metadata
            .name
            .strip_prefix(&format!("{}_", self.metadata.namespace))
            .unwrap_or(&self.metadata.name);
        format!("{}/{name}", self.metadata.namespace)
    }
}

impl Default for DomainStatusSnapshot {
    fn default() -> Self {
        Self::from_state(DomainState::NoState, StateReason::NonExistent)
    }
}

impl DomainStatusSnapshot {
    /// From the typed state.
    #[must_use]
    pub fn from_state(state: DomainState, reason: StateReason) -> Self {
        Self {
            status: state.as_str().to_owned(),
            reason: reason.as_str().to_owned(),
        }
    }

    /// The typed state; an unknown string reads as `NoState`.
    #[must_use]
    pub fn state(&self) -> DomainState {
        DomainState::ALL
            .into_iter()
            .find(|s| s.as_str() == self.status)
            .unwrap_or(DomainState::NoState)
    }

    /// The typed reason; an unknown string reads as `Unknown`.
    #[must_use]
    pub fn reason(&self) -> StateReason {
        StateReason::ALL
            .into_iter()
            .find(|r| r.as_str() == self.reason)
            .unwrap_or(StateReason::Unknown)
    }
}

/// Why untrusted bytes are not a valid command request.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not a protobuf `VMIRequest`.
    #[error("not a VMIRequest")]
    Protobuf(#[from] prost::DecodeError),
    /// The request carries no VMI.
    #[error("the request carries no VMI")]
    MissingVmi,
    /// The VMI JSON is invalid.
    #[error("the VMI JSON is invalid")]
    Json(#[from] serde_json::Error),
}

/// Decodes a `VMIRequest` body and the VMI inside it, as the launcher's server does. Never panics
/// on any input (a fuzz target and a property test drive it).
pub fn decode_vmi_request(bytes: &[u8]) -> Result<kubevirt_api::v1::VirtualMachineInstance, DecodeError> {
    let request = <crate::cmd::VmiRequest as prost::Message>::decode(bytes)?;
    let vmi = request.vmi.ok_or(DecodeError::MissingVmi)?;
    Ok(serde_json::from_slice(&vmi.vmi_json)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_round_trips_as_json_and_reads_back_typed_states() {
        let snapshot = DomainSnapshot {
            metadata: DomainMetadata {
                name: "ns_vm".to_owned(),
                uid: "u".to_owned(),
                ..DomainMetadata::default()
            },
            spec: DomainSpecSummary {
                has_acpi: true,
                ..DomainSpecSummary::default()
            },
            status: DomainStatusSnapshot::from_state(DomainState::Shutoff, StateReason::Destroyed),
        };
        let json = serde_json::to_string(&snapshot).expect("json");
        let back: DomainSnapshot = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, snapshot);
        assert_eq!(back.status.state(), DomainState::Shutoff);
        assert_eq!(back.status.reason(), StateReason::Destroyed);
    }

    #[test]
    fn garbage_is_a_decode_error_not_a_panic() {
        assert!(decode_vmi_request(b"\xff\xff\xff\xff").is_err());
        assert!(matches!(decode_vmi_request(b""), Err(DecodeError::MissingVmi)));
    }
}
