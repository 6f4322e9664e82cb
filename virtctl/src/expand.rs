//! `virtctl expand`: a VM with its instance type and preference applied, from virt-api's
//! `expand-spec` subresource: a stored VM (`--vm`) or one in a file (`--file`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::SUBRESOURCES;
use crate::VirtctlError;

/// The flags of `virtctl expand`.
#[derive(Clone, Debug, Args)]
pub struct ExpandArgs {
    /// A VM in the cluster.
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
    pub vm: Option<String>,
    /// A file holding a VM.
    #[arg(short = 'f', long)]
    pub file: Option<PathBuf>,
    /// `yaml` (the default) or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
}

/// The output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

/// The request `expand` sends: method, path and body.
pub fn request(args: &ExpandArgs, namespace: &str) -> Result<http::Request<Vec<u8>>, VirtctlError> {
    let usage = |e: &dyn std::fmt::Display| VirtctlError::Usage(e.to_string());
    match (&args.vm, &args.file) {
        (Some(name), _) => http::Request::get(format!(
            "{SUBRESOURCES}/namespaces/{namespace}/virtualmachines/{name}/expand-spec"
        ))
        .body(Vec::new())
        .map_err(|e| usage(&e)),
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| VirtctlError::Usage(format!("error reading file {}: {e}", file.display())))?;
            let value: serde_json::Value = serde_saphyr::from_str(&text)
                .map_err(|e| VirtctlError::Usage(format!("error decoding VirtualMachine {}: {e}", file.display())))?;
            http::Request::put(format!("{SUBRESOURCES}/namespaces/{namespace}/expand-vm-spec"))
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(&value).map_err(|e| usage(&e))?)
                .map_err(|e| usage(&e))
        }
        (None, None) => Err(VirtctlError::Usage("one of --vm or --file must be given".to_owned())),
    }
}

/// Sends the request and formats the expanded VM.
pub async fn run(client: &kube::Client, args: &ExpandArgs, namespace: &str) -> Result<String, VirtctlError> {
    const CONTEXT: &str = "error expanding VirtualMachine";
    let text = match client.request_text(request(args, namespace)?).await {
        Ok(text) => text,
        Err(kube::Error::Api(status)) => {
            return Err(VirtctlError::Refused {
                context: CONTEXT.to_owned(),
                message: status.message.clone(),
                code: status.code,
            });
        }
        Err(source) => {
            return Err(VirtctlError::Transport {
                context: CONTEXT.to_owned(),
                source,
            });
        }
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| VirtctlError::Usage(format!("{CONTEXT}: {e}")))?;
    match args.output {
        Output::Json => serde_json::to_string_pretty(&value).map_err(|e| VirtctlError::Usage(e.to_string())),
        Output::Yaml => crate::create_vm::to_yaml(&value),
    }
}
