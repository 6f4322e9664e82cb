//! CDI's API server, as upstream's `cdi-apiserver`, for the aggregated API
//! `upload.cdi.kubevirt.io/v1beta1`: it issues upload tokens (`UploadTokenRequest`) to callers the
//! API server's SubjectAccessReview allows to `create` `uploadtokenrequests` in the namespace.
//! It also serves the DataVolume mutating webhook that checks a clone's right to its source
//! ([`clone_admission`]); upstream's other admission webhooks are not served yet.
//!
//! - [`routes`]: its paths and discovery documents; [`review`]: the SubjectAccessReview of a
//!   request; [`token_request`]: a request's token.
//! - [`server`]: HTTPS for the aggregation layer, and the reviews through the API server.

pub mod clone_admission;
pub mod review;
pub mod routes;
pub mod server;
pub mod token_request;
pub mod uninstall_admission;

/// The API group.
pub const GROUP: &str = "upload.cdi.kubevirt.io";
/// Its version.
pub const VERSION: &str = "v1beta1";
/// The resource.
pub const RESOURCE: &str = "uploadtokenrequests";
/// Its kind.
pub const KIND: &str = "UploadTokenRequest";
