//! The test cluster as the tests reach it: kubectl and virtctl against its API server, its node's
//! processes and mounts through /proc, and objects that are deleted when a test ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where `make cluster` keeps its state.
pub fn cluster_dir() -> PathBuf {
    std::env::var_os("KUBEVIRT_RS_CLUSTER_DIR")
        .map_or_else(|| PathBuf::from("/var/lib/kubevirt-rs/cluster"), PathBuf::from)
}

fn kubectl_binary() -> PathBuf {
    kubevirt_tests::kubectl_binary()
}

pub fn virtctl_binary() -> PathBuf {
    std::env::var_os("VIRTCTL").map_or_else(
        || kubevirt_tests::repo_root().join("target/debug/virtctl"),
        PathBuf::from,
    )
}

/// The admin kubeconfig of the running cluster; panics with what to run when there is none.
pub fn kubeconfig() -> PathBuf {
    let kubeconfig = cluster_dir().join("admin.kubeconfig");
    assert!(
        kubeconfig.exists(),
        "no test cluster at {}: run `make cluster` first (make test does)",
        cluster_dir().display()
    );
    assert!(
        virtctl_binary().exists(),
        "no virtctl at {}: run `cargo build -p virtctl`",
        virtctl_binary().display()
    );
    kubeconfig
}

