//! virt-controller: turns a `VirtualMachine` into a `VirtualMachineInstance` (run strategies) and a
//! `VirtualMachineInstance` into a virt-launcher Pod, and owns the phases Pending, Scheduling and
//! Scheduled.
//!
//! The crate exists now so the workspace has its final shape; its reconcilers arrive with the
//! virt-controller issue and build only on the `kubevirt-api` types.
