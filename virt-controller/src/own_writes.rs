//! The virt-controller side of [`control_loop::own_writes`]: launcher pods, cached as views.

use std::collections::BTreeMap;

pub use control_loop::own_writes::replaces_cached;

use crate::vmi_lifecycle::PodView;

/// Whether a pod this controller wrote (`written`) replaces the one of the same name in `pods`,
/// the cached pods of its VMI.
#[must_use]
pub fn replaces_cached_pod(pods: Option<&BTreeMap<String, PodView>>, written: &PodView) -> bool {
    pods.and_then(|pods| pods.get(&written.name))
        .is_none_or(|cached| replaces_cached(written.resource_version.as_deref(), cached.resource_version.as_deref()))
}
