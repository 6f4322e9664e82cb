//! The cluster's configuration as virt-handler uses it: the `KubeVirt` resource of the install
//! namespace, followed through its watch, and what each launcher is told of it when its VMI is
//! synced (upstream's `VirtualMachineOptions`). A change reaches the VMIs synced after it, with no
//! restart, as upstream's handler.

use std::collections::BTreeMap;
use std::sync::Arc;

use cmd_protocol::cmd;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use kube::runtime::watcher::Event;
use kubevirt_api::v1::{ClusterConfig, KubeVirt};
use tokio_util::sync::CancellationToken;

use crate::cluster_api::{ApiError, KubeVirtWatchEvent};

/// What the handler knows of the configuration: `None` until the first list of the `KubeVirt`
/// resources is complete.
pub type Settings = tokio::sync::watch::Receiver<Option<Arc<ClusterConfig>>>;

/// What a launcher is told of the cluster with each sync: the SMBIOS strings, the balloon's
/// statistics period, and the switches of `virtualMachineOptions` and the KubeVirt CR's
/// annotations.
#[must_use]
pub fn launcher_options(config: &ClusterConfig) -> cmd::VirtualMachineOptions {
    let smbios = &config.smbios;
    cmd::VirtualMachineOptions {
        virtual_machine_sm_bios: Some(cmd::SmBios {
            manufacturer: smbios.manufacturer.clone(),
            product: smbios.product.clone(),
            version: smbios.version.clone(),
            sku: smbios.sku.clone(),
            family: smbios.family.clone(),
        }),
        mem_balloon_stats_period: config.mem_balloon_stats_period,
        cluster_config: Some(cmd::ClusterConfig {
            free_page_reporting_disabled: config.free_page_reporting_disabled,
            bochs_display_for_efi_guests: !config.vga_display_for_efi_guests,
            serial_console_log_disabled: config.serial_console_log_disabled,
            // Neither our launcher nor upstream's reads it; upstream's handler no longer sends it.
            expand_disks_enabled: false,
        }),
        ..cmd::VirtualMachineOptions::default()
    }
}

/// The configuration in effect, followed across a watch's events. As upstream's handler: the
/// resource that is not being deleted and has a phase (virt-operator took it up) counts; while
/// none does, the last configuration stays.
#[derive(Debug, Default)]
pub struct Follower {
    resources: BTreeMap<String, KubeVirt>,
    /// The resources of a list in progress (from `Init` to `InitDone`).
    listing: Option<BTreeMap<String, KubeVirt>>,
    current: Option<ClusterConfig>,
}

fn key(kubevirt: &KubeVirt) -> String {
    format!(
        "{}/{}",
        kubevirt.metadata.namespace.as_deref().unwrap_or_default(),
        kubevirt.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Follower {
    /// The configuration `event` leaves in effect, when it is news: a change, or the end of the
    /// first list (defaults when no resource counts).
    pub fn on(&mut self, event: KubeVirtWatchEvent) -> Option<ClusterConfig> {
        match event {
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                return None;
            }
            Event::InitApply(kubevirt) => {
                self.listing.get_or_insert_default().insert(key(&kubevirt), kubevirt);
                return None;
            }
            Event::InitDone => {
                self.resources = self.listing.take().unwrap_or_default();
            }
            Event::Apply(kubevirt) => {
                self.resources.insert(key(&kubevirt), kubevirt);
            }
            Event::Delete(kubevirt) => {
                self.resources.remove(&key(&kubevirt));
            }
        }
        let first = self.current.is_none();
        let effective = self
            .resources
            .values()
            .rfind(|kv| {
                kv.metadata.deletion_timestamp.is_none()
                    && kv
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .is_some_and(|p| !p.is_empty())
            })
            .map(ClusterConfig::from_kubevirt);
        let next = effective.or_else(|| self.current.clone()).unwrap_or_default();
        if first || self.current.as_ref() != Some(&next) {
            self.current = Some(next.clone());
            return Some(next);
        }
        None
    }
}

/// Follows `events` into `publish` until `stop`.
pub async fn follow(
    mut events: BoxStream<'static, Result<KubeVirtWatchEvent, ApiError>>,
    publish: tokio::sync::watch::Sender<Option<Arc<ClusterConfig>>>,
    stop: CancellationToken,
) {
    let mut follower = Follower::default();
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            Some(Ok(event)) => {
                if let Some(config) = follower.on(event) {
                    tracing::info!(
                        feature_gates = ?config.feature_gates,
                        mem_balloon_stats_period = config.mem_balloon_stats_period,
                        smbios = ?config.smbios,
                        "the cluster configuration changed; VMIs synced from now on get it"
                    );
                    publish.send_replace(Some(Arc::new(config)));
                }
            }
            Some(Err(error)) => tracing::warn!(error = %error, "the KubeVirt watch failed; it retries"),
            None => return,
        }
    }
}

#[cfg(test)]
#[path = "cluster_settings_tests.rs"]
mod tests;
