//! Local mode's stand-in for a pod network: `virt-launcher run` moves itself (and so its libvirt
//! daemon and QEMU) into a network namespace of its own, and links it to the host with a veth
//! pair on a free /30: the host end gets the first address, the "pod" end (`eth0`) the second and
//! a default route through the host. The bindings then work exactly as in a pod. The namespace
//! dies with the last process in it, taking the veth pair with it; [`disconnect`] removes the host
//! end at once on a normal exit.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use nix::sched::{CloneFlags, unshare};
use serde::Deserialize;
use tracing::{info, warn};

use crate::commands::{CommandError, NetworkCommands};
use crate::plan::Ipv4Cidr;
use crate::setup::POD_INTERFACE;

/// The pool local pod links are taken from.
pub const LOCAL_POOL: Ipv4Cidr = Ipv4Cidr {
    address: Ipv4Addr::new(10, 222, 0, 0),
    prefix: 16,
};
/// Serializes subnet choices between launchers on one machine.
pub const LOCK_FILE: &str = "/run/kubevirt-rs/local-network.lock";

/// Why the local network could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The namespace could not be created.
    #[error("cannot create a network namespace for the VM (needs root, CAP_SYS_ADMIN): {0}")]
    Unshare(#[source] nix::Error),
    /// The host's namespace could not be held.
    #[error("cannot open this process's network namespace: {0}")]
    HostNamespace(#[source] std::io::Error),
    /// The lock file.
    #[error("cannot lock {LOCK_FILE}: {0}")]
    Lock(String),
    /// No /30 is free.
    #[error("no free /30 left in {LOCAL_POOL} for the VM's link to the host")]
    PoolExhausted,
    /// A command failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// `ip -j` printed something unexpected.
    #[error("cannot read the host's addresses: {0}")]
    Observe(String),
}

/// This process's own network namespace, entered by [`PrivateNamespace::enter`], with a handle on
/// the host's.
#[derive(Debug)]
pub struct PrivateNamespace {
    host: File,
}

impl PrivateNamespace {
    /// Moves this process into a new network namespace. Must run before any thread starts, so that
    /// every thread, and every process started later, is in it.
    ///
    /// # Errors
    /// [`LocalError`] when the namespace cannot be created.
    pub fn enter() -> Result<Self, LocalError> {
        let host = File::open("/proc/self/ns/net").map_err(LocalError::HostNamespace)?;
        unshare(CloneFlags::CLONE_NEWNET).map_err(LocalError::Unshare)?;
        Ok(Self { host })
    }

    /// A path to the host's namespace that other processes can open.
    #[must_use]
    pub fn host_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), self.host.as_raw_fd()))
    }

    /// A path to this process's (the VM's) namespace.
    #[must_use]
    pub fn own_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", std::process::id()))
    }
}

/// The veth pair between the host and the VM's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLink {
    /// The host end's name.
    pub host_interface: String,
    /// The host end's address.
    pub host_address: Ipv4Cidr,
    /// The pod end's address (what the host reaches forwarded ports at).
    pub pod_address: Ipv4Cidr,
}

/// The first /30 of [`LOCAL_POOL`] that holds none of `used`.
#[must_use]
pub fn choose_subnet(used: &[Ipv4Addr]) -> Option<Ipv4Cidr> {
    let base = u32::from(LOCAL_POOL.address);
    let count = 1_u32 << (32 - u32::from(LOCAL_POOL.prefix) - 2);
    (0..count)
        .map(|i| base + i * 4)
        .find(|start| !used.iter().any(|a| (u32::from(*a) & !3) == *start))
        .map(|start| Ipv4Cidr {
            address: Ipv4Addr::from(start),
            prefix: 30,
        })
}

#[derive(Deserialize)]
struct Link {
    #[serde(default)]
    addr_info: Vec<Address>,
}

#[derive(Deserialize)]
struct Address {
    local: Option<String>,
}

/// The IPv4 addresses in the output of `ip -j -4 address show`.
///
/// # Errors
/// [`LocalError::Observe`] when it does not parse.
pub fn parse_addresses(json: &str) -> Result<Vec<Ipv4Addr>, LocalError> {
    let links: Vec<Link> = serde_json::from_str(json).map_err(|e| LocalError::Observe(e.to_string()))?;
    Ok(links
        .iter()
        .flat_map(|l| &l.addr_info)
        .filter_map(|a| a.local.as_deref()?.parse().ok())
        .collect())
}

