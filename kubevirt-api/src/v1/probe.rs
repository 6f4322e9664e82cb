//! `spec.livenessProbe` and `spec.readinessProbe`.

use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, TCPSocketAction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EmptyObject;

/// A probe against the guest. Exactly one handler is set.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// Run a command in the guest through the guest agent.
    pub exec: Option<ExecAction>,
    /// HTTP GET against the guest.
    pub http_get: Option<HTTPGetAction>,
    /// TCP connect to the guest.
    pub tcp_socket: Option<TCPSocketAction>,
    /// Ping the guest agent, written `guestAgentPing: {}`.
    pub guest_agent_ping: Option<EmptyObject>,
    /// Seconds after start before the first probe.
    pub initial_delay_seconds: Option<i32>,
    /// Seconds before a probe times out.
    pub timeout_seconds: Option<i32>,
    /// Seconds between probes.
    pub period_seconds: Option<i32>,
    /// Successes needed after a failure.
    pub success_threshold: Option<i32>,
    /// Failures needed after a success.
    pub failure_threshold: Option<i32>,
}
