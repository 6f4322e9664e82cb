//! What virt-handler and virt-launcher say to each other about a live migration: the options the
//! source launcher migrates with, the progress and outcome it reports in its domain snapshot, and
//! the unix sockets in each launcher pod through which the migration's connections go.
//!
//! Inside a launcher pod the migration never touches the pod network: the source's libvirtd and
//! QEMU connect to unix sockets that the source node's virt-handler serves in the pod's
//! `/var/run/kubevirt/migrationproxy/`, and the target's QEMU listens on unix sockets at the same
//! paths in the target pod. The two handlers carry each socket's bytes between the nodes over TCP.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The directory of the migration sockets, under a launcher pod's share directory
/// (`/var/run/kubevirt` in the pod, its `public` emptyDir on the node).
pub const PROXY_DIR: &str = "migrationproxy";
/// QEMU's migration stream: upstream's first direct-migration port.
pub const STREAM_PORT: u16 = 49152;
/// The block-migration (NBD) stream of disks that are copied: upstream's second port.
pub const DISKS_PORT: u16 = 49153;

/// One connection a migration needs between the source and the target pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Channel {
    /// The source libvirtd's connection to the target's libvirtd (peer-to-peer migration).
    Libvirt,
    /// QEMU's memory and device state.
    Stream,
    /// The disks copied by block migration.
    Disks,
}

impl Channel {
    /// Every channel, in the order the proxies open them.
    pub const ALL: [Self; 3] = [Self::Libvirt, Self::Stream, Self::Disks];

    /// The key of this channel in `status.migrationState.targetDirectMigrationNodePorts`-style
    /// maps: the in-pod port upstream gives it, `0` for libvirt's connection.
    #[must_use]
    pub fn port_key(self) -> u16 {
        match self {
            Self::Libvirt => 0,
            Self::Stream => STREAM_PORT,
            Self::Disks => DISKS_PORT,
        }
    }

    /// The channel whose [`Self::port_key`] is `key`.
    #[must_use]
    pub fn from_port_key(key: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.port_key() == key)
    }

    /// The socket's file name for the VMI `uid`, upstream's: `<uid>-source.sock` for libvirt,
    /// `<uid>-<port>-source.sock` for the others.
    #[must_use]
    pub fn socket_name(self, uid: &str) -> String {
        match self {
            Self::Libvirt => format!("{uid}-source.sock"),
            Self::Stream | Self::Disks => format!("{uid}-{}-source.sock", self.port_key()),
        }
    }
}

/// The directory of the launcher's private libvirt daemon, under the pod's private directory.
pub const LAUNCHER_LIBVIRT_DIR: &str = "libvirt-rs";

/// The socket of the launcher's libvirt daemon, under the pod's private directory `private_dir`
/// (its `/var/run/kubevirt-private`): the target node's proxy connects the source's libvirt there.
#[must_use]
pub fn libvirt_socket(private_dir: &Path) -> PathBuf {
    private_dir.join(LAUNCHER_LIBVIRT_DIR).join("sock/libvirt-sock")
}

/// Where `channel`'s socket of the VMI `uid` is, under a pod's share directory `share_dir`.
#[must_use]
pub fn socket_path(share_dir: &Path, uid: &str, channel: Channel) -> PathBuf {
    share_dir.join(PROXY_DIR).join(channel.socket_name(uid))
}

