use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;

use super::*;
use crate::node_mounts::fake::FakeMounts;

fn vmi(value: serde_json::Value) -> VirtualMachineInstance {
    serde_json::from_value(value).expect("VMI")
}

fn testguest() -> VirtualMachineInstance {
    vmi(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "testguest", "namespace": "default", "uid": "u"},
        "spec": {
            "domain": {
                "devices": {},
                "firmware": {"kernelBoot": {"container": {
                    "image": "testguest", "kernelPath": "/boot/vmlinuz", "initrdPath": "/boot/initrd.img"
                }}}
            },
            "volumes": [
                {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config"}},
                {"name": "containerdisk", "containerDisk": {"image": "testguest"}},
                {"name": "named", "containerDisk": {"image": "other", "path": "/images/other.raw"}}
            ]
        }
    }))
}

/// The UID of the pod in these tests.
const POD: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

/// A sidecar stand-in: this test process listens on the socket, so the peer is this process,
/// `proc/<own pid>/root` is the image, and `proc/<own pid>/cgroup` puts it in pod [`POD`].
struct Pod {
    _tmp: tempfile::TempDir,
    proc: PathBuf,
    dir: PathBuf,
    image: PathBuf,
    listeners: Vec<UnixListener>,
}

fn pod() -> Pod {
    let tmp = tempfile::tempdir().expect("tempdir");
    let proc = tmp.path().join("proc");
    let image = proc.join(std::process::id().to_string()).join("root");
    let dir = tmp.path().join("container-disks");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::create_dir_all(image.join("disk")).expect("disk dir");
    let cgroup = format!("0::/kubepods/besteffort/pod{POD}/sidecar\n");
    std::fs::write(image.parent().expect("proc dir").join("cgroup"), cgroup).expect("cgroup");
    // The sidecar's mount namespace, the node's (pid 1's) and the handler's (`self`): all different.
    for (process, inode) in [
        (std::process::id().to_string(), 300),
        ("1".to_owned(), 1),
        ("self".to_owned(), 2),
    ] {
        namespaces(&proc.join(process), inode);
    }
    Pod {
        proc,
        dir,
        image,
        _tmp: tmp,
        listeners: Vec::new(),
    }
}

/// A fake `mountinfo` under `process` whose first mount has ID `id`.
fn namespaces(process: &Path, id: u32) {
    std::fs::create_dir_all(process).expect("process dir");
    let mountinfo = format!("{id} 1 0:1 / / rw - overlay overlay rw\n");
    std::fs::write(process.join("mountinfo"), mountinfo).expect("mountinfo");
}

impl Pod {
    fn serve(&mut self, socket: &str) {
        self.listeners
            .push(UnixListener::bind(self.dir.join(socket)).expect("listen"));
    }

    fn file(&self, path: &str) {
        let path = self.image.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(path, b"data").expect("file");
    }
}

fn own_root(node_root: &str) -> FakeMounts {
    let pid = i32::try_from(std::process::id()).expect("pid");
    FakeMounts {
        roots: BTreeMap::from([(pid, PathBuf::from(node_root))]),
        ..FakeMounts::default()
    }
}

#[test]
fn each_container_disk_and_the_kernel_boot_files_get_a_mount_point_named_as_the_sidecar() {
    let file = |file: FileInImage, target: &str, field: &str| ImageFile {
        file,
        target: PathBuf::from(target),
        field: field.to_owned(),
    };
    let kernel_boot = "spec.domain.firmware.kernelBoot.container";
    assert_eq!(
        images(&testguest()).expect("images"),
        vec![
            ServedImage {
                field: "spec.volumes[1].containerDisk".to_owned(),
                socket: PathBuf::from("disk_1.sock"),
                files: vec![file(
                    FileInImage::OnlyFileIn(PathBuf::from("/disk")),
                    "disk_1.img",
                    "spec.volumes[1].containerDisk.path"
                )]
            },
            ServedImage {
                field: "spec.volumes[2].containerDisk".to_owned(),
                socket: PathBuf::from("disk_2.sock"),
                files: vec![file(
                    FileInImage::Path(PathBuf::from("/images/other.raw")),
                    "disk_2.img",
                    "spec.volumes[2].containerDisk.path"
                )]
            },
            ServedImage {
                field: kernel_boot.to_owned(),
                socket: PathBuf::from("kernel-boot.sock"),
                files: vec![
                    file(
                        FileInImage::Path(PathBuf::from("/boot/vmlinuz")),
                        "kernel-boot/vmlinuz",
                        &format!("{kernel_boot}.kernelPath")
                    ),
                    file(
                        FileInImage::Path(PathBuf::from("/boot/initrd.img")),
                        "kernel-boot/initrd.img",
                        &format!("{kernel_boot}.initrdPath")
                    ),
                ]
            },
        ]
    );
}

