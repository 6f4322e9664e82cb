//! The virtctl binary against a virt-api on loopback (fake cluster and node behind it), reached
//! through a kubeconfig as kubectl would: lifecycle commands print upstream's lines, refusals exit
//! non-zero with the server's message, and the console pipes stdin and stdout until `Ctrl+]`.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use base64::Engine as _;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use virt_api::app_state::AppState;
use virt_api::backends::{FAKE_CONSOLE_BANNER, FakeNodeConnector, FakeSubresourceCluster, VmiAction};
use virt_api::server::{fake_app, router, serve_on_loopback};
use virt_api::subresources::authorize::Authentication;
use virt_api::tls::{CertSource, server_tls};

struct Fixture {
    kubeconfig: tempfile::NamedTempFile,
    state: Arc<AppState<FakeSubresourceCluster, FakeNodeConnector>>,
    cluster: Arc<FakeSubresourceCluster>,
    stop: CancellationToken,
}

fn fixture() -> Fixture {
    let tls = server_tls(&CertSource::SelfSigned {
        names: vec!["127.0.0.1".to_owned()],
    })
    .expect("tls");
    let (state, cluster) = fake_app(Authentication::Disabled);
    let (port, stop) = serve_on_loopback(router(state.clone()), tls.config).expect("serve");
    let ca = base64::engine::general_purpose::STANDARD.encode(tls.cert_pem.as_bytes());
    let mut kubeconfig = tempfile::NamedTempFile::new().expect("kubeconfig");
    write!(
        kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority-data: {ca}\nusers:\n- name: me\n  user:\n    token: test-token\ncontexts:\n- name: local\n  context:\n    cluster: local\n    user: me\n    namespace: vms\ncurrent-context: local\n"
    )
    .expect("write kubeconfig");
    cluster.put_vm(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm", "namespace": "vms"},
        "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}}
    }));
    Fixture {
        kubeconfig,
        state,
        cluster,
        stop,
    }
}

impl Fixture {
    /// Runs virtctl; each part of `stdin` is written 300 ms after the previous one.
    async fn virtctl(&self, args: &[&str], stdin: &[&[u8]]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_virtctl"));
        command
            .env("KUBECONFIG", self.kubeconfig.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let input: Vec<Vec<u8>> = stdin.iter().map(|part| part.to_vec()).collect();
        tokio::task::spawn_blocking(move || {
            let mut child = command.spawn().expect("virtctl starts");
            let mut pipe = child.stdin.take().expect("stdin");
            for part in input {
                std::thread::sleep(std::time::Duration::from_millis(300));
                pipe.write_all(&part).expect("stdin");
            }
            drop(pipe);
            child.wait_with_output().expect("virtctl exits")
        })
        .await
        .expect("join")
    }

    fn running_vmi(&self) {
        self.cluster.put_handler("node1", "10.0.0.9");
        self.cluster.put_vmi(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm", "namespace": "vms", "uid": "vmi-uid"},
            "spec": {"domain": {"devices": {}}}, "status": {"phase": "Running", "nodeName": "node1"}
        }));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn lifecycle_commands_print_upstreams_lines_and_refusals_exit_non_zero() {
    let f = fixture();
    let out = f.virtctl(&["start", "vm"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "VM vm was scheduled to start\n");
    assert_eq!(
        f.cluster.vm("vms", "vm").expect("vm")["spec"]["runStrategy"],
        "Always",
        "the context's namespace is used"
    );

    f.running_vmi();
    let out = f.virtctl(&["start", "vm"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "virtctl: error: Error starting VirtualMachine: Operation cannot be fulfilled on virtualmachine.kubevirt.io \"vm\": VM is already running\n"
    );

    let out = f.virtctl(&["stop", "ghost"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("virtualmachine.kubevirt.io \"ghost\" not found"),
        "{}",
        text(&out.stderr)
    );

    let out = f.virtctl(&["stop", "vm", "--force", "--grace-period", "0"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "VM vm was scheduled to stop\n");
    assert_eq!(
        f.cluster.vmi("vms", "vm").expect("vmi")["spec"]["terminationGracePeriodSeconds"],
        0
    );

    let out = f.virtctl(&["restart", "vm", "--force"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "virtctl: error: Must both use --force=true and set --grace-period.\n"
    );

    let out = f.virtctl(&["pause", "vmi", "vm"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "VMI vm was scheduled to pause\n");
    assert_eq!(
        f.state.node.calls(),
        [("10.0.0.9".to_owned(), "vms/vm".to_owned(), VmiAction::Pause)]
    );

    let out = f.virtctl(&["unpause", "vm", "vm", "-n", "other"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("virtctl: error: Error unpausing VirtualMachine: "),
        "{}",
        text(&out.stderr)
    );
    f.stop.cancel();
}

#[tokio::test]
async fn the_console_pipes_the_terminal_until_the_escape_key() {
    let f = fixture();
    f.running_vmi();
    let out = f.virtctl(&["console", "vm"], &[b"hello", b"\x1d"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with(&text(FAKE_CONSOLE_BANNER)), "{stdout:?}");
    assert!(stdout.contains("hello"), "the fake node echoes keystrokes: {stdout:?}");
    assert!(text(&out.stderr).contains("Successfully connected to vm console. The escape sequence is ^]"));
    f.stop.cancel();
}