/// How the source launcher migrates (the JSON in `MigrationRequest.options`). The handler fills it
/// from the cluster's migration configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigrationOptions {
    /// The `VirtualMachineInstanceMigration`'s UID.
    pub migration_uid: String,
    /// Bandwidth limit in MiB/s; 0 is unlimited.
    #[serde(default)]
    pub bandwidth_mib_per_second: u64,
    /// Slow the guest's vCPUs down when the migration does not converge.
    #[serde(default)]
    pub allow_auto_converge: bool,
    /// Switch to post-copy when pre-copy runs out of time.
    #[serde(default)]
    pub allow_post_copy: bool,
    /// Migrate even what libvirt considers unsafe (`unsafeMigrationOverride`).
    #[serde(default)]
    pub unsafe_migration: bool,
    /// Seconds per GiB of data to move before the migration is aborted (or switched to post-copy).
    pub completion_timeout_per_gib: u64,
    /// Seconds without progress before the migration is aborted.
    pub progress_timeout_seconds: u64,
    /// The longest pause of the guest at the switch-over, in milliseconds; unset leaves QEMU's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_downtime_ms: Option<u64>,
}

/// Whether an abort was asked for and how it ended (upstream's `abortStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AbortStatus {
    /// The abort is under way.
    Aborting,
    /// The migration was aborted.
    Succeeded,
    /// The migration could not be aborted (it had already finished).
    Failed,
}

/// How the migration moves memory (upstream's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MigrationMode {
    /// Memory is copied while the guest runs, then the guest stops for the last pages.
    PreCopy,
    /// The guest runs on the target and fetches the pages it has not got yet.
    PostCopy,
}

/// The migration's progress, from libvirt's job statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationProgress {
    /// Bytes moved so far.
    pub data_processed_bytes: u64,
    /// Bytes still to move.
    pub data_remaining_bytes: u64,
    /// Bytes in all.
    pub data_total_bytes: u64,
    /// Pages the guest dirties per second.
    pub dirty_rate_pages_per_second: u64,
    /// Passes over memory so far.
    pub memory_iterations: u64,
}

/// The migration as the source launcher reports it, in its domain snapshot's metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationMetadata {
    /// The `VirtualMachineInstanceMigration`'s UID.
    pub uid: String,
    /// When it started (RFC 3339).
    pub start_timestamp: Option<String>,
    /// When it ended (RFC 3339).
    pub end_timestamp: Option<String>,
    /// The guest runs on the target now.
    pub completed: bool,
    /// It failed or was aborted; the guest runs here.
    pub failed: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failure_reason: String,
    /// Set once an abort is asked for.
    pub abort_status: Option<AbortStatus>,
    /// Pre-copy, or post-copy once switched.
    pub mode: Option<MigrationMode>,
    /// The last progress read.
    pub progress: Option<MigrationProgress>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_have_upstreams_names_under_the_proxy_directory() {
        let share = Path::new("/var/run/kubevirt");
        assert_eq!(
            socket_path(share, "u1", Channel::Libvirt),
            Path::new("/var/run/kubevirt/migrationproxy/u1-source.sock")
        );
        assert_eq!(
            socket_path(share, "u1", Channel::Stream),
            Path::new("/var/run/kubevirt/migrationproxy/u1-49152-source.sock")
        );
        assert_eq!(
            socket_path(share, "u1", Channel::Disks),
            Path::new("/var/run/kubevirt/migrationproxy/u1-49153-source.sock")
        );
        for channel in Channel::ALL {
            assert_eq!(Channel::from_port_key(channel.port_key()), Some(channel));
        }
        assert_eq!(Channel::from_port_key(22), None);
    }

    #[test]
    fn options_refuse_unknown_fields_and_need_the_timeouts() {
        let json = r#"{"migrationUid":"m","completionTimeoutPerGib":150,"progressTimeoutSeconds":150}"#;
        let options: MigrationOptions = serde_json::from_str(json).expect("options");
        assert_eq!(options.completion_timeout_per_gib, 150);
        assert!(!options.allow_post_copy);
        let error = serde_json::from_str::<MigrationOptions>(r#"{"migrationUid":"m","bogus":1}"#)
            .expect_err("unknown field")
            .to_string();
        assert!(error.contains("bogus"), "{error}");
        assert!(serde_json::from_str::<MigrationOptions>(r#"{"migrationUid":"m"}"#).is_err());
    }
}
