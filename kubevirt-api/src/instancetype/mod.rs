//! `instancetype.kubevirt.io/v1beta1`: instance types (the hardware a VM gets) and preferences (the
//! defaults and requirements it gets), and how they expand into a VM's VMI spec.

mod kinds;
mod preference_spec;
mod spec;

pub use kinds::*;
pub use preference_spec::*;
pub use spec::*;

/// The API group.
pub const GROUP: &str = "instancetype.kubevirt.io";
/// The served and stored version.
pub const VERSION: &str = "v1beta1";

/// Labels a PVC, DataVolume or DataSource carries to name the instance type and preference a VM
/// using it should get (`inferFromVolume`).
pub mod labels {
    /// The default instance type's name.
    pub const DEFAULT_INSTANCETYPE: &str = "instancetype.kubevirt.io/default-instancetype";
    /// Its kind.
    pub const DEFAULT_INSTANCETYPE_KIND: &str = "instancetype.kubevirt.io/default-instancetype-kind";
    /// The default preference's name.
    pub const DEFAULT_PREFERENCE: &str = "instancetype.kubevirt.io/default-preference";
    /// Its kind.
    pub const DEFAULT_PREFERENCE_KIND: &str = "instancetype.kubevirt.io/default-preference-kind";
    /// On a ControllerRevision: the stored object's generation.
    pub const OBJECT_GENERATION: &str = "instancetype.kubevirt.io/object-generation";
    /// On a ControllerRevision: the stored object's kind.
    pub const OBJECT_KIND: &str = "instancetype.kubevirt.io/object-kind";
    /// On a ControllerRevision: the stored object's name.
    pub const OBJECT_NAME: &str = "instancetype.kubevirt.io/object-name";
    /// On a ControllerRevision: the stored object's UID.
    pub const OBJECT_UID: &str = "instancetype.kubevirt.io/object-uid";
    /// On a ControllerRevision: the stored object's API version.
    pub const OBJECT_VERSION: &str = "instancetype.kubevirt.io/object-version";
}

/// Annotations virt-controller puts on a VMI created from a VM with an instance type or preference.
pub mod annotations {
    /// A namespaced instance type's name.
    pub const INSTANCETYPE_NAME: &str = "kubevirt.io/instancetype-name";
    /// A cluster instance type's name.
    pub const CLUSTER_INSTANCETYPE_NAME: &str = "kubevirt.io/cluster-instancetype-name";
    /// A namespaced preference's name.
    pub const PREFERENCE_NAME: &str = "kubevirt.io/preference-name";
    /// A cluster preference's name.
    pub const CLUSTER_PREFERENCE_NAME: &str = "kubevirt.io/cluster-preference-name";
}

mod apply;
mod conflicts;
mod find;
mod object_set;
mod preference_apply;
mod requirements;
mod revision;
mod topology;

pub use apply::{apply_instancetype, overcommitted_request};
pub use conflicts::{Conflict, Conflicts};
pub use find::{
    FindError, Found, InstancetypeLookup, LookupError, find_both, find_instancetype, find_matched, find_preference,
    instancetype_kind, preference_kind,
};
pub use object_set::ObjectSet;
pub use preference_apply::{apply_architecture, apply_device_preferences, apply_preference};
pub use requirements::check_requirements;
pub use revision::{RevisionError, revision_for, same_spec, spec_of};
pub use topology::{PreferredTopology, SpreadAcross, layout, spread_error};

use std::collections::BTreeMap;

use crate::v1::VirtualMachineInstanceSpec;

/// Applies an instance type and then a preference to `spec` (at `prefix`), as upstream does: the
/// instance type's conflicts stop everything, the preference only fills what is unset.
pub fn apply(
    instancetype: Option<&VirtualMachineInstancetypeSpec>,
    preference: Option<&VirtualMachinePreferenceSpec>,
    spec: &mut VirtualMachineInstanceSpec,
    annotations: &mut BTreeMap<String, String>,
    prefix: &str,
) -> Result<(), Conflicts> {
    if let Some(instancetype) = instancetype {
        let conflicts = apply_instancetype(instancetype, preference, spec, annotations, prefix);
        if !conflicts.is_empty() {
            return Err(conflicts);
        }
    }
    if let Some(preference) = preference {
        apply_preference(preference, spec, annotations);
    }
    Ok(())
}

/// A VM's VMI spec with upstream's defaults around a preference: the device preferences first
/// (their autoattach choices count), then a disk for every volume without one and the default pod
/// interface under `cluster`, so the full preference applied afterwards gives them its bus and
/// model. A pod interface the cluster forbids is not added (the VMI webhook refuses the VMI).
pub fn add_defaults_for_preference(
    preference: Option<&VirtualMachinePreferenceSpec>,
    spec: &mut VirtualMachineInstanceSpec,
    cluster: &crate::v1::ClusterConfig,
) {
    if let Some(preference) = preference {
        apply_device_preferences(preference, spec);
    }
    crate::defaults::set_default_volume_disks(spec);
    let _ = crate::defaults::set_default_network_interface(spec, cluster);
}

/// Upstream's annotations naming the instance type and preference a VMI was created from:
/// `kubevirt.io/(cluster-)instancetype-name` and `kubevirt.io/(cluster-)preference-name`.
pub fn name_annotations(
    vm: &crate::v1::VirtualMachine,
    instancetype_kind: Option<&KindNames>,
    preference_kind: Option<&KindNames>,
    annotations: &mut BTreeMap<String, String>,
) {
    if let (Some(kind), Some(name)) = (
        instancetype_kind,
        vm.spec.instancetype.as_ref().and_then(|m| m.name.clone()),
    ) {
        let key = if kind.namespaced {
            annotations::INSTANCETYPE_NAME
        } else {
            annotations::CLUSTER_INSTANCETYPE_NAME
        };
        annotations.insert(key.to_owned(), name);
    }
    if let (Some(kind), Some(name)) = (
        preference_kind,
        vm.spec.preference.as_ref().and_then(|m| m.name.clone()),
    ) {
        let key = if kind.namespaced {
            annotations::PREFERENCE_NAME
        } else {
            annotations::CLUSTER_PREFERENCE_NAME
        };
        annotations.insert(key.to_owned(), name);
    }
}
