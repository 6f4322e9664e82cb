//! Local mode, the embedded default: `virt-launcher run --vmi FILE` boots a manifest on this
//! machine with its own private libvirt, no cluster. It is one user of the shared machinery
//! ([`crate::supervisor`], [`crate::volumes`], [`crate::domain`]); cluster mode
//! ([`crate::cluster`]) is the other.

pub mod console;
pub mod manifest;
pub mod network;
pub mod run;
pub mod runtime_dir;
