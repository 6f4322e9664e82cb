//! virt-controller's event loop: the VMI, VM, migration, PVC, DataVolume and launcher-pod watches feed one work
//! queue of `vmi:`, `vm:`, `vmim:`, `evac:` (a node being evacuated) and `wlu:` (the workload updater) keys,
//! reconciled by up to `workers` tasks (never one key twice at once).

use std::sync::Arc;
use std::time::Duration;

use control_loop::workqueue::WorkQueue;
use futures::StreamExt as _;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::Clock;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::cluster_api::ControllerApi;
use crate::migration_controller::{MigrationController, WORKLOAD_UPDATE_KEY};
use crate::pod::PodConfig;
use crate::vm_controller::VmController;
use crate::vmi_controller::VmiController;

/// The controllers.
#[derive(Debug)]
pub struct Controllers<A, K> {
    /// VMI -> launcher pod.
    pub vmis: VmiController<A, K>,
    /// VM -> VMI.
    pub vms: VmController<A, K>,
    /// Migration -> target pod and the VMI's migration state.
    pub migrations: MigrationController<A, K>,
}

impl<A: ControllerApi + Clone, K: Clock + Clone> Controllers<A, K> {
    /// The three controllers over `api`, rendering pods with `config`; the migration controller
    /// renders target pods from the VMI controller's claim store.
    pub fn new(api: &A, clock: &K, config: PodConfig) -> Self {
        let vmis = VmiController::new(api.clone(), clock.clone(), config.clone());
        let machines =
            VmController::new(api.clone(), clock.clone()).with_storage(vmis.claim_store(), vmis.data_volume_store());
        let migrations = MigrationController::new(api.clone(), clock.clone(), config, vmis.claim_store());
        Self {
            vmis,
            vms: machines,
            migrations,
        }
    }
}

impl<A: ControllerApi, K: Clock> Controllers<A, K> {
    async fn reconcile(&self, key: &str) -> Option<Duration> {
        match key.split_once(':') {
            Some(("vmi", key)) => self.vmis.reconcile(key).await,
            Some(("vm", key)) => self.vms.reconcile(key).await,
            Some(("vmim", key)) => self.migrations.reconcile(key).await,
            Some(("evac", node)) => self.migrations.evacuate(node).await,
            Some(("wlu", _)) => self.migrations.update_workloads().await,
            _ => None,
        }
    }
}

/// The controller's metrics: readiness, leadership, VMIs by phase and, on the leader, the
/// outdated VMIs.
#[must_use]
pub fn metrics<A: ControllerApi, K: Clock>(controllers: &Controllers<A, K>, leading: bool) -> String {
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    let mut registry = prometheus_client::registry::Registry::default();
    let ready = Gauge::<i64>::default();
    ready.set(1);
    registry.register(
        "kubevirt_virt_controller_ready_status",
        "The controller is ready.",
        ready,
    );
    let leader = Gauge::<i64>::default();
    leader.set(i64::from(leading));
    registry.register(
        "kubevirt_virt_controller_leading_status",
        "The controller leads.",
        leader,
    );
    let phases = Family::<Vec<(String, String)>, Gauge>::default();
    registry.register("kubevirt_vmi_phase_count", "VMIs by phase.", phases.clone());
    for (phase, count) in controllers.vmis.phase_counts() {
        phases
            .get_or_create(&vec![("phase".to_owned(), phase)])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }
    // Upstream's leader metric, from the workload updater's last pass.
    if let Some(outdated) = controllers.migrations.outdated_workloads().filter(|_| leading) {
        let gauge = Gauge::<i64>::default();
        gauge.set(outdated);
        registry.register(
            "kubevirt_vmi_number_of_outdated",
            "Indication for the total number of VirtualMachineInstance workloads that are not running within the most up-to-date version of the virt-launcher environment.",
            gauge,
        );
    }
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        "# EOF\n".clone_into(&mut text);
    }
    text
}

