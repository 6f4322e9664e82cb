//! Phase 1 of pod networking, as upstream's virt-handler does it: before the first Sync, inside
//! the launcher pod's network namespace (found through the launcher's pid), observe the pod
//! interface, cache the observation in the VMI's private directory for the launcher's DHCP server,
//! then build the binding (bridge, tap, NAT rules). A marker beside the cache makes it happen once
//! per pod, across handler restarts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cmd_protocol::sockets::{POD_INTERFACE_CACHE, POD_NETWORK_READY};
use kubevirt_api::v1::VirtualMachineInstance;
use pod_network::commands::NetworkCommands;
use pod_network::handover::{HandoverError, read_observation, write_atomically, write_observation};
use pod_network::plan::{PlanError, Resolv, plan, pod_network_interfaces, uses_pod_network};
use pod_network::setup::{POD_INTERFACE, SetupError, observe_pod_interface, set_up_pod_network};
use tracing::{info, instrument};

/// Why the pod network could not be wired.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The launcher's pid is unknown.
    #[error("cannot find the launcher's process behind {socket}: {message}")]
    LauncherPid {
        /// The command socket.
        socket: PathBuf,
        /// Why.
        message: String,
    },
    /// Observing or building.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The spec cannot be built.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The cache or the marker.
    #[error(transparent)]
    Handover(#[from] HandoverError),
    /// The blocking work was cancelled or panicked.
    #[error("wiring the pod network was interrupted")]
    Interrupted,
    /// The VMI's private directory could not be created.
    #[error("cannot create {path} as uid {owner}")]
    PrivateDir {
        /// The directory.
        path: PathBuf,
        /// The uid it was created as.
        owner: u32,
        /// Why.
        source: std::io::Error,
    },
}

/// File-system access as `uid` (and gid) on this thread until dropped. The VMI's private directory
/// is in the pod, which an unprivileged launcher controls: doing the handler's file work there as
/// the launcher's user means a link the pod placed can lead nowhere that user could not write
/// anyway, and what the handler creates is the launcher's. Commands the thread starts are not
/// affected (`execve` resets the file-system ids).
struct FsIdentity {
    previous: Option<(nix::unistd::Uid, nix::unistd::Gid)>,
}

impl FsIdentity {
    /// Takes on the identity of `vmi`'s launcher if it is unprivileged; nothing for a root one.
    fn of_launcher(vmi: &VirtualMachineInstance) -> Self {
        if !vmi.is_non_root() {
            return Self { previous: None };
        }
        let id = vmi.runtime_user();
        // The group first, while the thread may still change it.
        let gid = nix::unistd::setfsgid(nix::unistd::Gid::from_raw(id));
        let uid = nix::unistd::setfsuid(nix::unistd::Uid::from_raw(id));
        Self {
            previous: Some((uid, gid)),
        }
    }
}

impl Drop for FsIdentity {
    fn drop(&mut self) {
        if let Some((uid, gid)) = self.previous {
            nix::unistd::setfsuid(uid);
            nix::unistd::setfsgid(gid);
        }
    }
}

/// Creates the VMI's private directory in the pod for the handler's files. For an unprivileged
/// launcher it is created as the launcher's user (see [`FsIdentity`]), so it is the launcher's:
/// QEMU and the launcher write their sockets and logs there.
fn prepare_private_dir(private: &Path, vmi: &VirtualMachineInstance) -> Result<(), WireError> {
    std::fs::create_dir_all(private).map_err(|source| WireError::PrivateDir {
        path: private.to_owned(),
        owner: vmi.runtime_user(),
        source,
    })
}

