//! The real [`DomainManager`]: libvirt calls block, so one dedicated thread owns the connection and
//! runs them in order, and a second thread runs libvirt's event loop (docs/dependencies.md,
//! "libvirt's event loop" and "libvirt calls block").
//!
//! When the daemon dies and the supervisor restarts it, the next call finds the connection dead,
//! reconnects (re-registering for events) and retries once; the running domain is unaffected.

use std::os::raw::c_int;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::mpsc;

use tokio::sync::{mpsc::UnboundedSender, oneshot};
use tracing::{debug, warn};
use virt::connect::Connect;
use virt::domain::Domain;
use virt::sys;

use super::ffi::{self, LifecycleEvent};
use super::{DomainError, DomainManager, DomainStats, DomainStatus, MigrationParams, MigrationProgress};

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

/// Opens and closes a connection to the daemon at `uri`: whether it serves.
pub fn daemon_answers(uri: &str) -> Result<(), DomainError> {
    // libvirt's event loop must be registered before the first connection is opened, or the
    // connections opened after it never deliver domain events.
    ensure_event_loop();
    let conn = Connect::open(Some(uri)).map_err(|e| DomainError::Connect {
        uri: uri.to_owned(),
        message: e.message().to_owned(),
    })?;
    // Dropping it closes it.
    drop(conn);
    Ok(())
}

/// One domain on one libvirt daemon.
pub struct LibvirtDomainManager {
    jobs: mpsc::Sender<Job>,
    uri: String,
    name: String,
    /// Where libvirt writes the domain's QEMU pid (for the vCPU threads' statistics).
    qemu_pid_file: PathBuf,
}

impl std::fmt::Debug for LibvirtDomainManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibvirtDomainManager").finish_non_exhaustive()
    }
}

