//! Pod networking for kubevirt-rs: the masquerade and bridge bindings of the pod network, and the
//! DHCP server that hands the guest its address.
//!
//! A crate of its own because two components need it: virt-handler builds the bridge, tap and NAT
//! rules inside a launcher pod's network namespace (upstream's phase 1), and virt-launcher serves
//! DHCP (phase 2) and, in local mode, does both for the namespace it makes itself. Neither should
//! pull in the other's dependencies (libvirt for the launcher, kube for the handler).
//!
//! - [`plan`]: pure decisions, VMI + observed pod interface -> what to build, and its rendering as
//!   `ip -batch` and nftables input;
//! - [`commands`]: the seam to `ip`, `nft` and `sysctl` inside a namespace, real and fake;
//! - [`setup`]: observing the pod interface and building a plan;
//! - [`handover`]: the observation virt-handler caches for the launcher, and the ready marker;
//! - [`local`]: local mode's namespace and veth link to the host;
//! - [`dhcp`]: the DHCP server.

pub mod commands;
pub mod dhcp;
pub mod handover;
pub mod local;
pub mod plan;
pub mod setup;
