//! virt-launcher: one per VM. Renders a VMI into libvirt domain XML, runs it under its own private
//! libvirt daemon and QEMU, and reports what happens to it.

pub mod cloud_init;
pub mod cluster;
pub mod commands;
/// The VMI -> domain conversion, its own crate so it builds and tests without libvirt.
pub use domain_xml as domain;
pub mod emulation;
pub mod guest_network;
pub mod host_cpus;
pub mod image_store;
pub mod iso;
pub mod libvirt;
pub mod local;
pub mod mounted;
pub mod supervisor;
pub mod volume_step;
pub mod volumes;
