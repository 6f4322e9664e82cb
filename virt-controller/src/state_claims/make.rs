//! Making a VM state claim (a VMI's own, or a migration target's), for the VMI and migration
//! controllers: the class and access mode chosen by [`super::choose_class`] and
//! [`super::access_mode`] from what the API server says.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kubevirt_api::persistent_state::{DEFAULT_CLASS_ANNOTATION, DEFAULT_VIRT_CLASS_ANNOTATION};
use kubevirt_api::v1::VirtualMachineInstance;

use super::{ClaimPurpose, ClassFacts, access_mode, choose_class, claim_for};
use crate::cluster_api::{ApiError, ControllerApi};

fn class_facts(class: &StorageClass) -> ClassFacts {
    let annotated = |key: &str| {
        class
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .is_some_and(|v| v == "true")
    };
    ClassFacts {
        name: class.metadata.name.clone().unwrap_or_default(),
        default_for_virt: annotated(DEFAULT_VIRT_CLASS_ANNOTATION),
        default: annotated(DEFAULT_CLASS_ANNOTATION),
    }
}

/// Makes a state claim for `vmi` (its own, or a migration target's), its class and access mode
/// chosen as upstream chooses them; the class is `configured` when the cluster names one.
///
/// # Errors
/// The API server's, or [`ApiError::Precondition`] when no class can be chosen.
pub async fn make_state_claim<A: ControllerApi>(
    api: &A,
    vmi: &VirtualMachineInstance,
    configured: Option<&str>,
    purpose: &ClaimPurpose,
) -> Result<PersistentVolumeClaim, ApiError> {
    let classes = if configured.is_some() {
        Vec::new()
    } else {
        api.list_storage_classes().await?.iter().map(class_facts).collect()
    };
    let class = choose_class(configured, &classes).map_err(ApiError::Precondition)?;
    let sets = api.storage_profile_sets(&class).await?;
    let claim = claim_for(vmi, &class, access_mode(configured.is_some(), &sets), purpose);
    api.create_pvc(&claim).await
}
