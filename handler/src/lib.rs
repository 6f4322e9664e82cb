//! virt-handler: one per node. Watches the VMIs scheduled to its node, drives each virt-launcher over
//! its unix socket, writes Running/Succeeded/Failed and the rest of the VMI status, and exports
//! metrics.
//!
//! The crate exists now so the workspace has its final shape; its reconciler arrives with the
//! virt-handler issue and talks to the launcher only through the command protocol.