/// Which watches have listed everything once: nothing is reconciled before all have, so no
/// controller acts on a half-filled cache (a second migration or target pod for what it has not
/// seen yet).
#[derive(Debug, Default)]
struct Synced([bool; Watch::COUNT]);

/// The watches the loop reads.
#[derive(Clone, Copy, Debug)]
enum Watch {
    Vmis,
    Vms,
    Pods,
    KubeVirts,
    Migrations,
    Claims,
    DataVolumes,
}

impl Watch {
    const COUNT: usize = 7;
}

impl Synced {
    /// `watch` has listed once when `done`.
    fn mark(&mut self, watch: Watch, done: bool) {
        if done {
            self.0[watch as usize] = true;
        }
    }

    fn all(&self) -> bool {
        self.0.iter().all(|listed| *listed)
    }
}

/// Whether `event` ends a watch's (re)list.
fn lists_done<T>(event: &Event<T>) -> bool {
    matches!(event, Event::InitDone)
}

/// The workload updater's key.
fn workload_update_key() -> String {
    format!("wlu:{WORKLOAD_UPDATE_KEY}")
}

/// How long VMI and migration changes are gathered before the workload updater looks at them
/// (upstream's updater waits 5 s too): it reads every VMI, so a burst of changes costs one pass.
const WORKLOAD_UPDATE_DEBOUNCE: Duration = Duration::from_secs(5);

/// After a VMI or migration change: the nodes being evacuated are looked at again, and the
/// workload updater once the changes have settled.
fn moves_may_have_changed<A: ControllerApi, K: Clock>(controllers: &Controllers<A, K>, queue: &mut WorkQueue) {
    queue_all(queue, "evac", controllers.migrations.evacuating_nodes());
    queue.add_after(&workload_update_key(), WORKLOAD_UPDATE_DEBOUNCE);
}

fn queue_all(queue: &mut WorkQueue, prefix: &str, keys: Vec<String>) {
    for key in keys {
        queue.add(&format!("{prefix}:{key}"));
    }
}

/// Applies a `KubeVirt` resource's change to the controllers; what waits for a configuration it
/// could not use is looked at again.
fn configure<A: ControllerApi, K: Clock>(
    controllers: &Controllers<A, K>,
    queue: &mut WorkQueue,
    event: Event<kubevirt_api::v1::KubeVirt>,
) {
    let kubevirt = match event {
        Event::Apply(kubevirt) | Event::InitApply(kubevirt) => Some(kubevirt),
        Event::Delete(_) => None,
        Event::Init | Event::InitDone => return,
    };
    queue_all(
        queue,
        "vmi",
        controllers.vmis.set_cluster_configuration(kubevirt.as_ref()),
    );
    controllers.vms.set_cluster_configuration(kubevirt.as_ref());
    let pods = controllers.vmis.pod_config();
    queue_all(
        queue,
        "vmim",
        controllers
            .migrations
            .set_cluster_configuration(kubevirt.as_ref(), pods),
    );
    queue.add(&workload_update_key());
}

