//! Why the launcher's libvirtd could not be configured, started or reached: one error for its
//! configuration ([`super::daemon_config`]) and its life ([`super::daemons`]).

use std::path::PathBuf;
use std::time::Duration;

use super::reaper::ReaperError;

/// Why the daemons could not be started.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A configuration file could not be written.
    #[error("cannot write libvirt configuration in {path}")]
    Config {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A daemon could not be started.
    #[error(transparent)]
    Spawn(#[from] ReaperError),
    /// libvirtd did not serve in time.
    #[error("libvirtd did not serve on {socket} within {timeout:?} ({reason}); see {log}")]
    NotReady {
        /// The socket.
        socket: PathBuf,
        /// How long we waited.
        timeout: Duration,
        /// What was missing.
        reason: NotServing,
        /// libvirtd's log.
        log: PathBuf,
    },
}

/// Why the daemon is not serving.
#[derive(Debug, thiserror::Error)]
pub enum NotServing {
    /// Its socket does not accept connections.
    #[error("its socket accepts no connection")]
    NoSocket,
    /// A connection got no answer in time.
    #[error("a connection got no answer")]
    NoAnswer,
    /// A connection was refused.
    #[error("a connection failed: {0}")]
    Refused(crate::libvirt::DomainError),
}
