//! The real [`DomainManager`]: libvirt calls block, so one dedicated thread owns the connection and
//! runs them in order, and a second thread runs libvirt's event loop (deps.md P3, P4).
//!
//! When the daemon dies and the supervisor restarts it, the next call finds the connection dead,
//! reconnects (re-registering for events) and retries once; the running domain is unaffected.

use std::os::raw::c_int;
use std::sync::Once;
use std::sync::mpsc;

use tokio::sync::{mpsc::UnboundedSender, oneshot};
use tracing::{debug, warn};
use virt::connect::Connect;
use virt::domain::Domain;
use virt::sys;

use super::ffi::{self, LifecycleEvent};
use super::{DomainError, DomainManager, DomainStatus};

type Job = Box<dyn FnOnce(&mut Session) + Send>;

static EVENT_LOOP: Once = Once::new();

/// Registers libvirt's default event loop and runs it on its own thread, once per process.
fn ensure_event_loop() {
    EVENT_LOOP.call_once(|| {
        // libvirt would print every error to stderr; the adapter logs them through tracing instead.
        virt::error::clear_error_callback();
        if let Err(e) = virt::event::event_register_default_impl() {
            warn!(error = %e, "cannot register libvirt's event loop; domain events will be missing");
            return;
        }
        let spawned = std::thread::Builder::new().name("libvirt-events".to_owned()).spawn(|| {
            loop {
                if let Err(e) = virt::event::event_run_default_impl() {
                    warn!(error = %e, "libvirt event loop iteration failed");
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
        });
        if let Err(e) = spawned {
            warn!(error = %e, "cannot start the libvirt event thread");
        }
    });
}

/// State owned by the libvirt thread.
struct Session {
    uri: String,
    name: String,
    conn: Option<(Connect, c_int)>,
    events: UnboundedSender<LifecycleEvent>,
}

impl Session {
    fn connection(&mut self) -> Result<&Connect, DomainError> {
        if self.conn.is_none() {
            let conn = Connect::open(Some(&self.uri)).map_err(|e| DomainError::Connect {
                uri: self.uri.clone(),
                message: e.message().to_owned(),
            })?;
            let id = ffi::register_lifecycle(&conn, self.events.clone()).map_err(|e| DomainError::Libvirt {
                operation: "register events",
                message: e.message().to_owned(),
            })?;
            debug!(uri = %self.uri, "connected to libvirt");
            self.conn = Some((conn, id));
        }
        self.conn.as_ref().map(|(conn, _)| conn).ok_or(DomainError::WorkerGone)
    }

    fn disconnect(&mut self) {
        if let Some((conn, id)) = self.conn.take() {
            ffi::deregister(&conn, id);
        }
    }

    fn is_alive(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|(conn, _)| conn.is_alive().unwrap_or(false))
    }
}

/// One domain on one libvirt daemon.
pub struct LibvirtDomainManager {
    jobs: mpsc::Sender<Job>,
}

impl std::fmt::Debug for LibvirtDomainManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibvirtDomainManager").finish_non_exhaustive()
    }
}

impl LibvirtDomainManager {
    /// Starts the libvirt thread for domain `name` at `uri`; lifecycle events go to `events`.
    /// Nothing connects until the first call (see [`LibvirtDomainManager::connect`]).
    pub fn new(uri: &str, name: &str, events: UnboundedSender<LifecycleEvent>) -> Result<Self, DomainError> {
        ensure_event_loop();
        let (jobs, queue) = mpsc::channel::<Job>();
        let mut session = Session {
            uri: uri.to_owned(),
            name: name.to_owned(),
            conn: None,
            events,
        };
        std::thread::Builder::new()
            .name("libvirt".to_owned())
            .spawn(move || {
                for job in queue {
                    job(&mut session);
                }
                session.disconnect();
            })
            .map_err(|_| DomainError::WorkerGone)?;
        Ok(Self { jobs })
    }

