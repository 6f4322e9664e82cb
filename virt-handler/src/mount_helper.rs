//! The mount helper: the handler binary run as `virt-handler node-mount NAMESPACE ...` by
//! [`crate::node_mounts::HostMounts`], as upstream's `virt-chroot`. It enters the node's mount
//! namespace (only a process without threads can) and makes or removes one read-only bind mount.
//!
//! Both ends are under the control of a pod: the image's files (the sidecar's root) and the
//! mount point (the pod's emptyDir, which the launcher can write). So neither is resolved as a
//! path: each is walked component by component from a trusted directory with `O_NOFOLLOW`,
//! refusing symbolic links and `..`, and the mount is made between the file descriptors found,
//! so that nothing can be swapped between the check and the mount.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path};
use std::process::ExitCode;

use nix::errno::Errno;
use nix::fcntl::{OFlag, open, openat};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::stat::{Mode, SFlag, fstat, mkdirat};

/// The first argument that turns the handler binary into the mount helper.
pub const HELPER_COMMAND: &str = "node-mount";

/// When the arguments ask for the helper (`node-mount NAMESPACE bind ROOT FILE DIR TARGET`, or
/// `node-mount NAMESPACE unmount TARGET`), does it and returns the exit code; otherwise `None`.
/// Must run before any thread starts.
#[must_use]
pub fn run_helper(args: &[OsString]) -> Option<ExitCode> {
    if args.get(1).and_then(|a| a.to_str()) != Some(HELPER_COMMAND) {
        return None;
    }
    Some(match helper(&args[2..]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    })
}

const USAGE: &str =
    "node-mount: usage: node-mount NAMESPACE bind ROOT FILE DIR TARGET | node-mount NAMESPACE unmount TARGET";

pub(crate) fn helper(args: &[OsString]) -> Result<(), String> {
    let args: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
    let (namespace, rest) = args.split_first().ok_or("node-mount: no namespace given")?;
    let namespace = Path::new(namespace);
    let file = std::fs::File::open(namespace).map_err(|e| format!("cannot open {}: {e}", namespace.display()))?;
    nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("cannot enter the mount namespace {}: {e}", namespace.display()))?;
    match rest {
        [command, root, file, dir, target] if *command == "bind" => {
            bind(Path::new(root), Path::new(file), Path::new(dir), Path::new(target))
        }
        [command, target] if *command == "unmount" => {
            umount2(*target, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW)
                .map_err(|e| format!("unmount {}: {e}", Path::new(target).display()))
        }
        _ => Err(USAGE.to_owned()),
    }
}

/// The names of `path`'s components, refusing `..`; `path` is taken relative to where it is
/// walked from.
fn names(path: &Path) -> Result<Vec<&OsStr>, String> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Ok(name)),
            Component::RootDir | Component::CurDir => None,
            Component::ParentDir | Component::Prefix(_) => Some(Err(format!("{} has a .. component", path.display()))),
        })
        .collect()
}

fn open_dir(path: &Path) -> Result<OwnedFd, String> {
    open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// Opens `name` in `dir` without following a symbolic link (an `O_PATH` descriptor of the link
/// itself, which [`is_regular_file`] then refuses).
fn open_no_follow(dir: &OwnedFd, name: &OsStr, extra: OFlag) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | extra,
        Mode::empty(),
    )
}

