//! Writes the generated CRDs into a directory (default `manifests/crds`), or with `--check`
//! fails when the files there are stale.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Parser;

/// Generate the kubevirt.io CRDs from the Rust types.
#[derive(Debug, Parser)]
struct Args {
    /// Directory that holds the CRD files.
    #[arg(long, default_value = "manifests/crds")]
    out: PathBuf,
    /// Compare instead of writing; exit 1 when a file differs.
    #[arg(long)]
    check: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut stale = Vec::new();
    for crd in kubevirt_api::crd::render_all()? {
        let path = args.out.join(&crd.file_name);
        if args.check {
            let current = std::fs::read_to_string(&path).unwrap_or_default();
            if current != crd.yaml {
                stale.push(path.display().to_string());
            }
        } else {
            std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
            std::fs::write(&path, &crd.yaml).with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    if !stale.is_empty() {
        bail!(
            "stale CRDs (run `cargo run -p kubevirt-api --bin crdgen`): {}",
            stale.join(", ")
        );
    }
    Ok(())
}
