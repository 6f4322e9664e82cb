//! virt-api's node connection against a real virt-handler console server, launcher, libvirt and
//! QEMU: mutual TLS with certificates from one CA, only virt-api's admitted, pause and unpause reaching the domain (the
//! VMI's Paused condition comes and goes), and the serial console answering a shell command.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kubevirt_api::v1::VirtualMachineInstancePhase as Phase;
use virt_api::backends::{HandlerConnector, NodeConnector, NodeError, VmiAction};
use virt_handler::node::ConsoleServerConfig;

use control_loop::tls::test_pki::TestCa;

use super::fixture::{Stopper, assert_stops_cleanly, spawn_launcher, wait_for_guest_marker, wait_until};
use super::with_handler::{World, free_port};

/// A CA, virt-handler's serving certificate, virt-api's client certificate, and the wrong ones
/// (a handler's migration client certificate, an expired virt-api certificate), written as PEM
/// files under `dir`.
fn certificates(dir: &Path) {
    use control_loop::tls::{HANDLER_SERVER, MIGRATION_CLIENT, VIRT_API_CLIENT};
    let ca = TestCa::new("kubevirt.io@1");
    std::fs::write(dir.join("ca.crt"), ca.cert_pem()).expect("write");
    for (name, pair) in [
        ("server", ca.server(HANDLER_SERVER, &["virt-handler"])),
        ("client", ca.client(VIRT_API_CLIENT)),
        ("migration", ca.client(MIGRATION_CLIENT)),
        ("expired", ca.expired_client(VIRT_API_CLIENT)),
    ] {
        std::fs::write(dir.join(format!("{name}.crt")), pair.cert).expect("write");
        std::fs::write(dir.join(format!("{name}.key")), pair.key).expect("write");
    }
}

/// A connector presenting the certificate `name` from `dir`.
fn connector(port: u16, dir: &Path, name: &str) -> HandlerConnector {
    let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    HandlerConnector::new(port, Some(&dir.join("ca.crt")), Some((&cert, &key))).expect("client TLS")
}

fn paused(world: &World) -> bool {
    world.api.vmi(&world.key).and_then(|v| v.status).is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.condition_type == "Paused" && c.status == "True")
    })
}

#[tokio::test]
async fn virt_api_pauses_unpauses_and_attaches_the_console_through_the_handler() {
    let uid = "2e3f4a5b-6c7d-4e8f-9a0b-b1c2d3e4f5a6";
    let (world, dirs, vmi) = World::new("remote", uid);
    let launcher = spawn_launcher(&dirs, "remote", uid);
    let _stopper = Stopper(launcher.id());
    let certs = world.root.path().join("certs");
    std::fs::create_dir_all(&certs).expect("certs dir");
    certificates(&certs);
    let tls = control_loop::tls::server_tls_for(
        &control_loop::tls::CertSource::Files {
            cert: certs.join("server.crt"),
            key: certs.join("server.key"),
        },
        Some(&virt_handler::console_server::console_clients(certs.join("ca.crt"))),
    )
    .expect("server TLS");
    let listen = free_port();
    let mut config = world.config();
    config.console = Some(ConsoleServerConfig {
        listen,
        tls: tls.config,
    });
    world.api.apply(vmi);
    let (stop, handler) = world.start_handler_with(config);
    world.wait_for_phase(Phase::Running, Duration::from_secs(120)).await;
    wait_for_guest_marker(&dirs.private, uid).await;

    let address = listen.ip().to_string();
    let node = connector(listen.port(), &certs, "client");
    node.vmi_action(&address, "default", "remote", VmiAction::Pause)
        .await
        .expect("pause");
    wait_until("the Paused condition", Duration::from_secs(10), async || {
        paused(&world).then_some(())
    })
    .await;
    node.vmi_action(&address, "default", "remote", VmiAction::Unpause)
        .await
        .expect("unpause");
    wait_until("the Paused condition gone", Duration::from_secs(10), async || {
        (!paused(&world)).then_some(())
    })
    .await;

    // A client without virt-api's certificate is turned away at the handshake, and so are a
    // handler's migration certificate from the same CA and virt-api's expired one.
    let anonymous = HandlerConnector::new(listen.port(), Some(&certs.join("ca.crt")), None).expect("client TLS");
    let strangers = [
        anonymous,
        connector(listen.port(), &certs, "migration"),
        connector(listen.port(), &certs, "expired"),
    ];
    for stranger in strangers {
        let refused = stranger
            .vmi_action(&address, "default", "remote", VmiAction::Pause)
            .await;
        assert!(matches!(refused, Err(NodeError::Unreachable { .. })), "{refused:?}");
        let console = stranger.console(&address, "default", "remote").await;
        assert!(console.is_err(), "the console is refused too");
    }
    assert!(!paused(&world));
    let unknown = node.vmi_action(&address, "default", "ghost", VmiAction::Pause).await;
    assert!(
        matches!(unknown, Err(NodeError::Refused { code: 404, .. })),
        "{unknown:?}"
    );

    let mut console = node.console(&address, "default", "remote").await.expect("console");
    console
        .to_guest
        .send(b"echo CONSOLE-$((6*7))\r".to_vec())
        .await
        .expect("keystrokes");
    let seen = Arc::new(std::sync::Mutex::new(String::new()));
    wait_until(
        "the shell's answer on the console",
        Duration::from_secs(15),
        async || {
            while let Ok(Some(bytes)) =
                tokio::time::timeout(Duration::from_millis(100), console.from_guest.recv()).await
            {
                seen.lock().expect("lock").push_str(&String::from_utf8_lossy(&bytes));
            }
            seen.lock().expect("lock").contains("CONSOLE-42").then_some(())
        },
    )
    .await;
    drop(console);

    stop.cancel();
    handler.await.expect("handler stopped");
    assert_stops_cleanly(launcher, world.root.path(), &world.socket());
}
