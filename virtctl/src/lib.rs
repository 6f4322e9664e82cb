//! virtctl: the command-line client of KubeVirt's subresource API.
//!
//! Its own crate because it is a client: it links kube's client and a terminal, and none of
//! virt-api's server. It reads kubeconfig the way kubectl does ([`connect`]), sends upstream's
//! request bodies ([`commands`]), attaches a terminal to a VMI's serial console ([`console`]),
//! writes VM manifests ([`create_vm`]), expands instance types ([`expand`]), cancels migrations
//! ([`migrate_cancel`]) and uploads disk images through CDI ([`image_upload`]).

/// The API path of the subresource group.
pub const SUBRESOURCES: &str = "/apis/subresources.kubevirt.io/v1";

pub mod cli;
pub mod commands;
pub mod connect;
pub mod console;
pub mod create_vm;
pub mod expand;
pub mod image_upload;
pub mod migrate_cancel;
pub mod volume_import;

/// Why a command failed. Each message is what the user sees after `virtctl: error:`.
#[derive(Debug, thiserror::Error)]
pub enum VirtctlError {
    /// The flags do not make sense together.
    #[error("{0}")]
    Usage(String),
    /// No usable kubeconfig or cluster.
    #[error("cannot load the cluster configuration: {0}")]
    Config(String),
    /// The server refused the request; the message is the server's.
    #[error("{context}: {message}")]
    Refused {
        /// What was attempted, e.g. `Error starting VirtualMachine`.
        context: String,
        /// The server's `metav1.Status` message.
        message: String,
        /// Its HTTP code.
        code: u16,
    },
    /// The request could not be sent.
    #[error("{context}: {source}")]
    Transport {
        /// What was attempted.
        context: String,
        /// Why.
        source: kube::Error,
    },
    /// The console failed.
    #[error("console: {0}")]
    Console(String),
}
