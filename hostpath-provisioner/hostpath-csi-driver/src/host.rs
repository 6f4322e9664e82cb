//! The node as the driver changes it: volume directories, their space, and bind mounts into
//! pods. [`RealHost`] does it; [`fake::FakeHost`] (tests only) keeps it in memory.

use std::io;
use std::path::Path;

use crate::mount_options::BindOptions;

#[cfg(any(test, feature = "host-tests"))]
pub mod fake;

/// A filesystem's space, as statvfs gives it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Space {
    /// Bytes in all.
    pub total: u64,
    /// Bytes an unprivileged user may still use.
    pub available: u64,
    /// Bytes free (to root).
    pub free: u64,
    /// Inodes in all.
    pub inodes: u64,
    /// Inodes free.
    pub inodes_free: u64,
}

/// What the driver does to the node.
pub trait Host: Send + Sync + 'static {
    /// Makes `path` and its parents (one already there counts), readable and writable by all, as
    /// upstream's volumes are.
    ///
    /// # Errors
    /// The system's.
    fn make_dir(&self, path: &Path) -> io::Result<()>;
    /// Removes `path` and what it holds; one not there counts as removed.
    ///
    /// # Errors
    /// The system's.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Removes the empty directory `path` (a publish target); one not there counts as removed.
    ///
    /// # Errors
    /// The system's: a directory that is not empty (still mounted) stays.
    fn remove_empty_dir(&self, path: &Path) -> io::Result<()>;
    /// Whether `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// The space of the filesystem holding `path`.
    ///
    /// # Errors
    /// The system's.
    fn space(&self, path: &Path) -> io::Result<Space>;
    /// Whether `path` is a mount point.
    ///
    /// # Errors
    /// The system's.
    fn is_mount_point(&self, path: &Path) -> io::Result<bool>;
    /// Bind-mounts `source` on `target` with `options`; nothing stays mounted when applying
    /// them fails.
    ///
    /// # Errors
    /// The system's.
    fn bind_mount(&self, source: &Path, target: &Path, options: BindOptions) -> io::Result<()>;
    /// Unmounts `target`.
    ///
    /// # Errors
    /// The system's.
    fn unmount(&self, target: &Path) -> io::Result<()>;
}

/// The node itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealHost;

impl Host for RealHost {
    fn make_dir(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::create_dir_all(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn remove_empty_dir(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_dir(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn space(&self, path: &Path) -> io::Result<Space> {
        let stats = nix::sys::statvfs::statvfs(path)?;
        let block = stats.fragment_size();
        Ok(Space {
            total: stats.blocks().saturating_mul(block),
            available: stats.blocks_available().saturating_mul(block),
            free: stats.blocks_free().saturating_mul(block),
            inodes: stats.files(),
            inodes_free: stats.files_free(),
        })
    }

    fn is_mount_point(&self, path: &Path) -> io::Result<bool> {
        let path = match std::fs::canonicalize(path) {
            Ok(path) => path,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        Ok(mount_points(&mountinfo).any(|point| Path::new(&point) == path))
    }

    fn bind_mount(&self, source: &Path, target: &Path, options: BindOptions) -> io::Result<()> {
        use nix::mount::{MsFlags, mount};
        mount(Some(source), target, None::<&str>, MsFlags::MS_BIND, None::<&str>)?;
        if options.any() {
            // A bind takes its flags only from a remount of it.
            let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT;
            for (on, flag) in [
                (options.read_only, MsFlags::MS_RDONLY),
                (options.no_suid, MsFlags::MS_NOSUID),
                (options.no_dev, MsFlags::MS_NODEV),
                (options.no_exec, MsFlags::MS_NOEXEC),
                (options.no_atime, MsFlags::MS_NOATIME),
            ] {
                if on {
                    flags |= flag;
                }
            }
            if let Err(e) = mount(None::<&str>, target, None::<&str>, flags, None::<&str>) {
                let _ = nix::mount::umount(target);
                return Err(e.into());
            }
        }
        Ok(())
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        Ok(nix::mount::umount(target)?)
    }
}

/// The mount points `/proc/self/mountinfo` lists (its fifth field, octal escapes undone).
fn mount_points(mountinfo: &str) -> impl Iterator<Item = String> + '_ {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_octal)
}

fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(digits) = std::str::from_utf8(&bytes[i + 1..i + 4])
            && let Ok(value) = u8::from_str_radix(digits, 8)
        {
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_with_their_escapes() {
        let mountinfo = "22 1 8:1 / / rw - ext4 /dev/vda rw\n\
                         40 22 0:5 / /var/lib/kubelet/pods/a\\040b/volumes rw - tmpfs tmpfs rw\n";
        let points: Vec<String> = mount_points(mountinfo).collect();
        assert_eq!(points, ["/", "/var/lib/kubelet/pods/a b/volumes"]);
    }
}
