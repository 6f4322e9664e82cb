//! What a volume capability's `mount` may ask of a volume that is a directory bind-mounted into
//! the pod: the mount flags a bind mount can honour (from the PersistentVolume's `mountOptions`),
//! applied by remounting the bind; anything else is refused by name. A directory has no
//! filesystem type of its own (`fs_type`), and the driver does not advertise
//! `VOLUME_MOUNT_GROUP` (`volume_mount_group`).

use tonic::Status;

use crate::csi::volume_capability::MountVolume;

/// The flags of a bind mount, as the mount(2) remount of the bind sets them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is one mount(2) flag, named as mount(8) names it"
)]
pub struct BindOptions {
    /// `ro`, or the publish request's `readonly`.
    pub read_only: bool,
    /// `nosuid`.
    pub no_suid: bool,
    /// `nodev`.
    pub no_dev: bool,
    /// `noexec`.
    pub no_exec: bool,
    /// `noatime`.
    pub no_atime: bool,
}

/// The flags a bind mount honours (`rw` and `bind` are what it is anyway).
pub const SUPPORTED_FLAGS: &[&str] = &["ro", "rw", "bind", "nosuid", "nodev", "noexec", "noatime"];

impl BindOptions {
    /// The options of `mount`, read-only as well when `read_only`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the field or flag that cannot be honoured.
    pub fn from_mount(mount: &MountVolume, read_only: bool) -> Result<Self, Status> {
        if !mount.fs_type.is_empty() {
            return Err(Status::invalid_argument(format!(
                "volume_capability.mount.fs_type {:?}: a hostpath volume is a directory of its pool's filesystem and has no filesystem type of its own",
                mount.fs_type
            )));
        }
        if !mount.volume_mount_group.is_empty() {
            return Err(Status::invalid_argument(
                "volume_capability.mount.volume_mount_group: not supported (the driver does not advertise VOLUME_MOUNT_GROUP; the kubelet applies fsGroup)",
            ));
        }
        let mut options = Self {
            read_only,
            ..Self::default()
        };
        for flag in &mount.mount_flags {
            match flag.as_str() {
                "ro" => options.read_only = true,
                "rw" | "bind" => {}
                "nosuid" => options.no_suid = true,
                "nodev" => options.no_dev = true,
                "noexec" => options.no_exec = true,
                "noatime" => options.no_atime = true,
                other => {
                    return Err(Status::invalid_argument(format!(
                        "volume_capability.mount.mount_flags: {other:?} cannot be applied to a bind mount of a directory (supported: {})",
                        SUPPORTED_FLAGS.join(", ")
                    )));
                }
            }
        }
        Ok(options)
    }

    /// Whether the bind needs a remount to apply any flag.
    #[must_use]
    pub fn any(&self) -> bool {
        *self != Self::default()
    }

    /// The flags as mount(8) writes them, comma-separated (empty when none).
    #[must_use]
    pub fn describe(&self) -> String {
        [
            (self.read_only, "ro"),
            (self.no_suid, "nosuid"),
            (self.no_dev, "nodev"),
            (self.no_exec, "noexec"),
            (self.no_atime, "noatime"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(fs_type: &str, flags: &[&str], group: &str) -> MountVolume {
        MountVolume {
            fs_type: fs_type.to_owned(),
            mount_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            volume_mount_group: group.to_owned(),
        }
    }

    #[test]
    fn the_flags_a_bind_mount_honours_are_taken() {
        let options = BindOptions::from_mount(
            &mount("", &["nosuid", "nodev", "noexec", "noatime", "rw", "bind"], ""),
            false,
        )
        .expect("supported flags");
        assert_eq!(options.describe(), "nosuid,nodev,noexec,noatime");
        assert!(options.any());
        let read_only = BindOptions::from_mount(&mount("", &["ro"], ""), false).expect("ro");
        assert_eq!(
            read_only,
            BindOptions::from_mount(&mount("", &[], ""), true).expect("readonly")
        );
        assert_eq!(read_only.describe(), "ro");
        assert!(!BindOptions::from_mount(&mount("", &[], ""), false).expect("none").any());
    }

    #[test]
    fn what_a_directory_cannot_honour_is_refused_by_name() {
        let cases = [
            (mount("ext4", &[], ""), "volume_capability.mount.fs_type \"ext4\""),
            (mount("", &[], "1000"), "volume_capability.mount.volume_mount_group"),
            (mount("", &["nosuid", "discard"], ""), "mount_flags: \"discard\""),
            (mount("", &["size=1G"], ""), "mount_flags: \"size=1G\""),
        ];
        for (mount, message) in cases {
            let status = BindOptions::from_mount(&mount, false).expect_err("refused");
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
            assert!(status.message().contains(message), "{}", status.message());
        }
    }
}
