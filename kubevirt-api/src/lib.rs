//! The `kubevirt.io/v1` API as the Rust components see it.
//!
//! Every other crate builds on this one: the types follow upstream KubeVirt's field names, JSON
//! casing and optionality, so unmodified upstream manifests parse and serialize back unchanged.
//! Defaults are never filled in during deserialization (a missing field stays `None`); defaulting is
//! an explicit step owned by virt-api's mutating webhook, as upstream does it.

pub mod clock;
pub mod crd;
pub mod defaults;
pub mod domain_state;
pub mod error_report;
pub mod events;
pub mod graceful_stop;
pub mod guest;
pub mod instancetype;
pub mod manifest;
pub mod migratable;
pub mod migration_settings;
pub mod migrations;
pub mod persistent_state;
pub mod quantity;
pub mod schema;
pub mod support;
pub mod v1;
pub mod validation;
pub mod well_known;

pub use manifest::{Manifest, ManifestError};
