//! virt-controller: turns a `VirtualMachine` into a `VirtualMachineInstance` (run strategies) and a
//! `VirtualMachineInstance` into a virt-launcher Pod, and owns the phases Pending, Scheduling and
//! Scheduled.
//!
//! So far it holds the pure parts: the launcher pod ([`pod`]) with its memory overhead
//! ([`overhead`]), the run-strategy decision ([`run_strategy`]), and the printable status and
//! crash-loop backoff ([`printable_status`]).

pub mod claims;
pub mod cluster_api;
pub mod compact;
pub mod data_volumes;
pub mod evacuation;
pub mod expectations;
pub mod leader;
pub mod migration_controller;
pub mod migration_history;
pub mod migration_phase;
pub mod migration_plan;
pub mod overhead;
pub mod own_writes;
pub mod pod;
pub mod printable_status;
pub mod recent_events;
pub mod reconcile_error;
pub mod relist;
pub mod run_strategy;
pub mod runner;
pub mod state_claims;
pub mod vm_controller;
pub mod vm_data_volumes;
pub mod vm_instancetypes;
pub mod vm_status;
pub mod vmi_controller;
pub mod vmi_lifecycle;
pub mod vmi_phase;
pub mod volume_status;
pub mod watched_facts;
pub mod workload_update;
