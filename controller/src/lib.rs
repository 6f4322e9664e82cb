//! virt-controller: turns a `VirtualMachine` into a `VirtualMachineInstance` (run strategies) and a
//! `VirtualMachineInstance` into a virt-launcher Pod, and owns the phases Pending, Scheduling and
//! Scheduled.
//!
//! So far it holds the pure parts: the launcher pod ([`pod`]) with its memory overhead
//! ([`overhead`]).

pub mod overhead;
pub mod pod;
