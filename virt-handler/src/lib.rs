//! virt-handler: one per node. Watches the VMIs scheduled to its node, drives each virt-launcher
//! over its unix socket, writes Running/Succeeded/Failed and the rest of the VMI status, keeps the
//! node's heartbeat, and exports metrics.
//!
//! The Kubernetes side ([`cluster_api`]), the launchers ([`launchers`]) and the clock sit behind
//! traits with real adapters and fakes. Each reconcile observes, plans with pure functions
//! ([`decide`], [`plan`], [`status`]) and applies ([`reconciler`]); [`runner`] feeds it from the
//! VMI watch, the launchers' domain events ([`notify_server`]) and timers. The crate talks to
//! launchers only through `cmd-protocol` and never links libvirt.

pub mod clock;
pub mod cluster_api;
pub mod cluster_settings;
pub mod console_server;
pub mod container_disks;
pub mod decide;
pub mod device_ownership;
pub mod device_plugins;
pub mod drain;
pub mod heartbeat;
pub mod host_disks;
pub mod launchers;
pub mod metrics;
pub mod migration;
pub mod migration_proxy;
pub mod migration_tls;
pub mod mount_helper;
pub mod network_wiring;
pub mod node;
pub mod node_mounts;
pub mod notify_server;
pub mod plan;
pub mod pod_process;
pub mod pod_socket;
pub mod reconciler;
pub mod runner;
pub mod status;
