//! Runs `virt-launcher run` as a user would, and finds the processes it started by pid.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One local-run test at a time: each boots a TCG guest on a 2-core machine, and the timing checks
/// need the CPU.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/examples")
        .join(name)
}

/// Fails with a clear message when the test guest was not built.
pub fn require_test_guest() {
    let store = std::env::var("KUBEVIRT_RS_IMAGE_STORE").unwrap_or_else(|_| "/var/lib/kubevirt-rs/images".to_owned());
    let kernel = Path::new(&store).join("localhost/kubevirt-rs/testguest/latest/boot/vmlinuz");
    assert!(
        kernel.exists(),
        "the test guest is missing ({}): run `make guest`",
        kernel.display()
    );
}

pub struct Launcher {
    child: Child,
    pub runtime_root: tempfile::TempDir,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    /// How many of the two streams reached their end.
    drained: Arc<AtomicUsize>,
}

fn collect(stream: impl std::io::Read + Send + 'static, into: Arc<Mutex<String>>, drained: Arc<AtomicUsize>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            into.lock().expect("buffer").push_str(&String::from_utf8_lossy(&line));
            line.clear();
        }
        drained.fetch_add(1, Ordering::SeqCst);
    });
}

impl Launcher {
    pub fn spawn(manifest: &Path) -> Self {
        Self::spawn_with(manifest, &[])
    }

    /// `virt-launcher run` with extra arguments (e.g. `--with FILE`).
    pub fn spawn_with(manifest: &Path, extra: &[&Path]) -> Self {
        let args: Vec<&std::ffi::OsStr> = extra
            .iter()
            .flat_map(|file| [std::ffi::OsStr::new("--with"), file.as_os_str()])
            .collect();
        Self::spawn_command(Command::new(env!("CARGO_BIN_EXE_virt-launcher")), manifest, &args)
    }

    /// `virt-launcher run` with libvirt's capabilities cache in `cache`.
    pub fn spawn_with_cache(manifest: &Path, cache: &Path) -> Self {
        let args = [std::ffi::OsStr::new("--libvirt-cache-dir"), cache.as_os_str()];
        Self::spawn_command(Command::new(env!("CARGO_BIN_EXE_virt-launcher")), manifest, &args)
    }

    /// `virt-launcher run` allowed only the host CPUs `cpus` (`taskset -c`, which execs the
    /// launcher in place), as a pod's cpuset allows it.
    pub fn spawn_on_cpus(manifest: &Path, cpus: &str) -> Self {
        let mut taskset = Command::new("taskset");
        taskset.args(["-c", cpus, env!("CARGO_BIN_EXE_virt-launcher")]);
        Self::spawn_command(taskset, manifest, &[])
    }

