//! What the cluster-mode tests share: the test guest's files, a VMI for it, a launcher process
//! started as virt-controller would start it, and the checks that it stops cleanly.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kubevirt_api::Manifest;
use kubevirt_api::v1::VirtualMachineInstance;

/// A file of the test guest in the local image store.
pub fn store_file(path: &str) -> PathBuf {
    let store = std::env::var("KUBEVIRT_RS_IMAGE_STORE").unwrap_or_else(|_| "/var/lib/kubevirt-rs/images".to_owned());
    let file = Path::new(&store)
        .join("localhost/kubevirt-rs/testguest/latest")
        .join(path);
    assert!(
        file.exists(),
        "the test guest is missing ({}): run `make guest`",
        file.display()
    );
    file
}

/// The test guest's VMI with `name` and `uid`.
pub fn testguest(name: &str, uid: &str) -> VirtualMachineInstance {
    example_vmi("vmi-testguest.yaml", name, uid)
}

/// The example `file` with `name` and `uid`.
pub fn example_vmi(file: &str, name: &str, uid: &str) -> VirtualMachineInstance {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/examples")
        .join(file);
    let mut vmi = Manifest::from_path(&path)
        .and_then(|m| m.into_vmi(&path))
        .expect("example");
    vmi.metadata.name = Some(name.to_owned());
    vmi.metadata.uid = Some(uid.to_owned());
    vmi
}

/// Polls `check` every 50 ms until it gives a value; fails after `timeout`.
pub async fn wait_until<T>(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let begin = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(begin.elapsed() < timeout, "no {what} within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits up to 60 s for the guest's boot marker in the serial log under the private dir `private`.
pub async fn wait_for_guest_marker(private: &Path, uid: &str) {
    let serial_log = private.join(uid).join("virt-serial0-log");
    wait_until("the guest marker", Duration::from_secs(60), async || {
        std::fs::read_to_string(&serial_log)
            .ok()
            .filter(|log| log.contains("KUBEVIRT-RS-GUEST-READY"))
    })
    .await;
}

/// Ends the launcher this test started (by pid) if the test fails before it does.
pub struct Stopper(pub u32);

impl Drop for Stopper {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0).unwrap_or(0));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    }
}

/// Where one launcher's pod keeps things.
pub struct PodDirs {
    /// `--kubevirt-share-dir`; its `sockets/` holds the command socket.
    pub share: PathBuf,
    /// `--private-dir`.
    pub private: PathBuf,
    /// `--ephemeral-disk-dir`.
    pub ephemeral: PathBuf,
    /// `--container-disk-dir`, filled as the containerDisk and kernel-boot sidecars would.
    pub disks: PathBuf,
}

impl PodDirs {
    /// Everything under `root`, with the share directory at `share`.
    pub fn new(root: &Path, share: PathBuf) -> Self {
        Self::filled(Self {
            share,
            private: root.join("p"),
            ephemeral: root.join("e"),
            disks: root.join("c"),
        })
    }

    /// The pod's emptyDirs as the kubelet lays them out in `empty_dirs`
    /// (`…/volumes/kubernetes.io~empty-dir`): `public` (the share directory, with `sockets`
    /// mounted inside it and reachable as `sockets` too), `private`, `ephemeral-disks` and
    /// `container-disks`, all real directories.
    pub fn in_empty_dirs(empty_dirs: &Path) -> Self {
        let public = empty_dirs.join("public");
        std::fs::create_dir_all(public.join("sockets")).expect("pod dirs");
        std::os::unix::fs::symlink(public.join("sockets"), empty_dirs.join("sockets")).expect("sockets");
        Self::filled(Self {
            share: public,
            private: empty_dirs.join("private"),
            ephemeral: empty_dirs.join("ephemeral-disks"),
            disks: empty_dirs.join("container-disks"),
        })
    }

    fn filled(dirs: Self) -> Self {
        // The pod's emptyDirs exist before the launcher starts.
        std::fs::create_dir_all(dirs.disks.join("kernel-boot")).expect("dirs");
        std::fs::create_dir_all(&dirs.ephemeral).expect("dirs");
        std::fs::create_dir_all(&dirs.private).expect("dirs");
        std::os::unix::fs::symlink(store_file("disk/testguest.qcow2"), dirs.disks.join("disk_0.img")).expect("disk");
        std::os::unix::fs::symlink(store_file("boot/vmlinuz"), dirs.disks.join("kernel-boot/vmlinuz")).expect("kernel");
        std::os::unix::fs::symlink(store_file("boot/initrd.img"), dirs.disks.join("kernel-boot/initrd.img"))
            .expect("initrd");
        dirs
    }
}