fn run(binary: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(binary);
    command
        .env("KUBECONFIG", kubeconfig())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        std::io::Write::write_all(&mut pipe, text.as_bytes()).expect("write stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("wait")
}

/// `kubectl ARGS` as a command to spawn (for watches), with the cluster's kubeconfig.
pub fn kubectl_command(args: &[&str]) -> Command {
    let mut command = Command::new(kubectl_binary());
    command.env("KUBECONFIG", kubeconfig()).args(args);
    command
}

/// `kubectl ARGS`, whatever its outcome.
pub fn kubectl(args: &[&str]) -> Output {
    run(&kubectl_binary(), args, None)
}

/// `kubectl ARGS` with `stdin`, whatever its outcome.
pub fn kubectl_stdin(args: &[&str], stdin: &str) -> Output {
    run(&kubectl_binary(), args, Some(stdin))
}

/// A merge patch of the KubeVirt CR `kubevirt/kubevirt`, whatever the outcome (also for use while
/// a failed test unwinds).
pub fn patch_kubevirt(patch: &serde_json::Value) -> Output {
    kubectl(&[
        "-n",
        "kubevirt",
        "patch",
        "kubevirt",
        "kubevirt",
        "--type",
        "merge",
        "-p",
        &patch.to_string(),
    ])
}

/// `kubectl ARGS`, which must succeed; its stdout.
pub fn kubectl_ok(args: &[&str]) -> String {
    text_of(&kubectl(args), &format!("kubectl {}", args.join(" ")))
}

/// `virtctl ARGS`, whatever its outcome.
pub fn virtctl(args: &[&str]) -> Output {
    run(&virtctl_binary(), args, None)
}

/// `virtctl ARGS`, which must succeed; its stdout.
pub fn virtctl_ok(args: &[&str]) -> String {
    text_of(
        &run(&virtctl_binary(), args, None),
        &format!("virtctl {}", args.join(" ")),
    )
}

fn text_of(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// An object as JSON, or `None` when it does not exist.
pub fn get(kind: &str, name: &str, namespace: &str) -> Option<Value> {
    let output = kubectl(&["-n", namespace, "get", kind, name, "-o", "json", "--ignore-not-found"]);
    let text = text_of(&output, &format!("kubectl get {kind} {name}"));
    (!text.trim().is_empty()).then(|| serde_json::from_str(&text).expect("kubectl JSON"))
}

/// The value at a path of dotted keys (numbers index arrays; `\\.` is a dot inside a key, as in
/// annotation names), as text (empty when absent).
pub fn field(object: &Value, path: &str) -> String {
    let escaped = path.replace("\\.", "\u{0}");
    let value = escaped.split('.').fold(object, |v, key| {
        let key = key.replace('\u{0}', ".");
        match key.parse::<usize>() {
            Ok(index) if v.is_array() => &v[index],
            _ => &v[key.as_str()],
        }
    });
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Polls `probe` every 200 ms until it returns `Some`, for at most `timeout`; panics naming
/// `what` was expected, with `probe`'s last observation from `describe`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "expected {what} within {timeout:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The UID of VMI `name`, empty when it is gone.
pub fn vmi_uid(name: &str) -> String {
    get("vmi", name, "default").map_or_else(String::new, |vmi| field(&vmi, "metadata.uid"))
}

/// The phase of VMI `name`, empty when it has none or is gone.
pub fn vmi_phase(name: &str) -> String {
    get("vmi", name, "default").map_or_else(String::new, |v| field(&v, "status.phase"))
}

/// Waits until VMI `name` is in `phase`; panics naming the phase it was in.
pub fn wait_for_phase(name: &str, phase: &str, timeout: Duration) -> Value {
    wait_for_phase_in("default", name, phase, timeout)
}

/// [`wait_for_phase`] for a VMI in `namespace`.
pub fn wait_for_phase_in(namespace: &str, name: &str, phase: &str, timeout: Duration) -> Value {
    let mut last = String::new();
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(vmi) = get("vmi", name, namespace) {
            last = field(&vmi, "status.phase");
            if last == phase {
                return vmi;
            }
        }
        assert!(
            Instant::now() < deadline,
            "expected VMI {name} to be {phase} within {timeout:?}; it is {last:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An example manifest with its name (and its app label) replaced by `name`.
pub fn example(file: &str, name: &str) -> String {
    let text = std::fs::read_to_string(kubevirt_tests::repo_root().join("manifests/examples").join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let original = text
        .lines()
        .find_map(|l| l.strip_prefix("  name: "))
        .unwrap_or_else(|| panic!("{file} has no metadata.name"))
        .to_owned();
    text.replace(&format!("name: {original}\n"), &format!("name: {name}\n"))
        .replace(&format!("app: {original}\n"), &format!("app: {name}\n"))
}

/// Objects a test created, deleted (and waited for) when the test ends, however it ends.
pub struct Cleanup(Vec<(String, String, String)>);

impl Cleanup {
    /// Nothing to clean yet.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Creates `yaml` (`kubectl create`, after deleting what an aborted earlier run may have
    /// left under the name), deleted at the end as `kind/name`.
    pub fn apply(&mut self, kind: &str, name: &str, yaml: &str) {
        self.apply_in("default", kind, name, yaml);
    }

    /// [`Self::apply`] in `namespace` (any namespace for cluster-scoped kinds).
    pub fn apply_in(&mut self, namespace: &str, kind: &str, name: &str, yaml: &str) {
        self.0.push((kind.to_owned(), name.to_owned(), namespace.to_owned()));
        let leftover = delete(namespace, kind, name, "120s");
        text_of(&leftover, &format!("kubectl delete of a leftover {kind} {name}"));
        let output = kubectl_stdin(&["-n", namespace, "create", "-f", "-"], yaml);
        text_of(&output, &format!("kubectl create of {kind} {name}"));
    }

    /// Deletes `kind/name` at the end too.
    pub fn track(&mut self, kind: &str, name: &str) {
        self.0.push((kind.to_owned(), name.to_owned(), "default".to_owned()));
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // A failed test's VMs and VMIs are described before they go (diagnostics.rs).
        if std::thread::panicking() {
            for (kind, name, namespace) in &self.0 {
                if matches!(
                    kind.as_str(),
                    "vm" | "vmi" | "virtualmachine" | "virtualmachineinstance"
                ) {
                    super::diagnostics::print_for(namespace, name);
                }
            }
            super::diagnostics::print_webhooks_failed_open();
        }
        for (kind, name, namespace) in self.0.iter().rev() {
            let _ = delete(namespace, kind, name, "90s");
        }
    }
}

/// `kubectl delete` of `kind/name` in `namespace` if it exists, waiting at most `timeout`.
fn delete(namespace: &str, kind: &str, name: &str, timeout: &str) -> Output {
    let timeout = format!("--timeout={timeout}");
    kubectl(&["-n", namespace, "delete", kind, name, "--ignore-not-found", &timeout])
}

pub use kubevirt_tests::node_processes::{Process as NodeProcess, qemu_of};

/// The processes of the pod with `uid` (by the pod's cgroups).
pub fn pod_processes(uid: &str) -> Vec<NodeProcess> {
    kubevirt_tests::node_processes::all()
        .into_iter()
        .filter(|p| p.cgroups.contains(&format!("pod{uid}")))
        .collect()
}

/// The mount table of `node` (its init's mountinfo).
pub fn node_mounts(node: &str) -> String {
    let init = kubevirt_tests::node_processes::matching(&format!("node-init.sh {node} "))
        .into_iter()
        .map(|p| p.pid)
        .min()
        .unwrap_or_else(|| panic!("{node}'s init runs"));
    std::fs::read_to_string(format!("/proc/{init}/mountinfo")).expect("node mountinfo")
}

/// The cluster's nodes, by name.
pub fn node_names() -> Vec<String> {
    kubectl_ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"])
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// A client pod `client` (in `default`, deleted by `cleanup`) fetches `/` from the guest's web
/// server at the pod address `address` and gets the guest's answer.
pub fn pod_reaches_guest_web_server(cleanup: &mut Cleanup, client: &str, address: &str) {
    cleanup.track("pod", client);
    let script = format!(
        "for i in $(seq 1 60); do printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 3 {address} 80 && exit 0; sleep 1; done; exit 1"
    );
    kubectl_ok(&[
        "run",
        client,
        "--image=localhost/kubevirt-rs/testclient:latest",
        "--image-pull-policy=IfNotPresent",
        "--restart=Never",
        "--command",
        "--",
        "/bin/busybox",
        "sh",
        "-c",
        &script,
    ]);
    wait_for("the client pod to finish", Duration::from_secs(90), || {
        let phase = kubectl_ok(&["get", "pod", client, "-o", "jsonpath={.status.phase}"]);
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(())
    });
    let logs = kubectl_ok(&["logs", client]);
    assert!(
        logs.contains("KUBEVIRT-RS-GUEST-HTTP"),
        "the guest's web server answered the pod: {logs}"
    );
}

/// Types `input` on VMI `name`'s serial console until its output contains `expected` (a guest
/// under TCG may still be booting), for at most `timeout`; returns the output that did.
pub fn console_until(name: &str, input: &str, expected: &str, timeout: Duration) -> String {
    console_until_in("default", name, input, expected, timeout)
}

/// [`console_until`] for a VMI in `namespace`.
pub fn console_until_in(namespace: &str, name: &str, input: &str, expected: &str, timeout: Duration) -> String {
    let mut last = String::new();
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        last = console_in(namespace, name, input, 2);
        if last.contains(expected) {
            return last;
        }
    }
    panic!("expected {expected:?} on the console of {name} within {timeout:?}; it printed: {last}")
}

/// Types `input` on the serial console of VMI `name` in `namespace` (virtctl console) and returns
/// what it printed within `seconds`.
pub fn console_in(namespace: &str, name: &str, input: &str, seconds: u64) -> String {
    let mut child = Command::new(virtctl_binary())
        .env("KUBECONFIG", kubeconfig())
        .args(["-n", namespace, "console", name])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("virtctl console");
    let mut stdin = child.stdin.take().expect("stdin");
    std::thread::sleep(Duration::from_secs(2));
    for line in input.lines() {
        std::io::Write::write_all(&mut stdin, format!("{line}\n").as_bytes()).expect("type");
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(seconds));
    let _ = child.kill();
    let output = child.wait_with_output().expect("console output");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// An operator condition's status and reason (`status.conditions[type]`).
pub fn condition(object: &Value, condition_type: &str) -> (String, String) {
    let found = object["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == condition_type))
        .unwrap_or_else(|| panic!("no {condition_type} condition: {object}"));
    (field(found, "status"), field(found, "reason"))
}

/// Whether `object` is controlled by the object of kind `kind` with uid `uid`.
pub fn controlled_by(object: &Value, kind: &str, uid: &str) -> bool {
    object["metadata"]["ownerReferences"].as_array().is_some_and(|owners| {
        owners
            .iter()
            .any(|o| o["kind"] == kind && o["uid"] == uid && o["controller"] == true)
    })
}
