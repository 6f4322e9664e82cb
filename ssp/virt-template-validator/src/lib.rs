//! virt-template-validator: SSP's validating webhook for VirtualMachines. A VM's validation
//! rules (its own `vm.kubevirt.io/validations`, or its template's `validations`) are read
//! ([`rules`]), each rule's path looked up on the VM, or on the reference VM where the VM does
//! not set the field ([`path`], [`reference`]), and the rules evaluated into upstream's reports
//! and decision ([`eval`]); [`sources`] says where the rules come from, and [`review`] reads
//! the webhook's AdmissionReview and answers it; [`server`] serves it over HTTPS.

pub mod eval;
pub mod path;
pub mod reference;
pub mod review;
pub mod rules;
pub mod server;
pub mod sources;

#[cfg(test)]
mod eval_tests;
#[cfg(test)]
mod path_tests;
#[cfg(test)]
mod review_tests;
#[cfg(test)]
mod rules_tests;
