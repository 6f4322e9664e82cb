//! What a failed test leaves behind to be explained: for each VM or VMI it made, the VMI's status,
//! its migrations and events, and the lines of KubeVirt's components and the API server that
//! name it. [`super::support::Cleanup`] prints this when a test panics, before it deletes what the
//! test made, so a failure seen once (a flake under load) can be read afterwards.

use super::support::{cluster_dir, kubectl};

/// Lines kept from each component's log: the last ones that name the object.
const LOG_LINES: usize = 80;

/// The KubeVirt components whose logs name VMIs, by their `kubevirt.io` label.
const COMPONENTS: [&str; 3] = ["virt-api", "virt-controller", "virt-handler"];

/// Prints what is known of `namespace/name` (a VM or a VMI) to stderr, which the test harness
/// shows with the failure.
pub fn print_for(namespace: &str, name: &str) {
    let mut report = ["=== diagnostics for ", namespace, "/", name, "\n"].concat();
    for (what, args) in [
        (
            "the VMI",
            vec!["-n", namespace, "get", "vmi", name, "-o", "yaml", "--ignore-not-found"],
        ),
        (
            "its migrations",
            vec![
                "-n",
                namespace,
                "get",
                "vmim",
                "-l",
                &format!("kubevirt.io/vmi-name={name}"),
                "-o",
                "yaml",
            ],
        ),
        (
            "its events",
            vec![
                "-n",
                namespace,
                "get",
                "events",
                "--sort-by=.metadata.creationTimestamp",
                "--field-selector",
                &format!("involvedObject.name={name}"),
            ],
        ),
        (
            "its pods",
            vec![
                "-n",
                namespace,
                "get",
                "pods",
                "-o",
                "wide",
                "-l",
                &format!("vm.kubevirt.io/name={name}"),
            ],
        ),
    ] {
        section(&mut report, what, &command_text(&args));
    }
    for component in COMPONENTS {
        // The names from stdout alone: a warning on stderr is not a pod.
        let pods = kubectl(&[
            "-n",
            "kubevirt",
            "get",
            "pods",
            REQUEST_TIMEOUT,
            "-l",
            &format!("kubevirt.io={component}"),
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
        ]);
        for pod in String::from_utf8_lossy(&pods.stdout).lines().filter(|l| !l.is_empty()) {
            let log = command_text(&["-n", "kubevirt", "logs", pod, "--all-containers", "--tail=20000"]);
            section(
                &mut report,
                &[pod, ": its last lines naming ", name].concat(),
                &last_lines_naming(&log, name),
            );
        }
    }
    section(
        &mut report,
        &["kube-apiserver: its last lines naming ", name].concat(),
        &last_lines_naming(&apiserver_log(), name),
    );
    eprintln!("{report}");
}

/// Prints the webhook calls the API server let through because the webhook did not answer (the
/// eviction interceptor's failurePolicy is Ignore): they do not name the object.
pub fn print_webhooks_failed_open() {
    let mut report = String::new();
    section(
        &mut report,
        "kube-apiserver: its last webhook calls that failed open",
        &last_lines_naming(&apiserver_log(), "failing open"),
    );
    eprintln!("{report}");
}

fn apiserver_log() -> String {
    std::fs::read_to_string(cluster_dir().join("logs/kube-apiserver.log")).unwrap_or_default()
}

/// Each call's limit: a cluster that no longer answers must not hold the failed test's cleanup.
const REQUEST_TIMEOUT: &str = "--request-timeout=20s";

/// The output (or the error) of a kubectl command, as text.
fn command_text(args: &[&str]) -> String {
    let mut args = args.to_vec();
    args.push(REQUEST_TIMEOUT);
    let output = kubectl(&args);
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The last [`LOG_LINES`] lines of `log` that contain `text`, each ending in a newline.
fn last_lines_naming(log: &str, text: &str) -> String {
    let naming: Vec<&str> = log.lines().filter(|l| l.contains(text)).collect();
    let start = naming.len().saturating_sub(LOG_LINES);
    let mut lines = String::new();
    for line in &naming[start..] {
        lines.push_str(line);
        lines.push('\n');
    }
    lines
}

/// Appends a titled section to `report`.
fn section(report: &mut String, title: &str, body: &str) {
    for part in ["--- ", title, "\n", body] {
        report.push_str(part);
    }
    if !body.ends_with('\n') {
        report.push('\n');
    }
}
