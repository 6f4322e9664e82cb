//! The loop that drives a domain until it is over, for both modes: it reads the domain, asks
//! [`lifecycle::decide`] what to do (finish, press the power button, destroy, wait), and reacts to
//! domain events and stop requests; then [`teardown`] leaves nothing running.

use std::time::Duration;

use kubevirt_api::domain_state::DomainState;
use kubevirt_api::v1::VirtualMachineInstancePhase;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::signal::unix::{Signal as SignalStream, SignalKind, signal};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tracing::{info, warn};

use super::lifecycle::{self, Observation, Plan, Policy, StopProgress};
use crate::libvirt::{DomainError, DomainManager, DomainStatus, LifecycleEvent};

/// How often the domain is re-read when no event arrives (a safety net for missed events).
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long the domain may stay unreachable (libvirtd restarting) before the loop gives up.
const UNREACHABLE_LIMIT: Duration = Duration::from_secs(30);

/// Stop requests: SIGTERM and SIGINT.
#[derive(Debug)]
pub struct StopSignals {
    term: SignalStream,
    interrupt: SignalStream,
}

impl StopSignals {
    /// Listens for SIGTERM and SIGINT.
    ///
    /// # Errors
    /// When a handler cannot be installed.
    pub fn install() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// Drives the domain until it is over, following [`lifecycle::decide`].
pub async fn supervise<M: DomainManager>(
    manager: &M,
    events: &mut UnboundedReceiver<LifecycleEvent>,
    stops: &mut (impl StopSource + ?Sized),
    policy: Policy,
) -> Result<VirtualMachineInstancePhase, DomainError> {
    let mut stop: Option<(Instant, Option<Instant>, bool)> = None;
    let mut unreachable_since: Option<Instant> = None;
    let mut are_events_closed = false;
    loop {
        let status = match manager.status().await {
            Ok(status) => {
                unreachable_since = None;
                status
            }
            Err(e) => {
                // libvirtd may be restarting; the adapter reconnects on the next call.
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                if since.elapsed() > UNREACHABLE_LIMIT {
                    return Err(e);
                }
                warn!(error = %e, "cannot read the domain state; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let now = Instant::now();
        let progress = stop.map(|(asked, last_acpi, destroyed)| StopProgress {
            elapsed: now - asked,
            since_last_acpi: last_acpi.map(|t| now - t),
            is_destroy_sent: destroyed,
        });
        match lifecycle::decide(&Observation { status, stop: progress }, &policy) {
            Plan::Finish(phase) => {
                info!(%phase, state = %status.state, reason = %status.reason, "domain is over");
                return Ok(phase);
            }
            Plan::SendAcpiShutdown => {
                info!("pressing the ACPI power button");
                if let Err(e) = manager.shutdown().await {
                    warn!(error = %e, "ACPI shutdown failed");
                }
                if let Some(s) = stop.as_mut() {
                    s.1 = Some(Instant::now());
                }
            }
            Plan::Destroy => {
                info!("destroying the domain");
                if let Err(e) = manager.destroy().await {
                    warn!(error = %e, "destroy failed");
                }
                if let Some(s) = stop.as_mut() {
                    s.2 = true;
                }
            }
            Plan::Wait(timeout) => {
                let timeout = timeout.unwrap_or(POLL_INTERVAL).min(POLL_INTERVAL);
                tokio::select! {
                    event = events.recv(), if !are_events_closed => are_events_closed = event.is_none(),
                    () = stops.next_stop() => {
                        match stop.as_mut() {
                            None => {
                                info!(grace_s = policy.grace.as_secs(), "stop requested");
                                stop = Some((Instant::now(), None, false));
                            }
                            // A second request cuts the grace period short.
                            Some(s) if !s.2 => s.0 = Instant::now().checked_sub(policy.grace).unwrap_or(s.0),
                            Some(_) => {}
                        }
                    }
                    () = tokio::time::sleep(timeout) => {}
                }
            }
        }
    }
}

/// Where stop requests come from: signals in production, a channel in tests.
pub trait StopSource {
    /// Resolves when a stop is requested.
    fn next_stop(&mut self) -> impl std::future::Future<Output = ()> + Send;
}

impl StopSource for StopSignals {
    async fn next_stop(&mut self) {
        self.recv().await;
    }
}

impl StopSource for tokio::sync::mpsc::UnboundedReceiver<()> {
    async fn next_stop(&mut self) {
        if self.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

/// Leaves nothing running: destroys a live domain, undefines it (keeping its NVRAM when
/// `keep_nvram`), and as a last resort kills a QEMU that libvirt no longer tracks (its pid read
/// from `qemu_pid_file`).
pub async fn teardown<M: DomainManager>(manager: &M, name: &str, qemu_pid_file: &std::path::Path, keep_nvram: bool) {
    let qemu_pid = std::fs::read_to_string(qemu_pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok());
    match manager.status().await {
        Ok(status)
            if matches!(
                status.state,
                DomainState::Running
                    | DomainState::Paused
                    | DomainState::Blocked
                    | DomainState::ShuttingDown
                    | DomainState::PmSuspended
            ) =>
        {
            if let Err(e) = manager.destroy().await {
                warn!(error = %e, "destroy during teardown failed");
            }
        }
        Ok(_) => {}
        Err(e) => warn!(error = %e, "cannot read the domain state during teardown"),
    }
    match manager.status().await {
        Ok(status) if status != DomainStatus::NON_EXISTENT => {
            if let Err(e) = manager.undefine(keep_nvram).await {
                warn!(error = %e, "undefine failed");
            }
        }
        _ => {}
    }
    if let Some(pid) = qemu_pid.filter(|p| *p > 0) {
        // Only a process that is still this domain's QEMU (pids get reused).
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let is_our_qemu = String::from_utf8_lossy(&cmdline).contains(&format!("guest={name}"));
        if is_our_qemu && kill(Pid::from_raw(pid), None).is_ok() {
            warn!(pid, "QEMU outlived its domain; killing it");
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}