impl LibvirtDomainManager {
    /// Starts the libvirt thread for domain `name` at `uri`; lifecycle events go to `events`.
    /// Nothing connects until the first call (see [`LibvirtDomainManager::connect`]).
    pub fn new(
        uri: &str,
        name: &str,
        qemu_pid_file: PathBuf,
        events: UnboundedSender<LifecycleEvent>,
    ) -> Result<Self, DomainError> {
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
        Ok(Self {
            jobs,
            uri: uri.to_owned(),
            name: name.to_owned(),
            qemu_pid_file,
        })
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
                Err(error) if is_agent_unavailable(&error) => Err(DomainError::AgentUnavailable {
                    message: error.message().to_owned(),
                }),
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

/// libvirt's memory statistic tags, as `virDomainMemoryStatTags` numbers them.
mod memory_tag {
    pub const SWAP_IN: u32 = 0;
    pub const SWAP_OUT: u32 = 1;
    pub const MAJOR_FAULT: u32 = 2;
    pub const MINOR_FAULT: u32 = 3;
    pub const UNUSED: u32 = 4;
    pub const AVAILABLE: u32 = 5;
    pub const ACTUAL_BALLOON: u32 = 6;
    pub const RSS: u32 = 7;
    pub const USABLE: u32 = 8;
    pub const DISK_CACHES: u32 = 10;
}

fn counter(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Reads the counters of a running domain; disks and NICs come from its live XML, named by their
/// `ua-` aliases as the VMI spec names them.
fn read_stats(domain: &Domain, qemu_pid_file: &Path) -> Result<DomainStats, virt::error::Error> {
    use cmd_protocol::stats::{BlockStats, MemoryStats, NetStats};
    let info = domain.info()?;
    let mut memory = MemoryStats::default();
    // (The argument is libvirt's flags; the crate asks for every statistic itself.)
    for stat in domain.memory_stats(0).unwrap_or_default() {
        let slot = match stat.tag {
            memory_tag::SWAP_IN => &mut memory.swap_in_kib,
            memory_tag::SWAP_OUT => &mut memory.swap_out_kib,
            memory_tag::MAJOR_FAULT => &mut memory.major_faults,
            memory_tag::MINOR_FAULT => &mut memory.minor_faults,
            memory_tag::UNUSED => &mut memory.unused_kib,
            memory_tag::AVAILABLE => &mut memory.available_kib,
            memory_tag::ACTUAL_BALLOON => &mut memory.actual_balloon_kib,
            memory_tag::RSS => &mut memory.rss_kib,
            memory_tag::USABLE => &mut memory.usable_kib,
            memory_tag::DISK_CACHES => &mut memory.disk_caches_kib,
            _ => continue,
        };
        *slot = Some(stat.val);
    }
    let live = crate::domain::Domain::from_xml(&domain.xml_desc(0)?).unwrap_or_default();
    let spec_name = |alias: Option<&crate::domain::model::Alias>, fallback: &str| {
        alias.map_or_else(
            || fallback.to_owned(),
            |a| a.name.strip_prefix("ua-").unwrap_or(&a.name).to_owned(),
        )
    };
    let block = live
        .devices
        .disk
        .iter()
        .filter_map(|disk| {
            let stats = domain.block_stats(&disk.target.dev).ok()?;
            Some(BlockStats {
                name: spec_name(disk.alias.as_ref(), &disk.target.dev),
                target: disk.target.dev.clone(),
                read_bytes: counter(stats.rd_bytes),
                read_requests: counter(stats.rd_req),
                write_bytes: counter(stats.wr_bytes),
                write_requests: counter(stats.wr_req),
            })
        })
        .collect();
    let net = live
        .devices
        .interface
        .iter()
        .filter_map(|iface| {
            let target = iface.target.as_ref()?.dev.clone();
            let stats = domain.interface_stats(&target).ok()?;
            Some(NetStats {
                name: spec_name(iface.alias.as_ref(), &target),
                target,
                rx_bytes: counter(stats.rx_bytes),
                rx_packets: counter(stats.rx_packets),
                rx_errors: counter(stats.rx_errs),
                rx_dropped: counter(stats.rx_drop),
                tx_bytes: counter(stats.tx_bytes),
                tx_packets: counter(stats.tx_packets),
                tx_errors: counter(stats.tx_errs),
                tx_dropped: counter(stats.tx_drop),
            })
        })
        .collect();
    let name = domain.name()?;
    Ok(DomainStats {
        vcpu: super::vcpu_threads::read_domain(qemu_pid_file),
        name,
        cpu_time_ns: info.cpu_time,
        vcpus: info.nr_virt_cpu,
        memory,
        block,
        net,
    })
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

    async fn undefine(&self, keep_nvram: bool) -> Result<(), DomainError> {
        self.with_domain("undefine", move |conn, name| {
            let domain = lookup(conn, name)?;
            // With its NVRAM (EFI guests) unless it is kept; drivers without NVRAM support refuse
            // either flag.
            let flags = if keep_nvram {
                sys::VIR_DOMAIN_UNDEFINE_KEEP_NVRAM
            } else {
                sys::VIR_DOMAIN_UNDEFINE_NVRAM
            };
            domain.undefine_flags(flags).or_else(|_| domain.undefine())
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

    async fn stats(&self) -> Result<DomainStats, DomainError> {
        let pid_file = self.qemu_pid_file.clone();
        self.with_domain("get stats", move |conn, name| {
            read_stats(&lookup(conn, name)?, &pid_file)
        })
        .await
    }

    async fn live_xml(&self) -> Result<String, DomainError> {
        self.with_domain("get XML", |conn, name| lookup(conn, name)?.xml_desc(0))
            .await
    }

    async fn set_authorized_keys(&self, user: String, keys: Vec<String>) -> Result<(), DomainError> {
        self.with_domain("set SSH keys", move |conn, name| {
            ffi::set_authorized_ssh_keys(&lookup(conn, name)?, &user, &keys)
        })
        .await
    }

    async fn set_user_password(&self, user: String, password: String) -> Result<(), DomainError> {
        self.with_domain("set user password", move |conn, name| {
            lookup(conn, name)?.set_user_password(&user, &password, 0)
        })
        .await
    }

    async fn migrate(&self, params: MigrationParams) -> Result<(), DomainError> {
        let (uri, name) = (self.uri.clone(), self.name.clone());
        let (reply, result) = oneshot::channel();
        std::thread::Builder::new()
            .name("libvirt-migrate".to_owned())
            .spawn(move || {
                let _ = reply.send(run_migration(&uri, &name, &params));
            })
            .map_err(|_| DomainError::WorkerGone)?;
        result.await.map_err(|_| DomainError::WorkerGone)?
    }

    async fn migration_progress(&self) -> Result<Option<MigrationProgress>, DomainError> {
        self.with_domain("get job stats", |conn, name| {
            Ok(ffi::job_counters(&lookup(conn, name)?)?.map(|c| MigrationProgress {
                data_processed_bytes: c.data_processed,
                data_remaining_bytes: c.data_remaining,
                data_total_bytes: c.data_total,
                dirty_rate_pages_per_second: c.memory_dirty_rate,
                memory_iterations: c.memory_iteration,
            }))
        })
        .await
    }

    async fn abort_migration(&self) -> Result<(), DomainError> {
        self.with_domain("abort migration", |conn, name| ffi::abort_job(&lookup(conn, name)?))
            .await
    }

    async fn start_post_copy(&self) -> Result<(), DomainError> {
        self.with_domain("start post-copy", |conn, name| {
            ffi::start_post_copy(&lookup(conn, name)?)
        })
        .await
    }

    async fn set_max_downtime(&self, milliseconds: u64) -> Result<(), DomainError> {
        self.with_domain("set the maximum downtime", move |conn, name| {
            lookup(conn, name)?.migrate_set_max_downtime(milliseconds, 0)
        })
        .await
    }
}

/// libvirt's flags for `params`: live, peer to peer, the target persistent; block migration of the
/// copied disks' top images; auto-converge, post-copy and unsafe migration when allowed.
fn migration_flags(params: &MigrationParams) -> u32 {
    let mut flags = sys::VIR_MIGRATE_LIVE | sys::VIR_MIGRATE_PEER2PEER | sys::VIR_MIGRATE_PERSIST_DEST;
    if !params.copied_disks.is_empty() {
        flags |= sys::VIR_MIGRATE_NON_SHARED_INC;
    }
    if params.auto_converge {
        flags |= sys::VIR_MIGRATE_AUTO_CONVERGE;
    }
    if params.post_copy {
        flags |= sys::VIR_MIGRATE_POSTCOPY;
    }
    if params.unsafe_migration {
        flags |= sys::VIR_MIGRATE_UNSAFE;
    }
    flags
}

/// Runs the blocking migration on a thread and connection of its own, so that the domain's other
/// calls (state, progress, abort) go on on the libvirt thread meanwhile.
fn run_migration(uri: &str, name: &str, params: &MigrationParams) -> Result<(), DomainError> {
    let failed = |e: virt::error::Error| DomainError::Libvirt {
        operation: "migrate",
        message: e.message().to_owned(),
    };
    let conn = Connect::open(Some(uri)).map_err(|e| DomainError::Connect {
        uri: uri.to_owned(),
        message: e.message().to_owned(),
    })?;
    let domain = lookup(&conn, name).map_err(failed)?;
    let parameters = virt::domain::MigrateParameters {
        uri: Some(params.stream_uri.clone()),
        disks_uri: params.disks_uri.clone(),
        migrate_disks: params.copied_disks.clone(),
        bandwidth: (params.bandwidth_mib_per_second > 0).then_some(params.bandwidth_mib_per_second),
        ..virt::domain::MigrateParameters::default()
    };
    let result = domain
        .migrate_to_uri3(Some(&params.destination_uri), parameters, migration_flags(params))
        .map_err(failed);
    drop(domain);
    drop(conn);
    result
}

/// libvirt's "guest agent is not connected" and "not responding" errors.
fn is_agent_unavailable(error: &virt::error::Error) -> bool {
    use virt::error::{ErrorNumber, ErrorNumberEnum};
    matches!(
        error.code(),
        ErrorNumberEnum::Known(ErrorNumber::AgentUnresponsive | ErrorNumber::AgentUnsynced)
    )
}

#[cfg(test)]
mod flag_tests {
    use super::{MigrationParams, migration_flags, sys};

    #[test]
    fn each_allowed_option_adds_its_flag() {
        let plain = MigrationParams {
            destination_uri: String::new(),
            stream_uri: String::new(),
            disks_uri: None,
            copied_disks: Vec::new(),
            bandwidth_mib_per_second: 0,
            auto_converge: false,
            post_copy: false,
            unsafe_migration: false,
        };
        let base = sys::VIR_MIGRATE_LIVE | sys::VIR_MIGRATE_PEER2PEER | sys::VIR_MIGRATE_PERSIST_DEST;
        assert_eq!(migration_flags(&plain), base);
        let all = MigrationParams {
            copied_disks: vec!["vda".to_owned()],
            auto_converge: true,
            post_copy: true,
            unsafe_migration: true,
            ..plain
        };
        assert_eq!(
            migration_flags(&all),
            base | sys::VIR_MIGRATE_NON_SHARED_INC
                | sys::VIR_MIGRATE_AUTO_CONVERGE
                | sys::VIR_MIGRATE_POSTCOPY
                | sys::VIR_MIGRATE_UNSAFE
        );
    }
}
