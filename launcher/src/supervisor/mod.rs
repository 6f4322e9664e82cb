//! The launcher's process supervision: reaping every child at once, a private mount namespace for
//! libvirt, and the libvirt daemons it starts, watches and restarts.

pub mod caps_cache;
pub mod daemons;
pub mod namespace;
pub mod reaper;
