//! CDI's upload server, as upstream's `cdi-uploadserver`: one runs in a pod per claim being
//! uploaded to, behind cdi-uploadproxy, and writes the one upload it takes into the claim with the
//! importer's pipeline (compression off, raw written sparse and qcow2 streamed as they arrive,
//! other formats and a qcow2 that cannot stream converted from the scratch space, the disk grown
//! to the size asked for).
//!
//! - [`config`]: the pod's environment, read.
//! - [`routes`]: upstream's paths; [`session`]: the one upload, as a state machine.
//! - [`form`]: a multipart form's `file` part (the body reaches it through
//!   `cdi_importer::body_pipe`).
//! - [`server`]: HTTPS with client certificates, and the upload itself.

pub mod config;
pub mod form;
pub mod routes;
pub mod server;
pub mod session;
