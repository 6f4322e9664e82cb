//! cdi-operator: a `CDI` CR (`cdi.kubevirt.io/v1beta1`, cluster-scoped) into CDI on the cluster,
//! as upstream's operator installs it: CDI's CRDs, cdi-controller, cdi-apiserver and
//! cdi-uploadproxy with their RBAC, Services, the upload APIService and the DataVolume webhook
//! ([`render`]), their certificates with rotation ([`certificates`]), and the CR's phase and
//! conditions ([`status`]). Each pass is [`reconciler::reconcile`].

pub mod certificates;
pub mod reconciler;
pub mod render;
pub mod status;
