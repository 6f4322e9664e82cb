use std::os::unix::fs::MetadataExt as _;

use super::*;

/// A launcher root with the hostDisk volume `disk`'s directory, as the kubelet mounts it.
fn launcher_root() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("var/run/kubevirt-private/vmi-disks/disk");
    std::fs::create_dir_all(&dir).expect("volume dir");
    (root, dir)
}

fn vmi(disk_type: &str, capacity: Option<&str>) -> VirtualMachineInstance {
    let mut host = serde_json::json!({"path": "/var/lib/images/data.img", "type": disk_type});
    if let Some(capacity) = capacity {
        host["capacity"] = capacity.into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "default"},
        "spec": {"domain": {"devices": {}}, "volumes": [
            {"name": "boot", "containerDisk": {"image": "img"}},
            {"name": "disk", "hostDisk": host}
        ]}
    }))
    .expect("VMI")
}

const OWNER: u32 = 107;

#[test]
fn a_missing_disk_or_create_image_is_made_sparse_at_its_capacity_and_given_to_the_launcher() {
    let (root, dir) = launcher_root();
    let prepared = prepare(root.path(), &vmi("DiskOrCreate", Some("64Mi")), OWNER).expect("prepared");
    let image = dir.join("data.img");
    assert_eq!(prepared, std::slice::from_ref(&image));
    let meta = std::fs::metadata(&image).expect("the image");
    assert_eq!(meta.len(), 64 << 20);
    assert!(meta.blocks() < 64, "sparse: {} blocks", meta.blocks());
    assert_eq!((meta.uid(), meta.gid()), (OWNER, OWNER));
    assert_eq!(meta.mode() & 0o777, 0o660);
}

#[test]
fn an_existing_image_keeps_its_data_and_length_and_is_given_to_the_launcher() {
    let (root, dir) = launcher_root();
    std::fs::write(dir.join("data.img"), b"guest data").expect("image");
    prepare(root.path(), &vmi("DiskOrCreate", Some("1Gi")), OWNER).expect("prepared");
    assert_eq!(std::fs::read(dir.join("data.img")).expect("image"), b"guest data");
    let meta = std::fs::metadata(dir.join("data.img")).expect("image");
    assert_eq!((meta.uid(), meta.gid()), (OWNER, OWNER));
}

#[test]
fn a_disk_image_is_the_users_and_left_alone() {
    let (root, dir) = launcher_root();
    std::fs::write(dir.join("data.img"), b"x").expect("image");
    assert!(
        prepare(root.path(), &vmi("Disk", None), OWNER)
            .expect("nothing")
            .is_empty()
    );
    assert_eq!(std::fs::metadata(dir.join("data.img")).expect("image").uid(), 0);
}

#[test]
fn a_link_in_the_pod_never_reaches_a_file_of_the_node() {
    let node = tempfile::tempdir().expect("node");
    let secret = node.path().join("secret");
    std::fs::write(&secret, b"node's").expect("node file");
    // The image is a link to the node's file.
    let (root, dir) = launcher_root();
    std::os::unix::fs::symlink(&secret, dir.join("data.img")).expect("link");
    let error = prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).expect_err("a link");
    assert!(error.to_string().contains("spec.volumes[1].hostDisk.path"), "{error}");
    // The volume's directory is a link to the node's directory: it resolves inside the root,
    // where there is no such directory.
    let (root, dir) = launcher_root();
    std::fs::remove_dir(&dir).expect("rmdir");
    std::os::unix::fs::symlink(node.path(), &dir).expect("link");
    let error = prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).expect_err("outside");
    assert!(matches!(error, HostDiskError::Io { .. }), "{error}");
    assert_eq!(
        std::fs::metadata(&secret).expect("node file").uid(),
        0,
        "the node's file is not given away"
    );
    assert!(!node.path().join("data.img").exists(), "nothing is created on the node");
}

#[test]
fn a_directory_in_place_of_the_image_is_refused() {
    let (root, dir) = launcher_root();
    std::fs::create_dir(dir.join("data.img")).expect("dir");
    let error = prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).expect_err("a directory");
    assert!(error.to_string().contains("spec.volumes[1].hostDisk.path"), "{error}");
}

#[test]
fn a_missing_or_bad_capacity_names_its_field() {
    let (root, _dir) = launcher_root();
    for capacity in [None, Some("lots")] {
        let error = prepare(root.path(), &vmi("DiskOrCreate", capacity), OWNER).expect_err("capacity");
        assert!(
            error.to_string().starts_with("spec.volumes[1].hostDisk.capacity: "),
            "{error}"
        );
    }
}
