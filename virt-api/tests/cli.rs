//! The virt-api binary's command line: conflicting certificate flags are a usage error, bad files
//! are named, and the install manifest's arguments are accepted (virt-api then waits for the
//! cluster that keeps its certificates, and stops on SIGTERM).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../../kubevirt-tests/support/install.rs"]
mod install;

fn virt_api() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_virt-api"));
    command
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/kubeconfig");
    command
}

#[test]
fn certificate_flags_that_conflict_are_a_usage_error() {
    let output = virt_api()
        .args(["--self-signed", "--cluster-certificates"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let output = virt_api().output().expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("give either --tls-cert-file and --tls-key-file, --self-signed, or --cluster-certificates"),
        "{stderr}"
    );
}

/// Regression (#31): handler certificate flags that `--cluster-certificates` would replace, or a
/// client certificate without the CA to check virt-handler with, were silently dropped.
#[test]
fn handler_certificate_flags_that_would_be_dropped_are_a_usage_error() {
    for args in [
        &["--cluster-certificates", "--handler-ca-file", "/tmp/ca.pem"][..],
        &[
            "--self-signed",
            "--handler-client-cert-file",
            "/tmp/c.pem",
            "--handler-client-key-file",
            "/tmp/k.pem",
        ][..],
    ] {
        let output = virt_api().args(args).output().expect("run");
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn a_missing_certificate_file_is_named() {
    let output = virt_api()
        .args([
            "--listen",
            "127.0.0.1:0",
            "--tls-cert-file",
            "/nonexistent/tls.crt",
            "--tls-key-file",
            "/nonexistent/tls.key",
        ])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read the TLS certificate /nonexistent/tls.crt"),
        "{stderr}"
    );
}

#[test]
fn the_install_manifests_arguments_are_accepted() {
    let mut args = install::container_args("virt-api.yaml", "virt-api", &[]);
    args.retain(|a| !a.starts_with("--listen="));
    let mut child = virt_api()
        .args(&args)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        child.try_wait().expect("wait").is_none(),
        "virt-api waits for the cluster with the manifest's arguments"
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let begin = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            begin.elapsed() < Duration::from_secs(10),
            "virt-api did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("waiting for the Kubernetes API server to read the certificates"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stopped before the Kubernetes API server could be reached"),
        "{stderr}"
    );
}
