//! virt-launcher: render a VMI into libvirt domain XML, or run it on this machine.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use virt_launcher::commands::{render, run};

#[derive(Debug, Parser)]
#[command(name = "virt-launcher", version, about = "kubevirt-rs virt-launcher")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("VIRT_LAUNCHER_LOG").unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Render(args) => match render::render_file(&args.vmi, args.flags()) {
            Ok(xml) => {
                print!("{xml}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("virt-launcher: error: {:#}", anyhow::Error::from(error));
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