#[test]
fn a_vmi_without_images_needs_no_sidecar() {
    let plain = vmi(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "plain"}, "spec": {"domain": {"devices": {}}}
    }));
    assert!(images(&plain).expect("images").is_empty());
    let mounts = FakeMounts::default();
    provide(
        &mounts,
        Path::new("/nonexistent"),
        Path::new("/nonexistent"),
        POD,
        &plain,
    )
    .expect("nothing to do");
    assert!(mounts.mounts().is_empty());
}

#[test]
fn the_images_are_mounted_from_the_sidecars_root_as_the_node_sees_it() {
    let mut pod = pod();
    for socket in ["disk_1.sock", "disk_2.sock", "kernel-boot.sock"] {
        pod.serve(socket);
    }
    pod.file("/disk/testguest.qcow2");
    pod.file("/images/other.raw");
    pod.file("/boot/vmlinuz");
    pod.file("/boot/initrd.img");
    let mounts = own_root("/run/containerd/task/rootfs");
    provide(&mounts, &pod.proc, &pod.dir, POD, &testguest()).expect("provided");
    let node = Path::new("/run/containerd/task/rootfs");
    assert_eq!(
        mounts.mounts(),
        BTreeMap::from([
            (pod.dir.join("disk_1.img"), node.join("disk/testguest.qcow2")),
            (pod.dir.join("disk_2.img"), node.join("images/other.raw")),
            (pod.dir.join("kernel-boot/initrd.img"), node.join("boot/initrd.img")),
            (pod.dir.join("kernel-boot/vmlinuz"), node.join("boot/vmlinuz")),
        ])
    );
    // Again, with the sidecars gone: what is mounted stays, nothing is asked again.
    let pod_dir = pod.dir.clone();
    pod.listeners.clear();
    provide(&mounts, Path::new("/nonexistent"), &pod_dir, POD, &testguest()).expect("idempotent");
    release(&mounts, &pod_dir).expect("released");
    assert!(mounts.mounts().is_empty(), "every mount is removed");
}

