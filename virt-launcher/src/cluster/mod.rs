//! Cluster mode: the launcher inside its pod serves `kubevirt.cmd.v1.Cmd` on its socket and runs
//! the domain virt-handler asks for.

pub mod access_credentials;
pub mod config_disks;
pub mod container_disk_check;
pub mod migration_monitor;
pub mod notify;
pub mod pod_volumes;
pub mod serve;
pub mod service;
pub mod snapshot;
pub mod start_deadline;
