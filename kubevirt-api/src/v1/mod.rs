//! Types of the `kubevirt.io/v1` API group.

mod access_credentials;
mod certificate_rotation;
mod customize_components;
mod devices;
mod disks;
mod domain;
mod features;
mod instancetype_matcher;
mod interfaces;
mod kubevirt;
mod launch_security;
mod migration;
mod migration_state;
mod network;
mod probe;
mod subresource_options;
mod virtual_machine_settings;
mod vm;
mod vm_volume_status;
mod vmi;
mod vmi_status;
mod volumes;
mod workload_updates;

pub use access_credentials::*;
pub use certificate_rotation::*;
pub use customize_components::*;
pub use devices::*;
pub use disks::*;
pub use domain::*;
pub use features::*;
pub use instancetype_matcher::*;
pub use interfaces::*;
pub use kubevirt::*;
pub use launch_security::*;
pub use migration::*;
pub use migration_state::*;
pub use network::*;
pub use probe::*;
pub use subresource_options::*;
pub use virtual_machine_settings::*;
pub use vm::*;
pub use vm_volume_status::*;
pub use vmi::*;
pub use vmi_status::*;
pub use volumes::*;
pub use workload_updates::*;

/// The API group of every type here.
pub const GROUP: &str = "kubevirt.io";
/// The served and stored version.
pub const VERSION: &str = "v1";
/// `apiVersion` as it appears in manifests.
pub const API_VERSION: &str = "kubevirt.io/v1";