fn is_regular_file(fd: &OwnedFd) -> bool {
    fstat(fd).is_ok_and(|s| SFlag::from_bits_truncate(s.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG)
}

/// The regular file `file` under `root`, reached without following any symbolic link.
fn open_source(root: &Path, file: &Path) -> Result<OwnedFd, String> {
    let mut current = open_dir(root)?;
    let names = names(file)?;
    let (last, parents) = names
        .split_last()
        .ok_or_else(|| format!("{} names no file", file.display()))?;
    for name in parents {
        current = open_no_follow(&current, name, OFlag::O_DIRECTORY)
            .map_err(|e| format!("{} in the image: {e} (a symbolic link is refused)", file.display()))?;
    }
    let found =
        open_no_follow(&current, last, OFlag::empty()).map_err(|e| format!("{} in the image: {e}", file.display()))?;
    if !is_regular_file(&found) {
        return Err(format!("{} in the image is not a regular file", file.display()));
    }
    Ok(found)
}

/// The mount point `target` under `dir`, made when missing (directories on the way, then an empty
/// file), without following any symbolic link; with the directory that holds it.
fn open_mount_point(dir: &Path, target: &Path) -> Result<(OwnedFd, OwnedFd), String> {
    let mut current = open_dir(dir)?;
    let names = names(target)?;
    let (last, parents) = names
        .split_last()
        .ok_or_else(|| format!("{} names no file", target.display()))?;
    for name in parents {
        match mkdirat(&current, *name, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(format!("cannot create {}: {e}", target.display())),
        }
        current = open_no_follow(&current, name, OFlag::O_DIRECTORY)
            .map_err(|e| format!("{}: {e} (a symbolic link is refused)", target.display()))?;
    }
    let created = openat(
        &current,
        *last,
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    );
    match created {
        Ok(_) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(format!("cannot create {}: {e}", target.display())),
    }
    let point = open_no_follow(&current, last, OFlag::empty()).map_err(|e| format!("{}: {e}", target.display()))?;
    if !is_regular_file(&point) {
        return Err(format!(
            "{} is not a regular file (a symbolic link is refused)",
            target.display()
        ));
    }
    Ok((current, point))
}

fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// Bind-mounts `root`/`file` onto `dir`/`target`, read-only.
fn bind(root: &Path, file: &Path, dir: &Path, target: &Path) -> Result<(), String> {
    let source = open_source(root, file)?;
    let (parent, point) = open_mount_point(dir, target)?;
    mount(
        Some(fd_path(&source).as_str()),
        fd_path(&point).as_str(),
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| format!("bind {} on {}: {e}", file.display(), target.display()))?;
    // The new mount, reached through the directory already open: a mount point cannot be
    // renamed or removed, so this is the mount just made.
    let last = names(target)?.pop().ok_or("no target")?;
    let mounted = open_no_follow(&parent, last, OFlag::empty()).map_err(|e| format!("{}: {e}", target.display()))?;
    let read_only = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    mount(
        None::<&str>,
        fd_path(&mounted).as_str(),
        None::<&str>,
        read_only,
        None::<&str>,
    )
    .map_err(|e| {
        let _ = umount2(fd_path(&mounted).as_str(), MntFlags::MNT_DETACH);
        format!("remount {} read-only: {e}", target.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn other_arguments_are_not_the_helper() {
        assert!(run_helper(&args(&["virt-handler", "--port", "8443"])).is_none());
    }

    #[test]
    fn the_helper_refuses_a_missing_namespace_with_its_path() {
        assert_eq!(
            helper(&args(&["/nonexistent/ns/mnt", "unmount", "/x"])),
            Err("cannot open /nonexistent/ns/mnt: No such file or directory (os error 2)".to_owned())
        );
        assert_eq!(helper(&[]), Err("node-mount: no namespace given".to_owned()));
    }

    #[test]
    fn parent_components_are_refused() {
        assert_eq!(
            names(Path::new("/disk/../../etc/shadow")),
            Err("/disk/../../etc/shadow has a .. component".to_owned())
        );
        assert_eq!(
            names(Path::new("/boot/./vmlinuz")),
            Ok(vec![OsStr::new("boot"), OsStr::new("vmlinuz")])
        );
    }

    #[test]
    fn symbolic_links_on_either_side_are_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("disk")).expect("disk dir");
        std::fs::write(root.join("disk/real.qcow2"), b"data").expect("file");
        std::os::unix::fs::symlink("/etc/passwd", root.join("disk/link.qcow2")).expect("link");
        std::os::unix::fs::symlink("disk", root.join("linked")).expect("dir link");
        assert!(open_source(&root, Path::new("/disk/real.qcow2")).is_ok());
        let refused = |result: Result<OwnedFd, String>| result.expect_err("refused");
        assert_eq!(
            refused(open_source(&root, Path::new("/disk/link.qcow2"))),
            "/disk/link.qcow2 in the image is not a regular file"
        );
        assert!(refused(open_source(&root, Path::new("/linked/real.qcow2"))).contains("a symbolic link is refused"));
        assert!(refused(open_source(&root, Path::new("/disk"))).contains("is not a regular file"));

        let pod = tmp.path().join("container-disks");
        std::fs::create_dir_all(&pod).expect("pod dir");
        let (_, point) = open_mount_point(&pod, Path::new("kernel-boot/vmlinuz")).expect("made");
        assert!(is_regular_file(&point) && pod.join("kernel-boot/vmlinuz").is_file());
        std::os::unix::fs::symlink("/etc/cron.d/x", pod.join("disk_0.img")).expect("planted link");
        let error = open_mount_point(&pod, Path::new("disk_0.img"))
            .map(|_| ())
            .expect_err("refused");
        assert!(error.contains("a symbolic link is refused"), "{error}");
        assert!(!Path::new("/etc/cron.d/x").exists(), "nothing made through the link");
        std::os::unix::fs::symlink("/etc", pod.join("elsewhere")).expect("planted dir link");
        let error = open_mount_point(&pod, Path::new("elsewhere/x"))
            .map(|_| ())
            .expect_err("refused");
        assert!(error.contains("a symbolic link is refused"), "{error}");
    }
}