/// Wires `vmi`'s pod network in `netns` unless it is done already; `private` is the VMI's private
/// directory as this process sees it. Returns whether anything was done.
///
/// # Errors
/// [`WireError`] naming what failed; the cache keeps the first observation, so a retry plans
/// from the pod interface as it was before the wiring touched it.
#[instrument(skip_all, fields(vmi = %vmi.key(), netns = %netns.display()))]
pub fn wire(
    commands: &dyn NetworkCommands,
    netns: &Path,
    private: &Path,
    vmi: &VirtualMachineInstance,
) -> Result<bool, WireError> {
    if !uses_pod_network(vmi) {
        return Ok(false);
    }
    let cache = private.join(POD_INTERFACE_CACHE);
    let cached = {
        let _launcher = FsIdentity::of_launcher(vmi);
        if private.join(POD_NETWORK_READY).exists() {
            return Ok(false);
        }
        prepare_private_dir(private, vmi)?;
        if cache.exists() {
            Some(read_observation(&cache)?)
        } else {
            None
        }
    };
    let pod = if let Some(pod) = cached {
        pod
    } else {
        let pod = observe_pod_interface(commands, netns, POD_INTERFACE)?;
        let _launcher = FsIdentity::of_launcher(vmi);
        write_observation(&cache, &pod)?;
        pod
    };
    // DNS settings only matter to the launcher's lease; the wiring does not use them.
    if let Some(plan) = plan(vmi, &pod, &Resolv::default())?.pod {
        set_up_pod_network(commands, netns, &plan)?;
        info!(binding = ?plan.binding, guest = %plan.lease.address, "pod network wired");
    }
    let _launcher = FsIdentity::of_launcher(vmi);
    write_atomically(&private.join(POD_NETWORK_READY), b"")?;
    Ok(true)
}

/// The pod addresses of `vmi`'s pod-network interface, from the cache in its private directory
/// (`private`), keyed by the interface's name; empty until the pod network is wired.
#[must_use]
pub fn cached_pod_addresses(private: &Path, vmi: &VirtualMachineInstance) -> BTreeMap<String, Vec<String>> {
    if !uses_pod_network(vmi) || !private.join(POD_NETWORK_READY).exists() {
        return BTreeMap::new();
    }
    let Some(address) = read_observation(&private.join(POD_INTERFACE_CACHE))
        .ok()
        .and_then(|pod| pod.address)
    else {
        return BTreeMap::new();
    };
    pod_network_interfaces(vmi)
        .map(|i| (i.name.clone(), vec![address.address.to_string()]))
        .collect()
}

/// The pid of the launcher serving `socket`, through its peer credentials.
///
/// # Errors
/// [`WireError::LauncherPid`] when the socket cannot be reached or names no process.
pub async fn launcher_pid(socket: &Path) -> Result<i32, WireError> {
    let error = |message: String| WireError::LauncherPid {
        socket: socket.to_owned(),
        message,
    };
    let stream = cmd_protocol::sockets::connect_unix(socket)
        .await
        .map_err(|e| error(e.to_string()))?;
    stream
        .peer_cred()
        .map_err(|e| error(e.to_string()))?
        .pid()
        .filter(|pid| *pid > 0)
        .ok_or_else(|| error("the socket's peer has no pid".to_owned()))
}

#[cfg(test)]
mod tests {
    use pod_network::commands::RecordingCommands;

    use super::*;

    const ADDRESSES: &str = r#"[{"ifname":"eth0","mtu":1450,"address":"0a:58:0a:f4:00:05","addr_info":[{"family":"inet","local":"10.244.0.5","prefixlen":24}]}]"#;
    const ROUTES: &str = r#"[{"dst":"default","gateway":"10.244.0.1","dev":"eth0"}]"#;

