//! The virt-handler binary's command line: a missing required flag and an unreachable API server are
//! clear errors with a non-zero exit, and nothing is left listening.

use std::process::Command;

fn handler() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_virt-handler"));
    command
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("NODE_NAME");
    command
}

#[test]
fn a_missing_required_flag_is_a_usage_error() {
    let output = handler().output().expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("required"), "{stderr}");
}

#[test]
fn no_reachable_api_server_is_a_clear_error() {
    let output = handler()
        .args(["--hostname-override", "node01", "--port", "0"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("virt-handler: error: cannot reach the Kubernetes API")),
        "{stderr}"
    );
}

#[test]
fn an_unreadable_console_certificate_names_the_file() {
    let output = handler()
        .args(["--hostname-override", "node01", "--port", "0"])
        .args([
            "--console-tls-cert-file",
            "/nonexistent/tls.crt",
            "--console-tls-key-file",
            "/nonexistent/tls.key",
            "--console-client-ca-file",
            "/nonexistent/ca.crt",
        ])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("virt-handler: error: cannot read the TLS certificate /nonexistent/tls.crt"),
        "{stderr}"
    );
}

#[test]
fn a_console_key_without_its_certificate_is_a_usage_error() {
    let output = handler()
        .args(["--hostname-override", "node01", "--console-tls-key-file", "/tmp/k"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
}

#[path = "../../kubevirt-tests/support/install.rs"]
mod install;

#[test]
fn the_install_manifests_arguments_are_accepted() {
    let env = [("NODE_NAME", "node01"), ("MY_POD_IP", "10.0.0.5")];
    let args = install::container_args("virt-handler.yaml", "virt-handler", &env);
    let output = handler().args(&args).output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read the TLS certificate /etc/virt-handler/servercertificates/"),
        "the arguments parse and the mounted certificate is looked for: {stderr}"
    );
}
