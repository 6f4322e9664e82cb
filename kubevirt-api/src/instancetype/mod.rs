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
