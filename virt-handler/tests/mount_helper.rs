//! The mount helper as virt-handler runs it (`virt-handler node-mount ...`), for real, as root:
//! it bind-mounts an image's file onto a mount point it makes, read-only, unmounts it, and refuses
//! symbolic links a pod could plant on either side.

use std::path::{Path, PathBuf};
use std::process::Command;

fn helper(args: &[&Path]) -> Result<(), String> {
    let namespace = format!("/proc/{}/ns/mnt", std::process::id());
    let output = Command::new(env!("CARGO_BIN_EXE_virt-handler"))
        .arg("node-mount")
        .arg(namespace)
        .args(args)
        .output()
        .expect("run the helper");
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

/// Unmounts what a failed test left mounted.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn the_helper_mounts_an_images_file_read_only_and_unmounts_it() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the mount helper test needs root"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("rootfs");
    std::fs::create_dir_all(root.join("boot")).expect("image dirs");
    std::fs::write(root.join("boot/vmlinuz"), b"KERNEL").expect("image file");
    let pod = tmp.path().join("container-disks");
    std::fs::create_dir_all(&pod).expect("pod dir");
    let target = pod.join("kernel-boot/vmlinuz");
    let _guard = Unmount(target.clone());

    helper(&[
        Path::new("bind"),
        &root,
        Path::new("/boot/vmlinuz"),
        &pod,
        Path::new("kernel-boot/vmlinuz"),
    ])
    .expect("mounted");
    assert_eq!(std::fs::read(&target).expect("read"), b"KERNEL");
    let write = std::fs::OpenOptions::new().write(true).open(&target);
    assert_eq!(
        write.expect_err("read-only").raw_os_error(),
        Some(nix::libc::EROFS),
        "the mount is read-only"
    );
    helper(&[Path::new("unmount"), &target]).expect("unmounted");
    assert_eq!(
        std::fs::read(&target).expect("read"),
        b"",
        "the empty mount point is back"
    );
}

#[test]
fn the_helper_refuses_symbolic_links_planted_on_either_side() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the mount helper test needs root"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("rootfs");
    std::fs::create_dir_all(root.join("disk")).expect("image dirs");
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, b"SECRET").expect("secret");
    std::os::unix::fs::symlink(&secret, root.join("disk/disk.img")).expect("image link");
    std::fs::write(root.join("disk/real.img"), b"DISK").expect("image file");
    let pod = tmp.path().join("container-disks");
    std::fs::create_dir_all(&pod).expect("pod dir");
    let elsewhere = tmp.path().join("node-file");
    std::os::unix::fs::symlink(&elsewhere, pod.join("disk_0.img")).expect("planted link");
    let _guards = [Unmount(pod.join("disk_0.img")), Unmount(pod.join("disk_1.img"))];

    let error = helper(&[
        Path::new("bind"),
        &root,
        Path::new("/disk/disk.img"),
        &pod,
        Path::new("disk_1.img"),
    ])
    .expect_err("a linked image file is refused");
    assert_eq!(error, "/disk/disk.img in the image is not a regular file");
    let error = helper(&[
        Path::new("bind"),
        &root,
        Path::new("/disk/real.img"),
        &pod,
        Path::new("disk_0.img"),
    ])
    .expect_err("a linked mount point is refused");
    assert!(error.contains("a symbolic link is refused"), "{error}");
    assert!(!elsewhere.exists(), "nothing was made where the link points");
    let error = helper(&[
        Path::new("bind"),
        &root,
        Path::new("/disk/../../secret"),
        &pod,
        Path::new("disk_1.img"),
    ])
    .expect_err(".. is refused");
    assert_eq!(error, "/disk/../../secret has a .. component");
}
