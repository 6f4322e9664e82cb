//! CDI's upload proxy, as upstream's `cdi-uploadproxy`: the one endpoint clients upload to
//! (`virtctl image-upload`, the web console). It takes the target claim from the request's
//! upload token (signed by cdi-apiserver), never from the request, waits briefly for the claim's
//! upload server to be ready, and streams the request to it over TLS with the proxy's client
//! certificate, and the answer back.
//!
//! - [`routes`]: upstream's paths and CORS; [`claims`]: the target claim, read.
//! - [`proxy`]: the server and the forwarding.

pub mod claims;
pub mod proxy;
pub mod routes;
