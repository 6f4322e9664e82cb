//! VMI -> libvirt domain XML: the typed XML model and the pure conversion into it.
//!
//! Nothing here touches libvirt, the file system or the clock: everything the conversion needs to
//! know about its surroundings comes in a [`ConvertContext`]. So it builds and tests without
//! libvirt: the golden files, the property tests, the render benchmark and the `render_manifest`
//! fuzz target all live here. virt-launcher re-exports it as `virt_launcher::domain`.

pub mod convert;
#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(any(test, feature = "testing"))]
pub mod fuzzing;
pub mod model;

pub use convert::{
    ConvertContext, ConvertError, DomainType, HostCpus, InterfaceLink, InterfaceTaps, PathLayout,
    apply_interface_links, render,
};
pub use model::Domain;
