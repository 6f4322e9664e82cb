//! Supervising libvirt and QEMU, shared by local and cluster mode: reaping every child at once, a
//! private mount namespace for libvirt, the daemon's paths and configuration ([`daemon_config`]:
//! a system daemon as root, a session daemon as an unprivileged pod's user), the libvirt daemons
//! it starts, watches and restarts, and
//! the domain's lifecycle: the stop decision ([`lifecycle`]) and the loop that carries it out
//! ([`supervise`]).

pub mod caps_cache;
pub mod caps_variants;
pub mod daemon_config;
pub mod daemon_error;
pub mod daemons;
pub mod lifecycle;
pub mod log_rotation;
pub mod namespace;
pub mod reaper;
pub mod startup_cpu;
pub mod supervise;