/// Makes the directories under `root` what the kubelet's emptyDirs are: root's, mode 0777, so an
/// unprivileged pod writes them and owns what it creates there; `root` itself is opened for it
/// to walk through. Links are left as they are.
pub fn open_pod_dirs(root: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    fn walk(path: &Path) {
        let meta = std::fs::symlink_metadata(path).expect("metadata");
        if meta.is_dir() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("chmod");
            for entry in std::fs::read_dir(path).expect("read_dir") {
                walk(&entry.expect("entry").path());
            }
        }
    }
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for entry in std::fs::read_dir(root).expect("read_dir") {
        walk(&entry.expect("entry").path());
    }
}

/// The private `/dev` a container runtime gives a pod, made inside the launcher's own mount
/// namespace (with the pod's root at `/mnt` when `POD_ROOT` names it, as every pod has its
/// volumes at the same paths): the usual nodes, and `/dev/kvm` and `/dev/net/tun` as the device plugins hand them
/// over, root's and mode 0600 (as this host's are), for virt-handler to give to the launcher; the
/// image's `/etc/passwd`, which names the user (libvirt looks it up). Then the launcher as the user
/// `$0`, with no capability and no way to gain one.
const POD_DEV: &str = r#"set -e
[ -z "$POD_ROOT" ] || mount --bind "$POD_ROOT" /mnt
mount --bind "$POD_PASSWD" /etc/passwd
mount -t tmpfs -o mode=0755,nosuid tmpfs /dev
mknod -m 0666 /dev/null c 1 3
mknod -m 0666 /dev/zero c 1 5
mknod -m 0666 /dev/full c 1 7
mknod -m 0666 /dev/random c 1 8
mknod -m 0666 /dev/urandom c 1 9
mkdir /dev/net
mknod -m 0600 /dev/net/tun c 10 200
mknod -m 0600 /dev/kvm c 10 232
exec setpriv --reuid="$0" --regid="$0" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"
"#;

/// [`spawn_launcher_in`] as an unprivileged launcher pod runs it: as `owner` (uid and gid) with no
/// capability at all, no way to gain one, and a `/dev` of its own. Every step execs the next, so
/// the child's pid is the launcher's. Its capabilities cache is its own (`cache` beside the pod's
/// directories), as the launcher image's is made the unprivileged user's.
pub fn spawn_unprivileged_launcher_in(
    dirs: &PodDirs,
    name: &str,
    uid: &str,
    netns: &Path,
    owner: u32,
) -> std::process::Child {
    let mut command = unprivileged_command(dirs, netns, owner);
    launcher_flags(&mut command, dirs, name, uid)
}

/// Where a pod's root is inside its launcher's mount namespace ([`spawn_pod_launcher`]).
pub const POD_MOUNT: &str = "/mnt";

/// `dirs` (under the pod's root) as the launcher sees them with that root at [`POD_MOUNT`].
pub fn in_pod(dirs: &PodDirs) -> PodDirs {
    let root = dirs.private.parent().expect("the pod's root");
    let inside = |path: &Path| Path::new(POD_MOUNT).join(path.strip_prefix(root).expect("under the pod's root"));
    PodDirs {
        share: inside(&dirs.share),
        private: inside(&dirs.private),
        ephemeral: inside(&dirs.ephemeral),
        disks: inside(&dirs.disks),
    }
}

/// [`spawn_unprivileged_launcher_in`] with the pod's root mounted at [`POD_MOUNT`] and the flags
/// naming the paths there: two such pods give their launchers the same paths, as two real launcher
/// pods have, which a migration needs (the domain moves with its paths).
pub fn spawn_pod_launcher(dirs: &PodDirs, name: &str, uid: &str, netns: &Path, owner: u32) -> std::process::Child {
    let root = dirs.private.parent().expect("the pod's root");
    let mut command = unprivileged_command(dirs, netns, owner);
    command.env("POD_ROOT", root);
    launcher_flags(&mut command, &in_pod(dirs), name, uid)
}

