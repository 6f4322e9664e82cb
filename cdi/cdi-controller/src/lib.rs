//! CDI's controller, as upstream's `cdi-controller`: it turns a DataVolume into its claim and the
//! pod that fills it, and keeps a StorageProfile for every StorageClass.
//!
//! So far it holds the pure decisions the controller is built on: what a StorageClass's
//! provisioner supports ([`storage_capabilities`]), a StorageProfile's status from its class
//! ([`storage_profile`]), and a DataVolume's claim spec from its `spec.storage` ([`claim_spec`]).
//! The reconcilers and the binary come next (issue #33).

pub mod claim_annotations;
pub mod claim_spec;
pub mod cluster_api;
pub mod import_plan;
pub mod import_reconciler;
pub mod import_status;
pub mod importer_pod;
pub mod storage_capabilities;
pub mod storage_profile;