    fn spawn_command(mut command: Command, manifest: &Path, extra: &[&std::ffi::OsStr]) -> Self {
        let runtime_root = tempfile::Builder::new()
            .prefix("kv")
            .tempdir_in("/tmp")
            .expect("runtime root");
        let mut child = command
            .args(["run", "--force-emulation", "--vmi"])
            .arg(manifest)
            .arg("--runtime-dir")
            .arg(runtime_root.path())
            .args(extra)
            .env("VIRT_LAUNCHER_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start virt-launcher");
        let (stdout, stderr) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
        let drained = Arc::new(AtomicUsize::new(0));
        collect(child.stdout.take().expect("stdout"), stdout.clone(), drained.clone());
        collect(child.stderr.take().expect("stderr"), stderr.clone(), drained.clone());
        Self {
            child,
            runtime_root,
            stdout,
            stderr,
            drained,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Types `line` on the launcher's terminal, which passes it to the guest's serial console.
    pub fn type_line(&mut self, line: &str) {
        use std::io::Write as _;
        let stdin = self.child.stdin.as_mut().expect("the launcher's stdin");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .expect("type on the console");
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().expect("stdout").clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr").clone()
    }

    /// Waits until stdout (the guest console) shows `text`.
    pub fn wait_for_console(&mut self, text: &str, timeout: Duration) -> Duration {
        self.wait_for(text, timeout, true)
    }

    /// Waits until the launcher's log shows `text`.
    pub fn wait_for_log(&mut self, text: &str, timeout: Duration) -> Duration {
        self.wait_for(text, timeout, false)
    }

    fn wait_for(&mut self, text: &str, timeout: Duration, console: bool) -> Duration {
        let begin = Instant::now();
        loop {
            let seen = if console { self.stdout() } else { self.stderr() };
            if seen.contains(text) {
                return begin.elapsed();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "virt-launcher exited ({status}) before {text:?}\nstdout:\n{}\nstderr:\n{}",
                    self.stdout(),
                    self.stderr()
                );
            }
            assert!(
                begin.elapsed() < timeout,
                "no {text:?} within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                self.stdout(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid()).expect("pid"));
        nix::sys::signal::kill(pid, signal).expect("signal virt-launcher");
    }

    /// Sends `signal` and waits (up to 30 s) for the launcher to exit.
    pub fn stop_with(&mut self, signal: nix::sys::signal::Signal) -> ExitStatus {
        self.signal(signal);
        self.wait_exit(Duration::from_secs(30))
    }

    /// Waits for the launcher to exit, then (briefly) for its output to be read to the end: the
    /// readers may still be behind when the process is gone.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let begin = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                let exited = Instant::now();
                while self.drained.load(Ordering::SeqCst) < 2 && exited.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return status;
            }
            if begin.elapsed() > timeout {
                let _ = self.child.kill();
                panic!(
                    "virt-launcher did not exit within {timeout:?}\nstderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Processes whose parent is the launcher and whose name is `comm`.
    pub fn children_named(&self, comm: &str) -> Vec<u32> {
        processes()
            .into_iter()
            .filter(|p| p.ppid == self.pid() && p.comm == comm)
            .map(|p| p.pid)
            .collect()
    }

    /// The QEMU of this run: the process whose command line mentions the runtime directory.
    pub fn qemu_pid(&self) -> Option<u32> {
        let root = self.runtime_root.path().to_string_lossy().into_owned();
        processes()
            .into_iter()
            .find(|p| p.comm.starts_with("qemu-system") && p.cmdline.contains(&root))
            .map(|p| p.pid)
    }

    /// Asserts that nothing this run started is left: no process mentioning the runtime directory,
    /// no child of the launcher, and no runtime directory.
    pub fn assert_nothing_left(&self, daemon_pids: &[u32]) {
        let root = self.runtime_root.path().to_string_lossy().into_owned();
        let left: Vec<_> = processes()
            .into_iter()
            .filter(|p| p.cmdline.contains(&root) && !p.is_zombie)
            .collect();
        assert!(left.is_empty(), "processes left behind: {left:?}");
        for pid in daemon_pids {
            let alive = processes().into_iter().any(|p| p.pid == *pid && !p.is_zombie);
            assert!(!alive, "daemon {pid} is still running");
        }
        let entries: Vec<_> = std::fs::read_dir(self.runtime_root.path())
            .expect("runtime root")
            .collect();
        assert!(entries.is_empty(), "runtime directory not removed: {entries:?}");
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        // A failed test must not leave a VM behind: end the launcher we started (by pid), which
        // tears its domain and daemons down.
        if let Ok(None) = self.child.try_wait() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(0)),
                nix::sys::signal::Signal::SIGTERM,
            );
            let begin = Instant::now();
            while matches!(self.child.try_wait(), Ok(None)) && begin.elapsed() < Duration::from_secs(40) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[derive(Debug)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub cmdline: String,
    pub is_zombie: bool,
}

pub fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let close = stat.rfind(')')?;
            let comm = stat[stat.find('(')? + 1..close].to_owned();
            let mut rest = stat[close + 2..].split(' ');
            let state = rest.next()?;
            let ppid = rest.next()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            Some(Process {
                pid,
                ppid,
                comm,
                cmdline,
                is_zombie: state == "Z",
            })
        })
        .collect()
}

/// Writes a variant of the test guest manifest.
pub fn testguest_variant(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(example("vmi-testguest.yaml")).expect("example");
    let path = dir.join("vmi.yaml");
    std::fs::write(&path, edit(text)).expect("write manifest");
    path
}

/// The test guest manifest with one text replaced, in a temporary directory kept alive by the
/// returned guard.
pub fn testguest_replacing(from: &str, to: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = testguest_variant(dir.path(), |text| {
        assert!(text.contains(from), "the test guest manifest has no {from:?}");
        text.replace(from, to)
    });
    (dir, manifest)
}