    fn vmi(binding: &str) -> VirtualMachineInstance {
        serde_saphyr::from_str(&format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: v\n  namespace: default\nspec:\n  domain:\n    devices:\n      interfaces:\n      - name: default\n        {binding}: {{}}\n  networks:\n  - name: default\n    pod: {{}}\n"
        ))
        .expect("vmi")
    }

    fn commands() -> RecordingCommands {
        RecordingCommands::default()
            .reply("ip -j address show dev eth0", Ok(ADDRESSES))
            .reply("ip -j -4 route show default", Ok(ROUTES))
    }

    fn argv(commands: &RecordingCommands) -> Vec<String> {
        commands.recorded().iter().map(|r| r.argv.join(" ")).collect()
    }

    #[test]
    fn the_first_sync_observes_caches_and_wires_then_never_again() {
        let private = tempfile::tempdir().expect("tempdir");
        let netns = Path::new("/proc/77/ns/net");
        let commands = commands();
        assert!(wire(&commands, netns, private.path(), &vmi("bridge")).expect("wire"));
        assert_eq!(
            argv(&commands),
            [
                "ip -j address show dev eth0",
                "ip -j -4 route show default",
                "ip -batch -",
                "nft -f -"
            ]
        );
        assert!(commands.recorded().iter().all(|r| r.netns == netns));
        let cached = read_observation(&private.path().join(POD_INTERFACE_CACHE)).expect("cache parses");
        assert_eq!(cached.address.map(|a| a.to_string()).as_deref(), Some("10.244.0.5/24"));
        assert!(private.path().join(POD_NETWORK_READY).exists());
        assert_eq!(
            cached_pod_addresses(private.path(), &vmi("bridge")),
            BTreeMap::from([("default".to_owned(), vec!["10.244.0.5".to_owned()])])
        );

        let again = self::commands();
        assert!(!wire(&again, netns, private.path(), &vmi("bridge")).expect("wire"));
        assert!(again.recorded().is_empty(), "nothing is run twice");
    }

    #[test]
    fn a_retry_after_a_failure_plans_from_the_cached_observation() {
        let private = tempfile::tempdir().expect("tempdir");
        let netns = Path::new("/proc/77/ns/net");
        let failing = commands().reply("nft", Err("Error: Could not process rule"));
        let error = wire(&failing, netns, private.path(), &vmi("masquerade")).expect_err("nft fails");
        assert!(error.to_string().contains("Could not process rule"), "{error}");
        assert!(!private.path().join(POD_NETWORK_READY).exists());
        assert!(
            cached_pod_addresses(private.path(), &vmi("masquerade")).is_empty(),
            "no addresses before the wiring is done"
        );

        // The pod interface now looks different, but the cache is what counts.
        let retry = RecordingCommands::default();
        assert!(wire(&retry, netns, private.path(), &vmi("masquerade")).expect("retry"));
        assert_eq!(
            argv(&retry),
            ["sysctl -q -w net.ipv4.ip_forward=1", "ip -batch -", "nft -f -"]
        );
    }

    /// The pod's `private` emptyDir: anyone in the pod may write it.
    fn pod_private_dir() -> tempfile::TempDir {
        let pod = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(pod.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
        pod
    }

    #[test]
    #[cfg_attr(
        not(feature = "host-tests"),
        ignore = "needs root: make test runs it (feature host-tests)"
    )]
    fn an_unprivileged_launchers_private_dir_and_files_are_its_own() {
        use std::os::unix::fs::MetadataExt as _;
        let pod = pod_private_dir();
        let private = pod.path().join("vmi-uid");
        let mut vmi = vmi("masquerade");
        vmi.status.get_or_insert_default().runtime_user = Some(107);
        assert!(wire(&commands(), Path::new("/proc/77/ns/net"), &private, &vmi).expect("wire"));
        for path in [
            private.clone(),
            private.join(POD_INTERFACE_CACHE),
            private.join(POD_NETWORK_READY),
        ] {
            let meta = std::fs::symlink_metadata(&path).expect("made");
            assert_eq!((meta.uid(), meta.gid()), (107, 107), "{}", path.display());
        }
        assert_eq!(nix::unistd::getuid().as_raw(), 0, "the handler itself stays root");
        let probe = pod.path().join("probe");
        std::fs::write(&probe, b"").expect("probe");
        assert_eq!(
            std::fs::symlink_metadata(&probe).expect("probe").uid(),
            0,
            "and so do its files elsewhere"
        );
    }

    /// A pod that links the VMI's private directory to a directory of the node's gets nothing
    /// written there: the handler's file work runs as the launcher's user.
    #[test]
    #[cfg_attr(
        not(feature = "host-tests"),
        ignore = "needs root: make test runs it (feature host-tests)"
    )]
    fn a_link_the_pod_put_in_place_of_the_private_dir_leads_nowhere() {
        let pod = pod_private_dir();
        let node = tempfile::tempdir().expect("tempdir");
        let private = pod.path().join("vmi-uid");
        std::os::unix::fs::symlink(node.path(), &private).expect("link");
        let mut vmi = vmi("masquerade");
        vmi.status.get_or_insert_default().runtime_user = Some(107);
        let refused = wire(&commands(), Path::new("/proc/77/ns/net"), &private, &vmi).expect_err("refused");
        assert!(refused.to_string().contains("Permission denied"), "{refused}");
        assert_eq!(
            std::fs::read_dir(node.path()).expect("node dir").count(),
            0,
            "nothing written there"
        );
    }

    #[test]
    fn a_vmi_without_the_pod_network_needs_nothing() {
        let private = tempfile::tempdir().expect("tempdir");
        let mut vmi = vmi("masquerade");
        vmi.spec.networks.clear();
        vmi.spec.domain.devices.interfaces.clear();
        let commands = commands();
        assert!(!wire(&commands, Path::new("/proc/77/ns/net"), private.path(), &vmi).expect("wire"));
        assert!(commands.recorded().is_empty());
        assert!(!private.path().join(POD_NETWORK_READY).exists());
    }
}
