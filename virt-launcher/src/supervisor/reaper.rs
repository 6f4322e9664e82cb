//! The launcher is a child subreaper and reaps every exited descendant at once.
//!
//! libvirt daemonizes QEMU, so QEMU is re-parented to the nearest subreaper: us. libvirt notices
//! that QEMU is gone only once its zombie is reaped (docs/dependencies.md, "Reap QEMU at once"),
//! so reaping immediately turns a ~1.5 s stop into ~0.2 s. Because this reaps *every* child with
//! `waitpid(-1)`, all children of the launcher must be spawned with `std::process::Command` and
//! awaited through [`Reaper::wait`], never `Child::wait` or `tokio::process`, whose exit statuses
//! this would steal.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessExit {
    /// Exited with a code.
    Exited(i32),
    /// Killed by a signal.
    Signaled(i32),
}

impl ProcessExit {
    /// Exit code 0.
    #[must_use]
    pub fn is_success(self) -> bool {
        self == Self::Exited(0)
    }
}

impl std::fmt::Display for ProcessExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exited(code) => write!(f, "exit code {code}"),
            Self::Signaled(signal) => write!(f, "signal {signal}"),
        }
    }
}

/// Why a process could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ReaperError {
    /// `prctl(PR_SET_CHILD_SUBREAPER)` or the SIGCHLD handler failed.
    #[error("cannot become a child subreaper")]
    Install(#[source] std::io::Error),
    /// The program could not be started.
    #[error("cannot start {program}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The reaper stopped before the process ended.
    #[error("the reaper stopped before process {0} ended")]
    Gone(u32),
}

#[derive(Default)]
struct Table {
    waiters: HashMap<i32, Vec<oneshot::Sender<ProcessExit>>>,
    /// Exits seen before anyone asked (a fast child, or an orphan nobody waits for).
    exited: HashMap<i32, ProcessExit>,
}

/// Reaps every child and hands exit statuses to whoever waits for them.
#[derive(Clone)]
pub struct Reaper {
    table: Arc<Mutex<Table>>,
}

impl std::fmt::Debug for Reaper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reaper").finish_non_exhaustive()
    }
}

impl Reaper {
    /// Makes this process a child subreaper and starts reaping on SIGCHLD. Needs a tokio runtime.
    pub fn install() -> Result<Self, ReaperError> {
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| ReaperError::Install(e.into()))?;
        let mut sigchld = signal(SignalKind::child()).map_err(ReaperError::Install)?;
        let reaper = Self {
            table: Arc::new(Mutex::new(Table::default())),
        };
        let worker = reaper.clone();
        tokio::spawn(async move {
            loop {
                worker.reap_all();
                if sigchld.recv().await.is_none() {
                    break;
                }
            }
        });
        Ok(reaper)
    }

    fn reap_all(&self) {
        loop {
            let (pid, exit) = match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => (pid.as_raw(), ProcessExit::Exited(code)),
                Ok(WaitStatus::Signaled(pid, signal, _)) => (pid.as_raw(), ProcessExit::Signaled(signal as i32)),
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(_) => continue,
            };
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            match table.waiters.remove(&pid) {
                Some(waiters) => {
                    for waiter in waiters {
                        let _ = waiter.send(exit);
                    }
                }
                None => {
                    table.exited.insert(pid, exit);
                }
            }
        }
    }

    /// Waits for process `pid` (a child or an adopted orphan) to end. Each exit is handed out
    /// once: the waiters registered when it happens, or else the first to ask afterwards.
    pub async fn wait(&self, pid: u32) -> Result<ProcessExit, ReaperError> {
        let key = i32::try_from(pid).map_err(|_| ReaperError::Gone(pid))?;
        let receiver = {
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(exit) = table.exited.remove(&key) {
                return Ok(exit);
            }
            let (sender, receiver) = oneshot::channel();
            table.waiters.entry(key).or_default().push(sender);
            receiver
        };
        receiver.await.map_err(|_| ReaperError::Gone(pid))
    }

    /// Starts `command` and returns its pid; await [`Reaper::wait`] for its end.
    pub fn spawn(command: &mut Command) -> Result<u32, ReaperError> {
        let program = command.get_program().to_string_lossy().into_owned();
        // The Child handle is dropped on purpose: the reaper, not std, collects the exit status.
        command
            .spawn()
            .map(|child| child.id())
            .map_err(|source| ReaperError::Spawn { program, source })
    }

    /// Runs `command` to completion and returns its exit, its standard error and, when
    /// `capture_stdout`, its standard output (else it goes nowhere: a tool's child that kept it
    /// open could otherwise hold the read up).
    pub async fn output(&self, command: &mut Command, capture_stdout: bool) -> Result<ToolOutput, ReaperError> {
        let program = command.get_program().to_string_lossy().into_owned();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(if capture_stdout { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ReaperError::Spawn { program, source })?;
        let pid = child.id();
        // Each stream on a thread of its own: a tool blocked writing one would never close the
        // other.
        let read = |stream: Option<Box<dyn std::io::Read + Send>>| {
            tokio::task::spawn_blocking(move || {
                let mut text = String::new();
                if let Some(mut stream) = stream {
                    let _ = stream.read_to_string(&mut text);
                }
                text
            })
        };
        let stdout = read(
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        );
        let stderr = read(
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        );
        let exit = self.wait(pid).await?;
        Ok(ToolOutput {
            exit,
            stdout: stdout.await.unwrap_or_default(),
            stderr: stderr.await.unwrap_or_default(),
        })
    }
}

