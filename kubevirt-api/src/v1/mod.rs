//! Types of the `kubevirt.io/v1` API group.

mod devices;
mod domain;
mod features;
mod kubevirt;
mod network;
mod probe;
mod subresource_options;
mod vm;
mod vmi;
mod vmi_status;
mod volumes;

pub use devices::*;
pub use domain::*;
pub use features::*;
pub use kubevirt::*;
pub use network::*;
pub use probe::*;
pub use subresource_options::*;
pub use vm::*;
pub use vmi::*;
pub use vmi_status::*;
pub use volumes::*;

/// The API group of every type here.
pub const GROUP: &str = "kubevirt.io";
/// The served and stored version.
pub const VERSION: &str = "v1";
/// `apiVersion` as it appears in manifests.
pub const API_VERSION: &str = "kubevirt.io/v1";
