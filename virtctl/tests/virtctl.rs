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

#[tokio::test]
async fn create_vm_writes_upstreams_manifest_and_expand_applies_the_instance_type() {
    let f = fixture();
    let out = f
        .virtctl(
            &[
                "create",
                "vm",
                "--name",
                "my-vm",
                "--instancetype",
                "u1.medium",
                "--preference",
                "virtualmachinepreference/fedora",
                "--volume-containerdisk",
                "src:quay.io/containerdisks/fedora:latest,bootorder:1",
            ],
            &[],
        )
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifest: serde_json::Value = serde_saphyr::from_str(&text(&out.stdout)).expect("YAML");
    assert_eq!(
        manifest,
        json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "my-vm"},
            "spec": {
                "instancetype": {"name": "u1.medium"},
                "preference": {"name": "fedora", "kind": "VirtualMachinePreference"},
                "runStrategy": "Always",
                "template": {"spec": {
                    "domain": {"devices": {"disks": [{"name": "my-vm-containerdisk-0", "bootOrder": 1}]}},
                    "terminationGracePeriodSeconds": 180,
                    "volumes": [{"name": "my-vm-containerdisk-0",
                                 "containerDisk": {"image": "quay.io/containerdisks/fedora:latest"}}]
                }}
            }
        })
    );
    let printed = text(&out.stdout);
    let keys: Vec<&str> = printed
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        keys,
        ["apiVersion", "kind", "metadata", "spec"],
        "keys in alphabetical order"
    );

    let out = f
        .virtctl(&["create", "vm", "--volume-containerdisk", "src:x"], &[])
        .await;
    let generated: serde_json::Value = serde_saphyr::from_str(&text(&out.stdout)).expect("YAML");
    let name = generated["metadata"]["name"].as_str().expect("name");
    assert!(name.starts_with("vm-") && name.len() == 8, "{name}");
    assert_eq!(
        generated["spec"]["template"]["spec"]["domain"]["memory"]["guest"],
        "512Mi"
    );
    assert_eq!(
        generated["spec"].get("instancetype"),
        None,
        "a containerDisk carries no labels"
    );

    let out = f.virtctl(&["create", "vm", "--instancetype", "pod/x"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "virtctl: error: invalid instancetype kind \"pod\", supported values are: virtualmachineinstancetype, virtualmachineclusterinstancetype\n"
    );

    f.cluster.put_instancetype_object(
        &kubevirt_api::instancetype::VirtualMachineClusterInstancetype::NAMES,
        "",
        json!({"metadata": {"name": "u1.medium"}, "spec": {"cpu": {"guest": 2}, "memory": {"guest": "4Gi"}}}),
    );
    let mut file = tempfile::NamedTempFile::new().expect("file");
    write!(
        file,
        "{}",
        text(
            &f.virtctl(&["create", "vm", "--name", "x", "--instancetype", "u1.medium"], &[])
                .await
                .stdout
        )
    )
    .expect("write");
    let path = file.path().to_string_lossy().into_owned();
    let out = f.virtctl(&["expand", "--file", &path, "-o", "json"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let expanded: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(expanded["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"], 2);
    assert_eq!(expanded["metadata"]["namespace"], "vms");
    assert_eq!(expanded["spec"].get("instancetype"), None);

    let out = f.virtctl(&["expand", "--vm", "vm"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stored: serde_json::Value = serde_saphyr::from_str(&text(&out.stdout)).expect("YAML");
    assert_eq!(
        stored["metadata"]["name"], "vm",
        "a VM without an instance type comes back as it is"
    );
}

#[tokio::test]
async fn migrate_asks_virt_api_for_a_migration_and_says_so() {
    let f = fixture();
    let out = f.virtctl(&["migrate", "vm"], &[]).await;
    assert_eq!(out.status.code(), Some(1), "not running yet");
    assert!(
        text(&out.stderr).starts_with("virtctl: error: Error migrating VirtualMachine: "),
        "{}",
        text(&out.stderr)
    );
    f.running_vmi();
    let out = f
        .virtctl(&["migrate", "vm", "--addedNodeSelector=disk=ssd,zone=b"], &[])
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "VM vm was scheduled to migrate\n");
    let created: Vec<serde_json::Value> = f
        .cluster
        .writes()
        .into_iter()
        .filter_map(|w| match w {
            virt_api::backends::Recorded::CreateMigration { migration, .. } => Some(migration),
            _ => None,
        })
        .collect();
    assert_eq!(created.len(), 1);
    assert_eq!(
        created[0]["spec"],
        json!({"vmiName": "vm", "addedNodeSelector": {"disk": "ssd", "zone": "b"}})
    );
    let out = f.virtctl(&["migrate", "vm", "--addedNodeSelector=disk"], &[]).await;
    assert_eq!(out.status.code(), Some(2), "a bad selector is a usage error");
    f.stop.cancel();
}

/// `--volume-import` writes a DataVolume template and its volume (a disk only with a boot order),
/// after the PVC volumes, the deprecated `--volume-datasource` comes first with its warning, an
/// imported DataSource is what the instance type is inferred from when it boots first, and bad
/// values are refused with upstream's messages.
#[tokio::test]
async fn create_vm_imports_volumes_as_data_volume_templates() {
    let f = fixture();
    let out = f
        .virtctl(
            &[
                "create",
                "vm",
                "--name",
                "imported",
                "--volume-pvc",
                "src:data",
                "--volume-import",
                "type:http,url:http://images.default.svc/disk.qcow2,size:1Gi,name:root,bootorder:2",
                "--volume-datasource",
                "src:os-images/debian,name:base,bootorder:1",
            ],
            &[],
        )
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "Flag --volume-datasource has been deprecated, use flag --volume-import instead\n"
    );
    let manifest: serde_json::Value = serde_saphyr::from_str(&text(&out.stdout)).expect("YAML");
    let spec = &manifest["spec"];
    assert_eq!(
        spec["dataVolumeTemplates"],
        json!([
            {"metadata": {"name": "base"}, "spec": {
                "sourceRef": {"kind": "DataSource", "namespace": "os-images", "name": "debian"}, "storage": {}}},
            {"metadata": {"name": "root"}, "spec": {
                "source": {"http": {"url": "http://images.default.svc/disk.qcow2"}},
                "storage": {"resources": {"requests": {"storage": "1Gi"}}}}}
        ])
    );
    let template = &spec["template"]["spec"];
    assert_eq!(
        template["volumes"],
        json!([
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "base", "dataVolume": {"name": "base"}},
            {"name": "root", "dataVolume": {"name": "root"}}
        ])
    );
    assert_eq!(
        template["domain"]["devices"]["disks"],
        json!([{"name": "base", "bootOrder": 1}, {"name": "root", "bootOrder": 2}])
    );
    assert_eq!(
        spec["instancetype"],
        json!({"inferFromVolume": "base", "inferFromVolumeFailurePolicy": "Ignore"}),
        "the DataSource boots first"
    );
    f.stop.cancel();
}

/// Bad `--volume-import` values and clashes with other volumes get upstream's messages; a
/// generated name is `imported-volume-` and five characters.
#[tokio::test]
async fn create_vm_refuses_bad_volume_imports() {
    let f = fixture();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--volume-import", "type:blank,size:1Gi", "--infer-instancetype"],
            "this datavolume is not valid to infer an instancetype or preference from (source needs to be PVC, \
             Registry or Snapshot, sourceRef needs to be DataSource)",
        ),
        (
            &[
                "--volume-import",
                "type:blank,size:1Gi,bootorder:1",
                "--volume-import",
                "type:blank,size:1Gi,bootorder:1",
            ],
            "failed to parse \"--volume-import\" flag: bootorder 1 was specified multiple times",
        ),
        (
            &[
                "--volume-pvc",
                "src:my-name",
                "--volume-import",
                "type:blank,size:1Gi,name:my-name",
            ],
            "failed to parse \"--volume-import\" flag: there is already a volume with name \"my-name\"",
        ),
        (
            &["--volume-import", "type:s3,size:1Gi,url:s3://b/k"],
            "failed to parse \"--volume-import\" flag: volume import type \"s3\" is not supported by kubevirt-rs \
             (its CDI imports from http, registry, pvc, blank and ds)",
        ),
    ];
    for (flags, message) in cases {
        let args: Vec<&str> = ["create", "vm"].iter().chain(flags).copied().collect();
        let out = f.virtctl(&args, &[]).await;
        assert_eq!(out.status.code(), Some(1), "{flags:?}");
        assert_eq!(text(&out.stderr), format!("virtctl: error: {message}\n"), "{flags:?}");
    }
    let out = f.virtctl(&["create", "vm", "--volume-blank", ""], &[]).await;
    assert!(
        text(&out.stderr)
            .ends_with("virtctl: error: failed to parse \"--volume-import\" flag: params may not be empty\n"),
        "{}",
        text(&out.stderr)
    );
    let out = f
        .virtctl(&["create", "vm", "--volume-import", "type:blank,size:1Gi"], &[])
        .await;
    let generated: serde_json::Value = serde_saphyr::from_str(&text(&out.stdout)).expect("YAML");
    let name = generated["spec"]["dataVolumeTemplates"][0]["metadata"]["name"]
        .as_str()
        .expect("a generated name");
    assert!(
        name.starts_with("imported-volume-") && name.len() == "imported-volume-".len() + 5,
        "{name}"
    );
    f.stop.cancel();
}
