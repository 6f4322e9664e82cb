//! What the control-plane components share: the aggregation layer's settings
//! ([`aggregation`]), the reconcile work queue ([`workqueue`]), the HTTP
//! endpoint with `/healthz`, `/leader` and `/metrics` ([`http`]), one HTTPS connection of a
//! server that routes its own requests ([`https_connection`]), the process around them
//! ([`process`]), the TLS configurations of virt-api and of virt-handler's console server
//! ([`tls`]), instance type lookups over the API server ([`instancetype_lookup`]), and which of a
//! write's answer and a watched object to cache ([`own_writes`]).
//!
//! A crate of its own because several components need it and none depends on another.

pub mod aggregation;
pub mod http;
pub mod https_client;
pub mod https_connection;
pub mod instancetype_lookup;
pub mod own_writes;
pub mod process;
pub mod tls;
pub mod workqueue;
