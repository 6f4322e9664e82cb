//! VMI -> libvirt domain XML: the typed XML model and the pure conversion into it.
//!
//! Nothing here touches libvirt, the file system or the clock: everything the conversion needs to
//! know about its surroundings comes in a [`ConvertContext`].

pub mod convert;
pub mod model;

pub use convert::{ConvertContext, ConvertError, DomainType, InterfaceLink, InterfaceTaps, PathLayout, render};
pub use model::Domain;
