//! `virt-launcher run --vmi FILE`: boot a manifest on this machine, console on the terminal, until
//! the guest stops or Ctrl-C / SIGTERM stops it gracefully. Exit code 0 for Succeeded, 1 for
//! Failed, 2 for a bad manifest.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use kubevirt_api::v1::VirtualMachineInstancePhase;

use super::process::{self, fail};
use crate::emulation::EmulationFlags;
use crate::image_store::ImageStore;
use crate::local::run::{RunOptions, prepare_process, run};
use crate::local::runtime_dir::DEFAULT_RUNTIME_ROOT;

/// Where libvirt's capability cache persists between runs when `--libvirt-cache-dir` is not given.
pub const DEFAULT_CACHE_DIR: &str = "/var/cache/kubevirt-rs/libvirt";

/// The run command's settings.
#[derive(Clone, Debug)]
pub struct RunArgs {
    /// The manifest.
    pub vmi: PathBuf,
    /// Instance type and preference manifests.
    pub with: Vec<PathBuf>,
    /// Emulation flags.
    pub flags: EmulationFlags,
    /// Parent of runtime directories.
    pub runtime_dir: Option<PathBuf>,
    /// libvirt's capability cache.
    pub libvirt_cache_dir: Option<PathBuf>,
}

/// Runs the VM; never panics, always cleans up.
#[must_use]
pub fn main(args: RunArgs) -> ExitCode {
    let options = RunOptions {
        vmi_path: args.vmi,
        with: args.with,
        flags: args.flags,
        runtime_root: args.runtime_dir.unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME_ROOT)),
        cache_dir: args
            .libvirt_cache_dir
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE_DIR)),
        store: ImageStore::from_env(),
    };
    let prelude = match prepare_process(options) {
        Ok(prelude) => prelude,
        Err(e) => return fail(&kubevirt_api::error_report::one_line(&e), e.exit_code()),
    };
    let runtime = match process::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let result = runtime.block_on(run(prelude));
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(VirtualMachineInstancePhase::Succeeded) => ExitCode::SUCCESS,
        Ok(phase) => {
            eprintln!("virt-launcher: the VM ended in phase {phase}");
            ExitCode::from(1)
        }
        Err(e) => {
            let code = e.exit_code();
            fail(&kubevirt_api::error_report::one_line(&e), code)
        }
    }
}