/// How a tool ended and what it printed.
#[derive(Clone, Debug)]
pub struct ToolOutput {
    /// Its exit.
    pub exit: ProcessExit,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs a tool to completion: the seam volume preparation uses, so it can run without a reaper in
/// tests.
pub trait ToolRunner: Send + Sync {
    /// Runs `command` and returns its exit and standard error.
    fn run(&self, command: &mut Command) -> impl std::future::Future<Output = Result<ToolOutput, ReaperError>> + Send;
    /// Runs `command` and returns its exit, standard output and standard error.
    fn run_capturing(
        &self,
        command: &mut Command,
    ) -> impl std::future::Future<Output = Result<ToolOutput, ReaperError>> + Send;
}

impl ToolRunner for Reaper {
    async fn run(&self, command: &mut Command) -> Result<ToolOutput, ReaperError> {
        self.output(command, false).await
    }

    async fn run_capturing(&self, command: &mut Command) -> Result<ToolOutput, ReaperError> {
        self.output(command, true).await
    }
}

/// Runs tools with `std::process::Command::output`; only correct in a process without a [`Reaper`]
/// (which would take the exit statuses), i.e. in tests.
#[cfg(any(test, feature = "testing"))]
#[derive(Clone, Copy, Debug, Default)]
pub struct DirectRunner;

#[cfg(any(test, feature = "testing"))]
impl ToolRunner for DirectRunner {
    async fn run(&self, command: &mut Command) -> Result<ToolOutput, ReaperError> {
        command.stdout(Stdio::null());
        Self::output(command)
    }

    async fn run_capturing(&self, command: &mut Command) -> Result<ToolOutput, ReaperError> {
        Self::output(command)
    }
}

#[cfg(any(test, feature = "testing"))]
impl DirectRunner {
    fn output(command: &mut Command) -> Result<ToolOutput, ReaperError> {
        let program = command.get_program().to_string_lossy().into_owned();
        let output = command
            .stdin(Stdio::null())
            .output()
            .map_err(|source| ReaperError::Spawn { program, source })?;
        let exit = match output.status.code() {
            Some(code) => ProcessExit::Exited(code),
            None => ProcessExit::Signaled(std::os::unix::process::ExitStatusExt::signal(&output.status).unwrap_or(0)),
        };
        Ok(ToolOutput {
            exit,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}