fn lock() -> Result<Flock<File>, LocalError> {
    let path = Path::new(LOCK_FILE);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| LocalError::Lock(e.to_string()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| LocalError::Lock(e.to_string()))?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| LocalError::Lock(e.to_string()))
}

/// Links `namespace` to the host: a veth pair on a free /30, the pod end named `eth0` with a
/// default route through the host end.
///
/// # Errors
/// [`LocalError`] when a command fails or no subnet is free; a half-made link is removed.
pub fn connect_to_host(commands: &dyn NetworkCommands, namespace: &PrivateNamespace) -> Result<HostLink, LocalError> {
    let host = namespace.host_path();
    let own = namespace.own_path();
    let host_interface = format!("kv-{}", std::process::id());
    let _guard = lock()?;
    let used = parse_addresses(&commands.run(&host, "ip", &["-j", "-4", "address", "show"], None)?)?;
    let subnet = choose_subnet(&used).ok_or(LocalError::PoolExhausted)?;
    let link = HostLink {
        host_interface,
        host_address: Ipv4Cidr {
            address: subnet.host(1),
            prefix: 30,
        },
        pod_address: Ipv4Cidr {
            address: subnet.host(2),
            prefix: 30,
        },
    };
    let pid = std::process::id().to_string();
    let host_script = format!(
        "link add name {name} type veth peer name {POD_INTERFACE} netns {pid}\n\
         address add {address} dev {name}\n\
         link set dev {name} up\n",
        name = link.host_interface,
        address = link.host_address,
    );
    let pod_script = format!(
        "link set dev lo up\n\
         address add {address} dev {POD_INTERFACE}\n\
         link set dev {POD_INTERFACE} up\n\
         route add default via {gateway} dev {POD_INTERFACE}\n",
        address = link.pod_address,
        gateway = link.host_address.address,
    );
    let made = commands
        .run(&host, "ip", &["-batch", "-"], Some(&host_script))
        .and_then(|_| commands.run(&own, "ip", &["-batch", "-"], Some(&pod_script)));
    if let Err(e) = made {
        disconnect(commands, namespace, &link);
        return Err(e.into());
    }
    info!(host = %link.host_interface, pod_address = %link.pod_address, "VM namespace linked to the host");
    Ok(link)
}

/// Removes the host end of the link (and with it the pod end).
pub fn disconnect(commands: &dyn NetworkCommands, namespace: &PrivateNamespace, link: &HostLink) {
    let host = namespace.host_path();
    let exists = commands
        .run(&host, "ip", &["link", "show", "dev", &link.host_interface], None)
        .is_ok();
    if exists && let Err(e) = commands.run(&host, "ip", &["link", "del", "dev", &link.host_interface], None) {
        warn!(error = %e, "cannot remove the VM's host link");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_free_slash_30_of_the_pool_is_chosen() {
        assert_eq!(
            choose_subnet(&[]).map(|s| s.to_string()).as_deref(),
            Some("10.222.0.0/30")
        );
        let used = [
            Ipv4Addr::new(10, 222, 0, 1),
            Ipv4Addr::new(10, 222, 0, 6),
            Ipv4Addr::new(192, 168, 1, 4),
        ];
        assert_eq!(
            choose_subnet(&used).map(|s| s.to_string()).as_deref(),
            Some("10.222.0.8/30")
        );
        let everything: Vec<Ipv4Addr> = (0..16384_u32)
            .map(|i| Ipv4Addr::from(u32::from(LOCAL_POOL.address) + i * 4 + 1))
            .collect();
        assert_eq!(choose_subnet(&everything), None);
    }

    #[test]
    fn host_addresses_come_from_ip_json() {
        let json = r#"[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},{"ifindex":7,"ifname":"kv-9","addr_info":[{"family":"inet","local":"10.222.0.1","prefixlen":30}]}]"#;
        assert_eq!(
            parse_addresses(json).expect("parse"),
            [Ipv4Addr::LOCALHOST, Ipv4Addr::new(10, 222, 0, 1)]
        );
        assert!(parse_addresses("nope").is_err());
    }
}
