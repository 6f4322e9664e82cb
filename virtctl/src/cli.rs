//! virtctl's commands and flags, named as upstream's.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// virtctl (kubevirt-rs).
#[derive(Debug, Parser)]
#[command(name = "virtctl", version, about = "Control KubeVirt virtual machines (kubevirt-rs)")]
pub struct Cli {
    /// Path to the kubeconfig file; otherwise $KUBECONFIG, ~/.kube/config or the in-cluster account.
    #[arg(long, global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Namespace; otherwise the context's namespace, or `default`.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// A virtctl command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a virtual machine.
    Start {
        /// The VM.
        name: String,
        /// Start the VM paused.
        #[arg(long)]
        paused: bool,
        #[command(flatten)]
        dry_run: DryRun,
    },
    /// Stop a virtual machine.
    Stop {
        /// The VM.
        name: String,
        #[command(flatten)]
        force: Force,
        #[command(flatten)]
        dry_run: DryRun,
    },
    /// Restart a virtual machine.
    Restart {
        /// The VM.
        name: String,
        #[command(flatten)]
        force: Force,
        #[command(flatten)]
        dry_run: DryRun,
    },
    /// Migrate a virtual machine.
    Migrate {
        /// The VM.
        name: String,
        /// Labels the target node must also have: `key=value,key2=value2`.
        #[arg(long = "addedNodeSelector", value_parser = parse_node_selector)]
        added_node_selector: Option<std::collections::BTreeMap<String, String>>,
        #[command(flatten)]
        dry_run: DryRun,
    },
    /// Cancel migration of a virtual machine.
    #[command(name = "migrate-cancel")]
    MigrateCancel {
        /// The VM.
        name: String,
        #[command(flatten)]
        dry_run: DryRun,
    },
    /// Pause a VM's instance or a VMI.
    Pause {
        /// `vm` or `vmi`.
        kind: Kind,
        /// Its name.
        name: String,
        #[command(flatten)]
        dry_run: DryRun,
    },
    /// Unpause a VM's instance or a VMI.
    Unpause {
        /// `vm` or `vmi`.
        kind: Kind,
        /// Its name.
        name: String,
        #[command(flatten)]
        dry_run: DryRun,
    },
    /// Print a manifest of a new object.
    Create {
        /// What to create.
        #[command(subcommand)]
        what: Create,
    },
    /// Print a VM with its instance type and preference applied.
    Expand(crate::expand::ExpandArgs),
    /// Upload a VM image to a DataVolume/PersistentVolumeClaim.
    #[command(name = "image-upload")]
    ImageUpload(Box<crate::image_upload::ImageUploadArgs>),
    /// Attach to a VMI's serial console; `Ctrl+]` detaches.
    Console {
        /// The VMI.
        name: String,
        /// Minutes to wait for the console to become available.
        #[arg(long, default_value_t = 5)]
        timeout: u64,
    },
}

/// What `virtctl create` writes.
#[derive(Debug, Subcommand)]
pub enum Create {
    /// A VirtualMachine.
    Vm(Box<crate::create_vm::CreateVmArgs>),
}

/// `vm` or `vmi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// A VirtualMachine (its VMI has the same name).
    Vm,
    /// A VirtualMachineInstance.
    Vmi,
}

/// `--dry-run`.
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct DryRun {
    /// Check the request on the server without changing anything.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
}

/// `--force` and `--grace-period`.
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct Force {
    /// Stop or restart at once; needs --grace-period.
    #[arg(long)]
    pub force: bool,
    /// Seconds the guest gets to shut down; needs --force.
    #[arg(long = "grace-period", allow_hyphen_values = true)]
    pub grace_period: Option<i64>,
}

/// `key=value,key2=value2` as a map; every pair needs its `=`.
pub fn parse_node_selector(text: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    text.split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| format!("{pair:?} is not key=value"))
        })
        .collect()
}
