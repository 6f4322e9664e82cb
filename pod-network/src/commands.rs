//! The seam to the system: commands (`ip`, `nft`, `sysctl`) run inside a network namespace, named
//! by a path to it (`/proc/<pid>/ns/net`, or an open descriptor's `/proc/<pid>/fd/<n>`).
//! [`SystemCommands`] runs them through `nsenter`; `RecordingCommands` (feature `testing`) records
//! them for tests and answers from a script.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A command that failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// It could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// It exited non-zero.
    #[error("{program} {args} failed in {netns}: {stderr}")]
    Failed {
        /// The program.
        program: String,
        /// Its arguments.
        args: String,
        /// The namespace.
        netns: String,
        /// What it printed.
        stderr: String,
    },
}

/// Runs a program inside a network namespace and returns its standard output.
pub trait NetworkCommands: Send + Sync {
    /// Runs `program args` in `netns`, with `stdin` as its input.
    ///
    /// # Errors
    /// [`CommandError`] when it cannot start or exits non-zero.
    fn run(&self, netns: &Path, program: &str, args: &[&str], stdin: Option<&str>) -> Result<String, CommandError>;
}

/// How a finished child's exit status is collected: by `wait` normally, or by whoever reaps the
/// process's children (the launcher is a child subreaper that reaps everything itself).
pub trait ExitWaiter: Send + Sync {
    /// Waits for `child`, whose pipes are already drained, and says whether it succeeded.
    ///
    /// # Errors
    /// The error of waiting.
    fn wait(&self, child: Child) -> std::io::Result<bool>;
}

/// Collects the status with `Child::wait`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdWaiter;

impl ExitWaiter for StdWaiter {
    fn wait(&self, mut child: Child) -> std::io::Result<bool> {
        child.wait().map(|status| status.success())
    }
}

/// Runs commands for real, through `nsenter --net=<path>`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemCommands<W = StdWaiter> {
    waiter: W,
}

impl SystemCommands {
    /// Commands whose exit status `wait` collects.
    #[must_use]
    pub const fn new() -> Self {
        Self { waiter: StdWaiter }
    }
}

impl<W: ExitWaiter> SystemCommands<W> {
    /// Commands whose exit status `waiter` collects.
    pub const fn with_waiter(waiter: W) -> Self {
        Self { waiter }
    }
}

impl<W: ExitWaiter> NetworkCommands for SystemCommands<W> {
    fn run(&self, netns: &Path, program: &str, args: &[&str], stdin: Option<&str>) -> Result<String, CommandError> {
        let spawn = |source| CommandError::Spawn {
            program: program.to_owned(),
            source,
        };
        let mut child = Command::new("nsenter")
            .arg(format!("--net={}", netns.display()))
            .arg("--")
            .arg(program)
            .args(args)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn)?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).map_err(spawn)?;
        }
        let stderr = child.stderr.take();
        let stderr_reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = stderr {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        });
        let mut stdout = String::new();
        if let Some(mut pipe) = child.stdout.take() {
            pipe.read_to_string(&mut stdout).map_err(spawn)?;
        }
        let stderr = stderr_reader.join().unwrap_or_default();
        if !self.waiter.wait(child).map_err(spawn)? {
            return Err(CommandError::Failed {
                program: program.to_owned(),
                args: args.join(" "),
                netns: netns.display().to_string(),
                stderr: stderr.trim().to_owned(),
            });
        }
        Ok(stdout)
    }
}

#[cfg(any(test, feature = "testing"))]
pub use recording::{Recorded, RecordingCommands};

/// The recording fake, behind the `testing` feature.
#[cfg(any(test, feature = "testing"))]
mod recording {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use super::{CommandError, NetworkCommands};

    /// One recorded command.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Recorded {
        /// The namespace.
        pub netns: PathBuf,
        /// Program and arguments.
        pub argv: Vec<String>,
        /// Its input.
        pub stdin: Option<String>,
    }

    /// A fake: records every command and answers with the first scripted reply whose prefix matches
    /// the command line (`""` when none does); a reply of `Err(text)` makes the command fail.
    #[derive(Debug, Default)]
    pub struct RecordingCommands {
        replies: Vec<(String, Result<String, String>)>,
        recorded: Mutex<Vec<Recorded>>,
    }

    impl RecordingCommands {
        /// Answers commands starting with `prefix` (program and arguments joined by spaces).
        #[must_use]
        pub fn reply(mut self, prefix: &str, reply: Result<&str, &str>) -> Self {
            self.replies
                .push((prefix.to_owned(), reply.map(str::to_owned).map_err(str::to_owned)));
            self
        }

        /// What was run, in order.
        #[must_use]
        pub fn recorded(&self) -> Vec<Recorded> {
            self.recorded.lock().map(|r| r.clone()).unwrap_or_default()
        }
    }

    impl NetworkCommands for RecordingCommands {
        fn run(&self, netns: &Path, program: &str, args: &[&str], stdin: Option<&str>) -> Result<String, CommandError> {
            let mut words = vec![program.to_owned()];
            words.extend(args.iter().map(|a| (*a).to_owned()));
            let line = words.join(" ");
            if let Ok(mut recorded) = self.recorded.lock() {
                recorded.push(Recorded {
                    netns: netns.to_owned(),
                    argv: words,
                    stdin: stdin.map(str::to_owned),
                });
            }
            match self
                .replies
                .iter()
                .find(|(prefix, _)| line.starts_with(prefix.as_str()))
            {
                Some((_, Ok(out))) => Ok(out.clone()),
                Some((_, Err(stderr))) => Err(CommandError::Failed {
                    program: program.to_owned(),
                    args: args.join(" "),
                    netns: netns.display().to_string(),
                    stderr: stderr.clone(),
                }),
                None => Ok(String::new()),
            }
        }
    }
}
