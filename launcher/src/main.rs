//! virt-launcher: render a VMI into libvirt domain XML, or run it on this machine.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use virt_launcher::commands::{render, run};

#[derive(Debug, Parser)]
#[command(
    name = "virt-launcher",
    version,
    about = "kubevirt-rs virt-launcher",
    long_about = "kubevirt-rs virt-launcher. With a subcommand it renders or runs a manifest locally; \
                  without one it runs in a launcher pod (cluster mode) with the flags virt-controller passes."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Cluster mode: upstream's flags.
#[derive(Debug, Args)]
struct ClusterArgs {
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
    /// Accepted for compatibility: how long to wait for the domain to appear.
    #[arg(long, value_name = "DURATION")]
    qemu_timeout: Option<String>,
    /// Accepted for compatibility: number of hook sidecars (none are supported).
    #[arg(long, default_value_t = 0)]
    hook_sidecars: u32,
    /// Accepted for compatibility: memory limit for disk operations.
    #[arg(long)]
    disk_memory_limit: Option<u64>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the libvirt domain XML a VMI (or a VM's template) becomes.
    Render(VmiArgs),
    /// Boot a VMI (or a VM's template) on this machine, with no cluster.
    Run {
        #[command(flatten)]
        vmi: VmiArgs,
        /// Parent directory of the run's runtime directory.
        #[arg(long, value_name = "DIR")]
        runtime_dir: Option<PathBuf>,
        /// Persistent libvirt capabilities cache (keeps libvirt's start fast).
        #[arg(long, value_name = "DIR")]
        libvirt_cache_dir: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
struct VmiArgs {
    /// VirtualMachineInstance or VirtualMachine manifest, YAML or JSON.
    #[arg(long, value_name = "FILE")]
    vmi: PathBuf,
    /// Use software emulation where /dev/kvm is absent (upstream's useEmulation).
    #[arg(long)]
    allow_emulation: bool,
    /// Use software emulation even where /dev/kvm exists.
    #[arg(long)]
    force_emulation: bool,
}

impl VmiArgs {
    fn flags(&self) -> render::EmulationFlags {
        render::EmulationFlags {
            allow_emulation: self.allow_emulation,
            force_emulation: self.force_emulation,
        }
    }
}

/// Exit code for bad input (an invalid manifest or spec).
const EXIT_BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("VIRT_LAUNCHER_LOG").unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        // A broken stderr (the log reader went away) must not panic the launcher mid-cleanup.
        .log_internal_errors(false);
    // In a launcher pod the logs are JSON, as the other components'; on a terminal, text.
    if cli.command.is_none() {
        logs.json().init();
    } else {
        logs.init();
    }
    let Some(command) = cli.command else {
        return cluster(cli.cluster);
    };
    match command {
        Command::Render(args) => match render::render_file(&args.vmi, args.flags()) {
            Ok(xml) => {
                print!("{xml}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("virt-launcher: error: {}", kubevirt_api::error_report::one_line(&error));
                ExitCode::from(EXIT_BAD_INPUT)
            }
        },
        Command::Run {
            vmi,
            runtime_dir,
            libvirt_cache_dir,
        } => run::main(run::RunArgs {
            flags: vmi.flags(),
            vmi: vmi.vmi,
            runtime_dir,
            libvirt_cache_dir,
        }),
    }
}

/// Cluster mode.
fn cluster(args: ClusterArgs) -> ExitCode {
    let (Some(name), Some(uid), Some(namespace)) = (args.name, args.uid, args.namespace) else {
        eprintln!("virt-launcher: error: cluster mode needs --name, --uid and --namespace (or use `render` / `run`)");
        return ExitCode::from(EXIT_BAD_INPUT);
    };
    if args.hook_sidecars > 0 {
        eprintln!("virt-launcher: error: --hook-sidecars: hook sidecars are not supported by kubevirt-rs");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let is_kvm_present = std::path::Path::new("/dev/kvm").exists();
    let domain_type =
        match virt_launcher::domain::DomainType::decide(is_kvm_present, args.allow_emulation, args.force_emulation) {
            Ok(domain_type) => domain_type,
            Err(e) => {
                eprintln!("virt-launcher: error: {e}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        };
    let text = |p: PathBuf| p.to_string_lossy().into_owned();
    let layout = virt_launcher::domain::PathLayout {
        private_dir: text(args.private_dir),
        ephemeral_disk_dir: text(args.ephemeral_disk_dir),
        container_disk_dir: text(args.container_disk_dir),
        ovmf_dir: text(args.ovmf_path),
        ..virt_launcher::domain::PathLayout::default()
    };
    virt_launcher::cluster::serve::main(&virt_launcher::cluster::serve::ServeOptions {
        name,
        namespace,
        uid,
        grace_period_seconds: args.grace_period_seconds,
        domain_type,
        share_dir: args.kubevirt_share_dir,
        layout,
        cache_dir: args
            .libvirt_cache_dir
            .unwrap_or_else(|| PathBuf::from(run::DEFAULT_CACHE_DIR)),
        launcher_image: args.launcher_image,
        container_libvirt: args.container_libvirt,
    })
}