#[test]
fn a_sidecar_socket_served_from_outside_the_pod_mounts_nothing() {
    let mut pod = pod();
    pod.serve("disk_0.sock");
    pod.file("/disk/img.qcow2");
    let mounts = own_root("/run/containerd/task/rootfs");
    let other = "11111111-2222-3333-4444-555555555555";
    let error = provide(&mounts, &pod.proc, &pod.dir, other, &single_disk(None)).expect_err("another pod's");
    assert!(matches!(error, ProvideError::NotThePods { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("disk_0.sock") && message.contains(other), "{message}");
    assert!(mounts.mounts().is_empty(), "nothing is mounted");
}

#[test]
fn a_sidecar_socket_served_from_the_nodes_namespaces_mounts_nothing() {
    let mut pod = pod();
    pod.serve("disk_0.sock");
    pod.file("/disk/img.qcow2");
    namespaces(&pod.proc.join(std::process::id().to_string()), 1);
    let mounts = own_root("/run/containerd/task/rootfs");
    let error = provide(&mounts, &pod.proc, &pod.dir, POD, &single_disk(None)).expect_err("the node's");
    assert!(matches!(error, ProvideError::NotThePods { .. }), "{error}");
    assert!(error.to_string().contains("with the node"), "{error}");
    assert!(mounts.mounts().is_empty(), "nothing is mounted");
}

#[test]
fn a_sidecar_that_has_not_started_is_reported_as_such() {
    let pod = pod();
    let error = provide(&own_root("/r"), &pod.proc, &pod.dir, POD, &testguest()).expect_err("no socket");
    assert!(matches!(error, ProvideError::NotStarted { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        format!(
            "the sidecar of spec.volumes[1].containerDisk has not started yet (no {})",
            pod.dir.join("disk_1.sock").display()
        )
    );
}

fn single_disk(path: Option<&str>) -> VirtualMachineInstance {
    let mut disk = serde_json::json!({"image": "img"});
    if let Some(path) = path {
        disk["path"] = path.into();
    }
    vmi(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "one"},
        "spec": {"domain": {"devices": {}}, "volumes": [{"name": "d", "containerDisk": disk}]}
    }))
}

fn provide_one(pod: &mut Pod, path: Option<&str>) -> Result<BTreeMap<PathBuf, PathBuf>, String> {
    pod.serve("disk_0.sock");
    let mounts = own_root("/node");
    provide(&mounts, &pod.proc, &pod.dir, POD, &single_disk(path)).map_err(|e| e.to_string())?;
    Ok(mounts.mounts())
}

#[test]
fn images_that_do_not_hold_one_plain_disk_are_refused_with_the_field() {
    let field = "spec.volumes[0].containerDisk.path";
    let mut empty = pod();
    assert_eq!(
        provide_one(&mut empty, None),
        Err(format!("{field}: /disk in the image holds no disk"))
    );
    let mut two = pod();
    two.file("/disk/a.qcow2");
    two.file("/disk/b.qcow2");
    assert_eq!(
        provide_one(&mut two, None),
        Err(format!(
            "{field}: /disk in the image holds more than one file: name the disk in path"
        ))
    );
    let mut linked = pod();
    std::os::unix::fs::symlink("/etc/shadow", linked.image.join("disk/disk.img")).expect("symlink");
    assert_eq!(
        provide_one(&mut linked, None),
        Err(format!(
            "{field}: /disk/disk.img in the image is or passes through a symbolic link"
        ))
    );
    let mut through_link = pod();
    through_link.file("/real/disk.img");
    std::os::unix::fs::symlink("real", through_link.image.join("linked")).expect("symlink");
    assert_eq!(
        provide_one(&mut through_link, Some("/linked/disk.img")),
        Err(format!(
            "{field}: /linked/disk.img in the image is or passes through a symbolic link"
        ))
    );
    let mut escaping = pod();
    assert_eq!(
        provide_one(&mut escaping, Some("/disk/../../etc/passwd")),
        Err(format!(
            "{field}: /disk/../../etc/passwd is not an absolute path without .."
        ))
    );
    let mut directory = pod();
    directory.file("/images/x/y");
    assert_eq!(
        provide_one(&mut directory, Some("/images/x")),
        Err(format!("{field}: /images/x in the image is not a file"))
    );
    let mut named = pod();
    named.file("/images/disk.raw");
    assert_eq!(
        provide_one(&mut named, Some("/images/disk.raw")),
        Ok(BTreeMap::from([(
            named.dir.join("disk_0.img"),
            PathBuf::from("/node/images/disk.raw")
        )]))
    );
}

#[test]
fn kernel_boot_paths_must_name_distinct_files() {
    let with_paths = |kernel: &str, initrd: &str| {
        let mut vmi = testguest();
        let container = vmi
            .spec
            .domain
            .firmware
            .as_mut()
            .and_then(|f| f.kernel_boot.as_mut())
            .and_then(|k| k.container.as_mut())
            .expect("kernel boot container");
        container.kernel_path = Some(kernel.to_owned());
        container.initrd_path = Some(initrd.to_owned());
        images(&vmi).map(|_| ()).map_err(|e| e.to_string())
    };
    let field = "spec.domain.firmware.kernelBoot.container";
    assert_eq!(
        with_paths("/", "/boot/initrd.img"),
        Err(format!("{field}.kernelPath: / names no file"))
    );
    assert_eq!(
        with_paths("/boot/a/vmlinuz", "/boot/b/vmlinuz"),
        Err(format!(
            "{field}.initrdPath: /boot/b/vmlinuz has the file name of the kernel, and the launcher finds both by file name"
        ))
    );
    assert_eq!(with_paths("/boot/vmlinuz", "/boot/initrd.img"), Ok(()));
}

#[test]
fn only_the_images_of_pods_without_a_launcher_socket_are_orphans() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pods = tmp.path().join("pods");
    let live = sockets::container_disk_dir_on_host(&pods, "live");
    let gone = sockets::container_disk_dir_on_host(&pods, "gone");
    std::fs::create_dir_all(sockets::socket_dir_on_host(&pods, "live")).expect("socket dir");
    std::fs::write(
        sockets::socket_dir_on_host(&pods, "live").join(sockets::READY_SOCKET),
        b"",
    )
    .expect("socket");
    let mounts = FakeMounts::default();
    for dir in [&live, &gone] {
        mounts
            .bind_read_only(Path::new("/root"), Path::new("disk/x"), dir, Path::new("disk_0.img"))
            .expect("mount");
    }
    let other = pods.join("gone/volumes/kubernetes.io~secret/token");
    mounts
        .mounts
        .lock()
        .expect("lock")
        .insert(other.clone(), PathBuf::from("/tmpfs"));
    assert_eq!(release_orphans(&mounts, &pods).expect("released"), 1);
    let left: std::collections::BTreeSet<PathBuf> = mounts.mounts().into_keys().collect();
    assert_eq!(
        left,
        [live.join("disk_0.img"), other].into(),
        "the live pod's image and other volumes stay"
    );
}
