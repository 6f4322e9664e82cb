//! Local mode, the embedded default: `virt-launcher run --vmi FILE` boots a manifest on this
//! machine with its own private libvirt, no cluster.

pub mod console;
pub mod lifecycle;
pub mod network;
pub mod run;
pub mod runtime_dir;
pub mod volumes;
