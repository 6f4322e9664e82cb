//! Cluster mode, as virt-controller starts the launcher in its pod: upstream's flags, checked,
//! then [`crate::cluster::serve`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::run::DEFAULT_CACHE_DIR;
use crate::cluster::serve::{self, ServeOptions};
use crate::cluster::{container_disk_check, start_deadline};
use crate::domain::PathLayout;
use crate::emulation::EmulationFlags;

/// Exit code for bad input (an invalid manifest, spec or flag).
pub const EXIT_BAD_INPUT: u8 = 2;

/// Cluster mode: upstream's flags.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// VMI name.
    #[arg(long)]
    name: Option<String>,
    /// VMI UID.
    #[arg(long)]
    uid: Option<String>,
    /// VMI namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// Grace period for stopping the guest, in seconds.
    #[arg(long, default_value_t = 30)]
    grace_period_seconds: u64,
    /// Use software emulation where /dev/kvm is absent.
    #[arg(long = "allow-emulation", id = "cluster_allow_emulation")]
    allow_emulation: bool,
    /// Use software emulation even where /dev/kvm exists.
    #[arg(long = "force-emulation", id = "cluster_force_emulation")]
    force_emulation: bool,
    /// Directory of the command sockets (`<dir>/sockets`).
    #[arg(long, default_value = "/var/run/kubevirt")]
    kubevirt_share_dir: PathBuf,
    /// Ephemeral disks: overlays and cloud-init ISOs.
    #[arg(long, default_value = "/var/run/kubevirt-ephemeral-disks")]
    ephemeral_disk_dir: PathBuf,
    /// Where the containerDisk sidecars put their images.
    #[arg(long, default_value = "/var/run/kubevirt/container-disks")]
    container_disk_dir: PathBuf,
    /// OVMF firmware directory.
    #[arg(long, default_value = "/usr/share/OVMF")]
    ovmf_path: PathBuf,
    /// Per-pod private state (sockets, ISOs, the private libvirt); not an upstream flag.
    #[arg(long, default_value = "/var/run/kubevirt-private")]
    private_dir: PathBuf,
    /// Persistent libvirt capabilities cache.
    #[arg(long = "libvirt-cache-dir", id = "cluster_libvirt_cache_dir", value_name = "DIR")]
    libvirt_cache_dir: Option<PathBuf>,
    /// Use libvirt's directories in place instead of a private mount namespace: the launcher runs
    /// in a container of its own (virt-controller's pod sets it); not an upstream flag.
    #[arg(long)]
    container_libvirt: bool,
    /// The launcher's own container image, reported to virt-handler; virt-controller's pod sets it.
    #[arg(long, env = "KUBEVIRT_LAUNCHER_IMAGE", value_name = "IMAGE")]
    launcher_image: Option<String>,
    /// How long the guest may take to start (a Go duration, e.g. `240s`): a launcher whose
    /// QEMU has not run by then exits with an error, failing its pod; `0` waits for ever.
    #[arg(long, value_name = "DURATION", value_parser = start_deadline::parse_timeout, default_value = "3m")]
    qemu_timeout: std::time::Duration,
    /// Number of hook sidecars: kubevirt-rs runs none, so only 0 is taken and more is refused.
    #[arg(long, default_value_t = 0)]
    hook_sidecars: u32,
    /// The address space, in bytes, `qemu-img` may use to check a containerDisk image.
    #[arg(long, default_value_t = container_disk_check::DEFAULT_DISK_MEMORY_LIMIT)]
    disk_memory_limit: u64,
}

/// Runs cluster mode with `args`.
#[must_use]
pub fn main(args: ClusterArgs) -> ExitCode {
    let (Some(name), Some(uid), Some(namespace)) = (args.name, args.uid, args.namespace) else {
        eprintln!("virt-launcher: error: cluster mode needs --name, --uid and --namespace (or use `render` / `run`)");
        return ExitCode::from(EXIT_BAD_INPUT);
    };
    if args.hook_sidecars > 0 {
        eprintln!("virt-launcher: error: --hook-sidecars: hook sidecars are not supported by kubevirt-rs");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let flags = EmulationFlags {
        allow_emulation: args.allow_emulation,
        force_emulation: args.force_emulation,
    };
    let domain_type = match flags.domain_type() {
        Ok(domain_type) => domain_type,
        Err(e) => {
            eprintln!("virt-launcher: error: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let text = |p: PathBuf| p.to_string_lossy().into_owned();
    let layout = PathLayout {
        private_dir: text(args.private_dir),
        ephemeral_disk_dir: text(args.ephemeral_disk_dir),
        container_disk_dir: text(args.container_disk_dir),
        ovmf_dir: text(args.ovmf_path),
        ..PathLayout::default()
    };
    serve::main(&ServeOptions {
        name,
        namespace,
        uid,
        grace_period_seconds: args.grace_period_seconds,
        domain_type,
        share_dir: args.kubevirt_share_dir,
        layout,
        cache_dir: args
            .libvirt_cache_dir
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE_DIR)),
        launcher_image: args.launcher_image,
        container_libvirt: args.container_libvirt,
        qemu_timeout: args.qemu_timeout,
        disk_memory_limit: args.disk_memory_limit,
    })
}
