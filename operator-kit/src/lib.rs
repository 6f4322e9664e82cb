//! What kubevirt-rs's operators share (the hostpath-provisioner-operator today; cdi-operator,
//! virt-operator and the HyperConverged operator as they come):
//! - [`conditions`]: upstream's operator conditions (`Available`, `Progressing`, `Degraded`),
//!   derived from one [`conditions::Health`] and stamped only when they change;
//! - [`placement`]: upstream's `NodePlacement` (`nodeSelector`, `affinity`, `tolerations`);
//! - [`objects`]: the objects an operator owns, rendered as [`objects::Desired`] and applied by
//!   server-side apply through [`objects::Objects`] (a real adapter and a fake);
//! - [`rollout`]: whether a DaemonSet or Deployment has finished rolling out.

pub mod conditions;
pub mod objects;
pub mod placement;
pub mod rollout;
