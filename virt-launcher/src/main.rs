//! virt-launcher: render a VMI into libvirt domain XML, run it on this machine, or serve it in a
//! launcher pod. Only wiring: the commands live in `virt_launcher::commands`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use virt_launcher::commands::{cluster, render, run};
use virt_launcher::emulation::EmulationFlags;

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
    cluster: cluster::ClusterArgs,
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
    /// An instance type or preference manifest the VM names (repeatable).
    #[arg(long = "with", value_name = "FILE")]
    with: Vec<PathBuf>,
    /// Use software emulation where /dev/kvm is absent (upstream's useEmulation).
    #[arg(long)]
    allow_emulation: bool,
    /// Use software emulation even where /dev/kvm exists.
    #[arg(long)]
    force_emulation: bool,
}

impl VmiArgs {
    fn flags(&self) -> EmulationFlags {
        EmulationFlags {
            allow_emulation: self.allow_emulation,
            force_emulation: self.force_emulation,
        }
    }
}

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
        return cluster::main(cli.cluster);
    };
    match command {
        Command::Render(args) => match render::render_file(&args.vmi, &args.with, args.flags()) {
            Ok(xml) => {
                print!("{xml}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("virt-launcher: error: {}", kubevirt_api::error_report::one_line(&error));
                ExitCode::from(cluster::EXIT_BAD_INPUT)
            }
        },
        Command::Run {
            vmi,
            runtime_dir,
            libvirt_cache_dir,
        } => run::main(run::RunArgs {
            flags: vmi.flags(),
            vmi: vmi.vmi,
            with: vmi.with,
            runtime_dir,
            libvirt_cache_dir,
        }),
    }
}