/// The command that starts an unprivileged launcher for `dirs` in `netns`, before its flags.
fn unprivileged_command(dirs: &PodDirs, netns: &Path, owner: u32) -> Command {
    let root = dirs.private.parent().expect("the pod's root");
    let cache = root.join("cache");
    std::fs::create_dir_all(&cache).expect("cache");
    std::os::unix::fs::lchown(&cache, Some(owner), Some(owner)).expect("cache owner");
    // The launcher image's user: upstream's qemu.
    let passwd = root.join("passwd");
    let host = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let qemu = format!("qemu:x:{owner}:{owner}:QEMU:/var/run/kubevirt-private:/usr/sbin/nologin\n");
    std::fs::write(&passwd, host + &qemu).expect("passwd");
    let mut command = Command::new("nsenter");
    command
        .env("POD_PASSWD", &passwd)
        .arg(format!("--net={}", netns.display()))
        .args([
            "--",
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            POD_DEV,
        ])
        .arg(owner.to_string())
        .arg(env!("CARGO_BIN_EXE_virt-launcher"))
        .arg("--libvirt-cache-dir")
        .arg(&cache);
    command
}

/// Starts the launcher in cluster mode for the VMI `name`/`uid` with virt-controller's flags.
pub fn spawn_launcher(dirs: &PodDirs, name: &str, uid: &str) -> std::process::Child {
    spawn_launcher_in(dirs, name, uid, None)
}

/// [`spawn_launcher`] with `extra` flags after virt-controller's.
pub fn spawn_launcher_with(dirs: &PodDirs, name: &str, uid: &str, extra: &[&str]) -> std::process::Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_virt-launcher"));
    command.args(extra);
    launcher_flags(&mut command, dirs, name, uid)
}

/// [`spawn_launcher`] inside the network namespace at `netns` (a pod's), when given; `nsenter`
/// execs the launcher, so the child's pid is the launcher's.
pub fn spawn_launcher_in(dirs: &PodDirs, name: &str, uid: &str, netns: Option<&Path>) -> std::process::Child {
    let mut command = match netns {
        Some(netns) => {
            let mut command = Command::new("nsenter");
            command
                .arg(format!("--net={}", netns.display()))
                .arg("--")
                .arg(env!("CARGO_BIN_EXE_virt-launcher"));
            command
        }
        None => Command::new(env!("CARGO_BIN_EXE_virt-launcher")),
    };
    launcher_flags(&mut command, dirs, name, uid)
}

/// Adds virt-controller's flags for `dirs` and the VMI `name`/`uid` to `command`, and starts it.
fn launcher_flags(command: &mut Command, dirs: &PodDirs, name: &str, uid: &str) -> std::process::Child {
    command
        .args(["--name", name, "--namespace", "default", "--uid", uid])
        .args(["--grace-period-seconds", "30", "--force-emulation"])
        .arg("--kubevirt-share-dir")
        .arg(&dirs.share)
        .arg("--private-dir")
        .arg(&dirs.private)
        .arg("--ephemeral-disk-dir")
        .arg(&dirs.ephemeral)
        .arg("--container-disk-dir")
        .arg(&dirs.disks)
        .env("KUBEVIRT_LAUNCHER_IMAGE", "localhost/kubevirt-rs/virt-launcher:test")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start virt-launcher")
}

/// The command lines of processes that mention `root`.
pub fn processes_under(root: &Path) -> Vec<(i32, String)> {
    let root_text = root.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .filter(|(_, c)| c.contains(&root_text))
        .collect()
}

/// SIGTERM ends the launcher cleanly: exit 0, socket removed, no process left that mentions `root`.
pub fn assert_stops_cleanly(mut launcher: std::process::Child, root: &Path, socket: &Path) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(launcher.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let begin = Instant::now();
    let status = loop {
        if let Some(status) = launcher.try_wait().expect("wait") {
            break status;
        }
        assert!(begin.elapsed() < Duration::from_secs(45), "launcher did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut launcher.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
    assert!(status.success(), "{stderr}");
    assert!(!socket.exists(), "the socket is removed");
    let left = processes_under(root);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
