//! The handler's event loop: VMI watch events, domain events and timers feed one work queue, and
//! up to `workers` VMIs are reconciled at a time (never one VMI twice at once).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::clock::Clock;
use crate::cluster_api::{ApiError, ClusterApi, VmiEvent, VmiWatchEvent};
use crate::launchers::Launchers;
use crate::notify_server::{DomainNotification, LauncherK8sEvent};
use crate::reconciler::Reconciler;
use control_loop::workqueue::WorkQueue;

/// Loop settings.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// VMIs reconciled at the same time.
    pub workers: usize,
    /// Every VMI is reconciled again this often.
    pub resync: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            workers: 10,
            resync: Duration::from_secs(300),
        }
    }
}

/// Requests to a running loop.
#[derive(Debug)]
pub enum Control {
    /// Reconcile every known VMI; `done` fires when the queue is empty again.
    Resync {
        /// Told when every queued VMI was reconciled.
        done: Option<oneshot::Sender<()>>,
    },
}

/// The inputs of the loop.
#[derive(Debug)]
pub struct Inputs {
    /// Domain events from the notify server (or fake launchers).
    pub domains: UnboundedReceiver<DomainNotification>,
    /// Kubernetes events launchers ask to record.
    pub k8s: UnboundedReceiver<LauncherK8sEvent>,
    /// Requests.
    pub control: UnboundedReceiver<Control>,
}

/// The senders that go with [`Inputs`].
#[derive(Clone, Debug)]
pub struct Senders {
    /// Domain events.
    pub domains: UnboundedSender<DomainNotification>,
    /// Kubernetes events.
    pub k8s: UnboundedSender<LauncherK8sEvent>,
    /// Requests.
    pub control: UnboundedSender<Control>,
}

/// A connected pair of inputs and senders.
#[must_use]
pub fn channels() -> (Senders, Inputs) {
    let (domains_tx, domains) = unbounded_channel();
    let (k8s_tx, k8s) = unbounded_channel();
    let (control_tx, control) = unbounded_channel();
    (
        Senders {
            domains: domains_tx,
            k8s: k8s_tx,
            control: control_tx,
        },
        Inputs { domains, k8s, control },
    )
}

/// Runs until `stop`; in-flight reconciles finish first.
pub async fn run<C: ClusterApi, L: Launchers, K: Clock>(
    reconciler: Arc<Reconciler<C, L, K>>,
    mut vmis: BoxStream<'static, Result<VmiWatchEvent, ApiError>>,
    mut inputs: Inputs,
    options: RunOptions,
    stop: CancellationToken,
) {
    let mut queue = WorkQueue::new();
    let mut workers: JoinSet<(String, Option<Duration>)> = JoinSet::new();
    let mut waiting_for_idle: Vec<oneshot::Sender<()>> = Vec::new();
    let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + options.resync, options.resync);
    loop {
        while workers.len() < options.workers.max(1) {
            let Some(key) = queue.pop() else { break };
            let reconciler = reconciler.clone();
            workers.spawn(async move {
                let requeue = reconciler.reconcile(&key).await;
                (key, requeue)
            });
        }
        if queue.is_empty() {
            for waiter in waiting_for_idle.drain(..) {
                let _ = waiter.send(());
            }
        }
        tokio::select! {
            () = stop.cancelled() => break,
            event = vmis.next() => match event {
                Some(Ok(event)) => {
                    for key in reconciler.on_vmi_event(event) {
                        queue.add(&key);
                    }
                }
                Some(Err(error)) => warn!(error = %error, "VMI watch error; the watch retries"),
                None => {
                    warn!("the VMI watch ended");
                    vmis = futures::stream::pending().boxed();
                }
            },
            Some(notification) = inputs.domains.recv() => {
                queue.add(&reconciler.on_domain_event(notification));
            }
            Some(event) = inputs.k8s.recv() => {
                let reconciler = reconciler.clone();
                let recorded = if event.event_type == "Warning" {
                    VmiEvent::warning(&event.reason, event.message)
                } else {
                    VmiEvent::normal(&event.reason, event.message)
                };
                tokio::spawn(async move { reconciler.record(&event.vmi_key, recorded).await });
            }
            Some(control) = inputs.control.recv() => match control {
                Control::Resync { done } => {
                    for key in reconciler.keys() {
                        queue.add(&key);
                    }
                    waiting_for_idle.extend(done);
                }
            },
            _ = resync.tick() => {
                for key in reconciler.keys() {
                    queue.add(&key);
                }
            }
            () = queue.next_timer() => {}
            Some(finished) = workers.join_next(), if !workers.is_empty() => match finished {
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
    while workers.join_next().await.is_some() {}
}
