//! The virt-controller binary's command line: a missing required flag and an unreachable API server are
//! clear errors with a non-zero exit, and nothing is left listening.

use std::process::Command;

fn controller() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_virt-controller"));
    command
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("NODE_NAME");
    command
}

#[test]
fn a_missing_required_flag_is_a_usage_error() {
    let output = controller().output().expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("required"), "{stderr}");
}

#[test]
fn no_reachable_api_server_is_a_clear_error() {
    let output = controller()
        .args([
            "--launcher-image",
            "registry.example/virt-launcher:v0.1.0",
            "--port",
            "0",
        ])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("virt-controller: error: cannot reach the Kubernetes API"),
        "{stderr}"
    );
}

#[path = "../../kubevirt-tests/support/install.rs"]
mod install;

#[test]
fn the_install_manifests_arguments_are_accepted() {
    let mut args = install::container_args("virt-controller.yaml", "virt-controller", &[]);
    args.retain(|a| !a.starts_with("--port="));
    let output = controller().args(&args).args(["--port", "0"]).output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot reach the Kubernetes API"), "{stderr}");
}
