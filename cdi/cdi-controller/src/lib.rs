//! CDI's controller, as upstream's `cdi-controller`: it turns a DataVolume into its claim and the
//! pod that fills it, and keeps a StorageProfile for every StorageClass.
//!
//! The pure decisions: what a StorageClass's provisioner supports ([`storage_capabilities`]), a
//! StorageProfile's status from its class ([`storage_profile`]), a DataVolume's claim spec from
//! its `spec.storage` ([`claim_spec`]), the importer pod ([`importer_pod`]), the upload server
//! ([`upload_server`]), a clone's source pod ([`clone_source`]), what the pod says
//! ([`claim_annotations`], [`import_progress`]), the DataVolume's status ([`import_status`]) and
//! one pass's steps ([`import_plan`]). [`import_reconciler`] observes and applies them through
//! [`cluster_api`] and the importers' metrics.

pub mod cdi_pki;
pub mod claim_annotations;
pub mod claim_spec;
pub mod clone_source;
pub mod cluster_api;
pub mod config_status;
pub mod data_source_status;
pub mod import_plan;
pub mod import_progress;
pub mod import_reconciler;
pub mod import_status;
pub mod importer_pod;
pub mod storage_capabilities;
pub mod storage_profile;
pub mod upload_server;
