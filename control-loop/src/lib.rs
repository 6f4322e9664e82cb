//! What virt-handler and virt-controller share to run their control loops: the reconcile work
//! queue ([`workqueue`]) and the HTTP endpoint with `/healthz`, `/leader` and `/metrics`
//! ([`http`]), and the process around them ([`process`]).
//!
//! A crate of its own because both components need it and neither depends on the other.

pub mod http;
pub mod process;
pub mod workqueue;
