//! The `subresources.kubevirt.io` API: discovery, the start, stop, restart, pause, unpause and
//! console subresources ([`lifecycle`] decides, `routes` reads and writes through the traits),
//! `migrate` ([`migrate`]) and `expand-spec` ([`expand_spec`]).

pub mod authorize;
pub mod discovery;
pub mod expand_spec;
pub mod lifecycle;
pub mod migrate;
pub(crate) mod routes;
pub use routes::CONSOLE_SUBPROTOCOL;
pub mod status;

pub use status::ApiStatus;
