//! virt-api: KubeVirt's admission webhooks and the `subresources.kubevirt.io/v1` API, over HTTPS.
//!
//! This is its own crate, not part of `kubevirt-api`, because every component links the types
//! crate while only virt-api needs an HTTPS server, TLS certificates and a websocket proxy.
//! The behaviour is in pure modules: [`defaults`] and [`admission`] answer AdmissionReviews,
//! [`subresources`] decides what a start, stop or restart changes; the kube API and the node
//! connections sit behind traits in [`backends`].

pub mod admission;
pub mod app_state;
pub mod backends;
pub mod defaults;
pub mod run;
pub mod server;
pub mod subresources;
pub use control_loop::tls;
pub mod certificates;
