//! These tests give files away to uid 107 and check owners, so they need root, as `make test` (feature
//! host-tests) does.
#![cfg(feature = "host-tests")]

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
    assert_eq!(prepared.images, std::slice::from_ref(&image));
    assert!(prepared.tolerated.is_empty());
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
            .images
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
    // So is a relative escape.
    let (root, dir) = launcher_root();
    std::fs::remove_dir(&dir).expect("rmdir");
    let up = "../".repeat(20)
        + node
            .path()
            .strip_prefix("/")
            .expect("absolute")
            .to_str()
            .expect("utf-8");
    std::os::unix::fs::symlink(up, &dir).expect("link");
    assert!(prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).is_err());
    assert_eq!(
        std::fs::metadata(&secret).expect("node file").uid(),
        0,
        "the node's file is not given away"
    );
    assert!(!node.path().join("data.img").exists(), "nothing is created on the node");
}

#[test]
fn an_image_that_is_a_link_to_a_file_in_the_pod_is_neither_followed_nor_given_away() {
    let (root, dir) = launcher_root();
    let other = dir.join("other.img");
    std::fs::write(&other, b"x").expect("other");
    std::os::unix::fs::symlink(
        "/var/run/kubevirt-private/vmi-disks/disk/other.img",
        dir.join("data.img"),
    )
    .expect("link");
    let error = prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).expect_err("a link");
    assert!(error.to_string().contains("a symbolic link"), "{error}");
    assert_eq!(std::fs::metadata(&other).expect("other").uid(), 0);
}

#[test]
fn an_image_with_other_names_is_refused() {
    let (root, dir) = launcher_root();
    let other = dir.join("other.img");
    std::fs::write(&other, b"x").expect("other");
    std::fs::hard_link(&other, dir.join("data.img")).expect("hard link");
    let error = prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).expect_err("hard link");
    assert!(error.to_string().contains("hard links"), "{error}");
    assert_eq!(std::fs::metadata(&other).expect("other").uid(), 0);
}

#[test]
fn a_pipe_in_place_of_the_image_is_refused_without_being_opened() {
    let (root, dir) = launcher_root();
    nix::unistd::mkfifo(&dir.join("data.img"), Mode::from_bits_truncate(0o600)).expect("fifo");
    // Opening a pipe for writing would block until a reader came: the refusal must not.
    let error = prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).expect_err("a pipe");
    assert!(error.to_string().contains("a device, pipe or socket"), "{error}");
}

#[test]
fn a_stale_staging_file_is_replaced_and_a_failed_creation_leaves_no_image() {
    // A handler that crashed while making the image left its staging file.
    let (root, dir) = launcher_root();
    std::fs::write(dir.join("data.img.kubevirt-rs-staging"), b"half").expect("stale");
    prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).expect("prepared");
    assert_eq!(std::fs::metadata(dir.join("data.img")).expect("image").len(), 1 << 20);
    assert!(!dir.join("data.img.kubevirt-rs-staging").exists());
    // A creation that fails (here the staging name is taken by a directory) leaves no image
    // behind that a later attempt would take for the user's.
    let (root, dir) = launcher_root();
    std::fs::create_dir(dir.join("data.img.kubevirt-rs-staging")).expect("in the way");
    let error = prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), OWNER).expect_err("in the way");
    assert!(
        error.to_string().contains("cannot create /var/lib/images/data.img"),
        "{error}"
    );
    assert!(!dir.join("data.img").exists());
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

/// A VMI with the filesystem claim `data` (a `persistentVolumeClaim`) as the controller describes
/// it in the status, and a block claim `fast`.
fn claim_vmi(request: &str) -> VirtualMachineInstance {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "default"},
        "spec": {"domain": {"devices": {}}, "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-pvc"}},
            {"name": "fast", "dataVolume": {"name": "fast-dv"}}
        ]},
        "status": {"volumeStatus": [
            {"name": "data", "target": "", "persistentVolumeClaimInfo": {
                "claimName": "data-pvc", "volumeMode": "Filesystem",
                "capacity": {"storage": "100Gi"}, "requests": {"storage": request}}},
            {"name": "fast", "target": "", "persistentVolumeClaimInfo": {
                "claimName": "fast-dv", "volumeMode": "Block", "capacity": {"storage": "1Gi"}}}
        ]}
    }))
    .expect("VMI")
}

