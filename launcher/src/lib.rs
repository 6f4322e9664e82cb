//! virt-launcher: one per VM. Renders a VMI into libvirt domain XML, runs it under its own private
//! libvirt daemon and QEMU, and reports what happens to it.

pub mod cluster;
pub mod commands;
pub mod domain;
pub mod emulation;
#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
#[cfg(any(test, feature = "testing"))]
pub mod fuzzing;
pub mod image_store;
pub mod libvirt;
pub mod local;
pub mod pod_network;
pub mod supervisor;
pub mod volumes;
