//! What kubevirt-rs's operators share (the hostpath-provisioner-operator, cdi-operator and the SSP
//! operator today; virt-operator and the HyperConverged operator as they come):
//! - [`controller`]: when a CR is looked at again ([`controller::Next`]), the retry after a failed
//!   pass, and the debounce every operator's controller uses;
//! - [`error_report`]: one line for an error and its causes;
//! - [`certificates`]: a CA, the serving or client certificate it signs and the bundle clients
//!   trust, kept in Secrets and a ConfigMap and made again before they expire;
//! - [`duration`]: Go durations (`metav1.Duration`, `48h`, `1h30m`) read to whole seconds;
//! - [`conditions`]: upstream's operator conditions (`Available`, `Progressing`, `Degraded`),
//!   derived from one [`conditions::Health`] and stamped only when they change;
//! - [`manifests`]: operand templates shipped as YAML, read into objects;
//! - [`placement`]: upstream's `NodePlacement` (`nodeSelector`, `affinity`, `tolerations`);
//! - [`objects`]: the objects an operator owns, rendered as [`objects::Desired`] and applied by
//!   server-side apply through [`objects::Objects`] (a real adapter and a fake);
//! - [`rollout`]: whether a DaemonSet or Deployment has finished rolling out.

pub mod certificates;
pub mod conditions;
pub mod controller;
pub mod duration;
pub mod error_report;
pub mod manifests;
pub mod objects;
pub mod placement;
pub mod rollout;