/// Runs until `stop`; in-flight reconciles finish first. The watches keep the caches warm at all
/// times, but objects are reconciled only while `leading` says this replica leads.
pub async fn run<A: ControllerApi, K: Clock>(
    controllers: Arc<Controllers<A, K>>,
    api: &A,
    workers: usize,
    mut leading: tokio::sync::watch::Receiver<bool>,
    stop: CancellationToken,
) {
    let mut instance_events = api.watch_vmis();
    let mut machine_events = api.watch_vms();
    let mut pod_events = api.watch_launcher_pods();
    let mut kubevirt_events = api.watch_kubevirts();
    let mut migration_events = api.watch_migrations();
    let mut claim_events = api.watch_claims();
    let mut data_volume_events = api.watch_data_volumes();
    let mut queue = WorkQueue::new();
    let mut running: JoinSet<(String, Option<Duration>)> = JoinSet::new();
    let mut synced = Synced::default();
    loop {
        while *leading.borrow() && synced.all() && running.len() < workers.max(1) {
            let Some(key) = queue.pop() else { break };
            let controllers = controllers.clone();
            running.spawn(async move {
                let requeue = controllers.reconcile(&key).await;
                (key, requeue)
            });
        }
        tokio::select! {
            // The configuration first, so pods are rendered with the cluster's settings.
            biased;
            () = stop.cancelled() => break,
            changed = leading.changed() => {
                if changed.is_err() {
                    warn!("leader election ended; stopping");
                    break;
                }
                tracing::info!(leading = *leading.borrow(), "leadership changed");
            }
            Some(event) = kubevirt_events.next() => match event {
                Ok(Event::InitDone) => synced.mark(Watch::KubeVirts, true),
                Ok(event) => configure(&controllers, &mut queue, event),
                Err(error) => warn!(error = %error, "KubeVirt watch error; the watch retries"),
            },

            Some(event) = instance_events.next() => match event {
                Ok(event) => {
                    synced.mark(Watch::Vmis, lists_done(&event));
                    queue_all(&mut queue, "vm", controllers.vms.on_vmi_event(event.clone()));
                    queue_all(&mut queue, "vmim", controllers.migrations.on_vmi_event(event.clone()));
                    queue_all(&mut queue, "vmi", controllers.vmis.on_vmi_event(event));
                    moves_may_have_changed(&controllers, &mut queue);
                }
                Err(error) => warn!(error = %error, "VMI watch error; the watch retries"),
            },
            Some(event) = machine_events.next() => match event {
                Ok(event) => {
                    synced.mark(Watch::Vms, lists_done(&event));
                    queue_all(&mut queue, "vm", controllers.vms.on_vm_event(event));
                }
                Err(error) => warn!(error = %error, "VM watch error; the watch retries"),
            },
            Some(event) = pod_events.next() => match event {
                Ok(event) => {
                    synced.mark(Watch::Pods, lists_done(&event));
                    queue_all(&mut queue, "vmim", controllers.migrations.on_pod_event(event.clone()));
                    queue_all(&mut queue, "vmi", controllers.vmis.on_pod_event(event));
                }
                Err(error) => warn!(error = %error, "pod watch error; the watch retries"),
            },
            Some(event) = migration_events.next() => match event {
                Ok(event) => {
                    synced.mark(Watch::Migrations, lists_done(&event));
                    queue_all(&mut queue, "vmim", controllers.migrations.on_migration_event(event));
                    moves_may_have_changed(&controllers, &mut queue);
                }
                Err(error) => warn!(error = %error, "migration watch error; the watch retries"),
            },
            Some(event) = claim_events.next() => match event {
                Ok(event) => {
                    synced.mark(Watch::Claims, lists_done(&event));
                    let (changed, vmis) = controllers.vmis.on_claim_event(&event);
                    queue_all(&mut queue, "vmi", vmis);
                    queue_all(&mut queue, "vm", controllers.vms.users_of(&changed));
                }
                Err(error) => warn!(error = %error, "PVC watch error; the watch retries"),
            },
            Some(event) = data_volume_events.next() => match event {
                Ok(event) => {
                    synced.mark(Watch::DataVolumes, lists_done(&event));
                    let changed = controllers.vmis.data_volume_store().on_event(&event);
                    queue_all(&mut queue, "vmi", controllers.vmis.claim_users(&changed));
                    queue_all(&mut queue, "vm", controllers.vms.users_of(&changed));
                }
                Err(error) => warn!(error = %error, "DataVolume watch error; the watch retries"),
            },
            () = queue.next_timer() => {}
            Some(finished) = running.join_next(), if !running.is_empty() => match finished {
                Ok((key, requeue)) => {
                    queue.done(&key);
                    if let Some(delay) = requeue {
                        queue.add_after(&key, delay);
                    }
                }
                Err(error) => warn!(error = %error, "a reconcile task failed"),
            },
        }
    }
    while running.join_next().await.is_some() {}
}
