//! CDIConfig's status: what CDI's controllers read, resolved from its spec and the cluster's
//! StorageClasses as upstream's config controller does (`decide`, pure), and the pass that makes
//! the one `CDIConfig` named `config` if it is missing and writes its status when it changed
//! (`reconcile`).
//!
//! - `scratchSpaceStorageClass`: the spec's when that class exists, else none (a scratch claim
//!   then takes its target's class; current upstream no longer falls back to the default class);
//! - `filesystemOverhead`: the spec's global share when valid, else 0.06; for every StorageClass
//!   its own share from the spec when valid, else the global one;
//! - `uploadProxyURL`: the spec's override (there is no Ingress or Route to read it from);
//! - `importProxy`, `defaultPodResourceRequirements`, `imagePullSecrets`: the spec's;
//!   `preallocation`: the spec's, else false.

use cdi_api::CDIConfig;
use cdi_api::cdi_config::{
    CDIConfigSpec, CDIConfigStatus, CONFIG_NAME, DEFAULT_FILESYSTEM_OVERHEAD, FilesystemOverhead, overhead_thousandths,
};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::cluster_api::{ApiError, CdiApi};

/// The status `spec` resolves to among `classes`.
#[must_use]
pub fn decide(spec: &CDIConfigSpec, classes: &[StorageClass]) -> CDIConfigStatus {
    let names: Vec<String> = classes.iter().filter_map(|c| c.metadata.name.clone()).collect();
    let scratch = spec
        .scratch_space_storage_class
        .clone()
        .filter(|wanted| names.contains(wanted));
    let valid = |share: &String| overhead_thousandths(share).is_ok();
    let overheads = spec.filesystem_overhead.clone().unwrap_or_default();
    let global = overheads
        .global
        .clone()
        .filter(valid)
        .unwrap_or_else(|| DEFAULT_FILESYSTEM_OVERHEAD.to_owned());
    let per_class = names
        .iter()
        .map(|name| {
            let own = overheads.storage_class.get(name).filter(|s| valid(s));
            (name.clone(), own.cloned().unwrap_or_else(|| global.clone()))
        })
        .collect();
    CDIConfigStatus {
        upload_proxy_url: spec.upload_proxy_url_override.clone(),
        upload_proxy_ca: None,
        import_proxy: spec.import_proxy.clone(),
        scratch_space_storage_class: scratch,
        default_pod_resource_requirements: spec.pod_resource_requirements.clone(),
        filesystem_overhead: Some(FilesystemOverhead {
            global: Some(global),
            storage_class: per_class,
        }),
        preallocation: Some(spec.preallocation.unwrap_or(false)),
        image_pull_secrets: spec.image_pull_secrets.clone(),
    }
}

/// One pass: the `CDIConfig` `config` made when missing (with an empty spec, as upstream's
/// controller makes it), then its status written when it differs from what [`decide`] gives.
///
/// # Errors
/// [`ApiError`] from reading the config or the classes, or writing either.
pub async fn reconcile<A: CdiApi>(api: &A) -> Result<(), ApiError> {
    let Some(config) = api.cdi_config().await? else {
        api.create_cdi_config(&CDIConfig::new(CONFIG_NAME, CDIConfigSpec::default()))
            .await?;
        // The next pass (the watch sees the new object) reads it back with its version.
        return Ok(());
    };
    let classes = api.storage_classes().await?;
    let status = decide(&config.spec, &classes);
    if config.status.as_ref() != Some(&status) {
        let mut updated = config;
        updated.status = Some(status);
        api.replace_cdi_config_status(&updated).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