    async fn on_thread<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Session) -> Result<T, DomainError> + Send + 'static,
    ) -> Result<T, DomainError> {
        let (reply, result) = oneshot::channel();
        self.jobs
            .send(Box::new(move |session: &mut Session| {
                let _ = reply.send(job(session));
            }))
            .map_err(|_| DomainError::WorkerGone)?;
        result.await.map_err(|_| DomainError::WorkerGone)?
    }

    /// Connects now (the first connection waits out libvirt's capability probe).
    pub async fn connect(&self) -> Result<(), DomainError> {
        self.on_thread(|session| session.connection().map(|_| ())).await
    }

    /// Runs `op` on the domain; reconnects and retries once when the connection died under it.
    async fn with_domain<T: Send + 'static>(
        &self,
        operation: &'static str,
        op: impl Fn(&Connect, &str) -> Result<T, virt::error::Error> + Send + 'static,
    ) -> Result<T, DomainError> {
        self.on_thread(move |session| {
            let name = session.name.clone();
            let first = op(session.connection()?, &name);
            match first {
                Ok(value) => Ok(value),
                Err(error) if !session.is_alive() => {
                    warn!(operation, error = %error.message(), "libvirt connection lost; reconnecting");
                    session.disconnect();
                    op(session.connection()?, &name).map_err(|e| DomainError::Libvirt {
                        operation,
                        message: e.message().to_owned(),
                    })
                }
                Err(error) => Err(DomainError::Libvirt {
                    operation,
                    message: error.message().to_owned(),
                }),
            }
        })
        .await
    }
}

fn lookup(conn: &Connect, name: &str) -> Result<Domain, virt::error::Error> {
    conn.lookup_domain_by_name(name)
}

impl DomainManager for LibvirtDomainManager {
    async fn define(&self, xml: String) -> Result<(), DomainError> {
        self.with_domain("define", move |conn, _| conn.define_domain_xml(&xml).map(|_| ()))
            .await
    }

    async fn start(&self, paused: bool) -> Result<(), DomainError> {
        let flags = if paused { sys::VIR_DOMAIN_START_PAUSED } else { 0 };
        self.with_domain("start", move |conn, name| lookup(conn, name)?.create_with_flags(flags))
            .await
    }

    async fn pause(&self) -> Result<(), DomainError> {
        self.with_domain("pause", |conn, name| lookup(conn, name)?.suspend())
            .await
    }

    async fn resume(&self) -> Result<(), DomainError> {
        self.with_domain("resume", |conn, name| lookup(conn, name)?.resume())
            .await
    }

    async fn shutdown(&self) -> Result<(), DomainError> {
        self.with_domain("shutdown", |conn, name| {
            lookup(conn, name)?.shutdown_flags(sys::VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)
        })
        .await
    }

    async fn destroy(&self) -> Result<(), DomainError> {
        self.with_domain("destroy", |conn, name| lookup(conn, name)?.destroy())
            .await
    }

    async fn undefine(&self) -> Result<(), DomainError> {
        self.with_domain("undefine", |conn, name| {
            let domain = lookup(conn, name)?;
            // With its NVRAM (EFI guests); drivers without NVRAM support refuse the flag.
            domain
                .undefine_flags(sys::VIR_DOMAIN_UNDEFINE_NVRAM)
                .or_else(|_| domain.undefine())
        })
        .await
    }

    async fn status(&self) -> Result<DomainStatus, DomainError> {
        self.with_domain("get state", |conn, name| match lookup(conn, name) {
            Ok(domain) => ffi::domain_state(&domain).map(|(state, reason)| DomainStatus::from_libvirt(state, reason)),
            Err(e) if e.code() == virt::error::ErrorNumberEnum::Known(virt::error::ErrorNumber::NoDomain) => {
                Ok(DomainStatus::NON_EXISTENT)
            }
            Err(e) => Err(e),
        })
        .await
    }
}
