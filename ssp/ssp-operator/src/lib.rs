//! SSP's operator, as upstream's ssp-operator for its template validator: it turns an `SSP` CR
//! ([`api`], its CRD in [`crd`]) into `virt-template-validator`, its webhook configuration and
//! its certificates ([`render`]), and reports upstream's phases and conditions ([`status`]).
//! [`reconciler`] is one pass; the binary is its wiring.

pub mod api;
pub mod crd;
pub mod reconciler;
pub mod render;
pub mod status;
