//! What the control-plane components share: the reconcile work queue ([`workqueue`]), the HTTP
//! endpoint with `/healthz`, `/leader` and `/metrics` ([`http`]), the process around them
//! ([`process`]), the TLS configurations of virt-api and of virt-handler's console server
//! ([`tls`]), and instance type lookups over the API server ([`instancetype_lookup`]).
//!
//! A crate of its own because several components need it and none depends on another.

pub mod http;
pub mod instancetype_lookup;
pub mod process;
pub mod tls;
pub mod workqueue;