/// A launcher root whose `data` claim directory is a small tmpfs of `size`, so the space it has
/// is known; unmounted on drop.
struct SmallVolume {
    root: tempfile::TempDir,
    dir: PathBuf,
}

impl SmallVolume {
    fn new(size: &str) -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("var/run/kubevirt-private/vmi-disks/data");
        std::fs::create_dir_all(&dir).expect("volume dir");
        nix::mount::mount(
            Some("tmpfs"),
            &dir,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={size}").as_str()),
        )
        .expect("tmpfs (needs root)");
        Self { root, dir }
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_filesystem_claims_missing_image_is_made_at_its_request_and_a_block_claim_gets_none() {
    let volume = SmallVolume::new("64m");
    let prepared = prepare(volume.root.path(), &claim_vmi("10Mi"), OWNER).expect("prepared");
    let image = volume.dir.join("disk.img");
    assert_eq!(prepared.images, std::slice::from_ref(&image));
    assert!(prepared.tolerated.is_empty());
    let meta = std::fs::metadata(&image).expect("the image");
    assert_eq!(meta.len(), 10 << 20);
    assert_eq!((meta.uid(), meta.gid()), (OWNER, OWNER));
    // Made once: the guest's data stays, and an existing image is the user's, never given away
    // (upstream gives away only what it makes).
    std::fs::write(&image, b"guest data").expect("write");
    std::os::unix::fs::chown(&image, Some(0), Some(0)).expect("chown");
    prepare(volume.root.path(), &claim_vmi("10Mi"), OWNER).expect("again");
    assert_eq!(std::fs::read(&image).expect("image"), b"guest data");
    assert_eq!(std::fs::metadata(&image).expect("image").uid(), 0);
}

#[test]
fn a_root_launcher_gets_missing_images_made_and_existing_ones_left_as_they_are() {
    let (root, dir) = launcher_root();
    std::fs::write(dir.join("data.img"), b"x").expect("image");
    std::os::unix::fs::chown(dir.join("data.img"), Some(1234), Some(1234)).expect("chown");
    prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), 0).expect("prepared");
    assert_eq!(std::fs::metadata(dir.join("data.img")).expect("image").uid(), 1234);
    let (root, dir) = launcher_root();
    prepare(root.path(), &vmi("DiskOrCreate", Some("1Mi")), 0).expect("prepared");
    assert_eq!(std::fs::metadata(dir.join("data.img")).expect("image").len(), 1 << 20);
}

#[test]
fn a_claim_image_shrinks_within_ten_percent_and_is_refused_beyond() {
    // 64 MiB of tmpfs less the 128 KiB reserve: a 70 MiB request is within 10 %, 72 MiB is not.
    let volume = SmallVolume::new("64m");
    let available = (64 << 20) - (128 << 10);
    let prepared = prepare(volume.root.path(), &claim_vmi("70Mi"), OWNER).expect("tolerated");
    assert_eq!(
        prepared.tolerated,
        [format!(
            "PV size too small: expected {} B, found {available} B. Using it anyway, it is within 10 % toleration",
            70 << 20
        )]
    );
    assert_eq!(
        std::fs::metadata(volume.dir.join("disk.img")).expect("image").len(),
        available
    );

    let volume = SmallVolume::new("64m");
    let error = prepare(volume.root.path(), &claim_vmi("72Mi"), OWNER).expect_err("too small");
    assert_eq!(
        error.to_string(),
        format!(
            "spec.volumes[0].persistentVolumeClaim: unable to create \
             /var/run/kubevirt-private/vmi-disks/data/disk.img, not enough space, demanded size {} B is bigger \
             than available space {available} B, also after taking 10 % toleration into account",
            72 << 20
        )
    );
    assert!(!volume.dir.join("disk.img").exists(), "nothing half-made");
}

#[test]
fn only_disk_or_create_host_disks_and_claims_may_need_an_image() {
    assert!(may_make_images(&vmi("DiskOrCreate", Some("1Mi"))));
    assert!(!may_make_images(&vmi("Disk", None)));
    assert!(may_make_images(&claim_vmi("1Mi")));
}
