//! Finding the cluster the way kubectl does: `--kubeconfig`, else `$KUBECONFIG` (merged), else
//! `~/.kube/config`, else the in-cluster service account; `--context` picks the context, and the
//! namespace comes from `-n`, the context, or `default`.

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::VirtctlError;
use crate::cli::Cli;

/// A client and the namespace to use.
pub async fn client(cli: &Cli) -> Result<(kube::Client, String), VirtctlError> {
    let options = KubeConfigOptions {
        context: cli.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|e| VirtctlError::Config(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| e.to_string())
        }
        None if cli.context.is_some() => kube::Config::from_kubeconfig(&options).await.map_err(|e| e.to_string()),
        None => kube::Config::infer().await.map_err(|e| e.to_string()),
    }
    .map_err(VirtctlError::Config)?;
    let namespace = cli
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = kube::Client::try_from(config).map_err(|e| VirtctlError::Config(e.to_string()))?;
    Ok((client, namespace))
}
