//! The real bind mount (root): a volume's directory mounted on a pod's target with the mount
//! flags a PersistentVolume's `mountOptions` give, as the kernel then reports them.

#![cfg(feature = "host-tests")]

use std::path::Path;

use hostpath_csi_driver::host::{Host as _, RealHost};
use hostpath_csi_driver::mount_options::BindOptions;

/// The options `/proc/self/mountinfo` gives the mount on `target` (its sixth field).
fn mount_options_of(target: &Path) -> Option<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    mountinfo.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        (fields.get(4).map(Path::new) == Some(target)).then(|| fields[5].to_owned())
    })
}

#[test]
fn the_flags_reach_the_kernels_mount() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("pvc-1");
    let target = dir.path().join("target");
    std::fs::create_dir(&source).expect("source");
    std::fs::create_dir(&target).expect("target");
    let host = RealHost;
    let options = BindOptions {
        read_only: true,
        no_suid: true,
        no_dev: true,
        no_exec: true,
        no_atime: true,
    };
    host.bind_mount(&source, &target, options).expect("bind mount");
    let seen = mount_options_of(&target);
    host.unmount(&target).expect("unmount");
    let seen = seen.expect("the target is a mount point");
    let flags: Vec<&str> = seen.split(',').collect();
    for flag in ["ro", "nosuid", "nodev", "noexec", "noatime"] {
        assert!(flags.contains(&flag), "{flag} in {seen}");
    }

    // Without options the bind stays read-write with the source's flags.
    host.bind_mount(&source, &target, BindOptions::default())
        .expect("bind mount");
    let seen = mount_options_of(&target);
    host.unmount(&target).expect("unmount");
    let seen = seen.expect("the target is a mount point");
    assert!(seen.split(',').any(|f| f == "rw"), "{seen}");
}
