//! An upgrade through the KubeVirt CR's `imageTag`: virt-operator rolls the components handler
//! first, then virt-controller's workload updater moves the VMIs whose launcher is now outdated
//! as `workloadUpdateStrategy` says: with `LiveMigrate`, a VMI that can migrate moves to a new
//! launcher and one that cannot is left undisturbed (labelled and counted); adding `Evict` evicts
//! the second one's launcher; going back to the installed tag with `Evict` evicts the migrated
//! one from the pod its migration made.

use std::time::Duration;

use super::faults::{assert_guest_answers, assert_undisturbed, handler_pod, running_test_guest};
use super::support::{
    Cleanup, cluster_dir, example, field, get, kubectl, kubectl_ok, patch_kubevirt, qemu_of, wait_for, wait_for_phase,
};

/// `ctr` against every node's containerd, in Kubernetes' namespace: the first failure, else the
/// last node's output.
fn ctr(args: &[&str]) -> std::process::Output {
    let mut last = None;
    for node in super::support::node_names() {
        let socket = cluster_dir().join(format!("nodes/{node}/run/containerd/containerd.sock"));
        let output = std::process::Command::new("ctr")
            .arg("--address")
            .arg(socket)
            .args(["-n", "k8s.io"])
            .args(args)
            .output()
            .expect("ctr runs");
        if !output.status.success() {
            return output;
        }
        last = Some(output);
    }
    last.expect("the cluster has nodes")
}

/// The images virt-operator deploys from `spec.imageTag`.
const COMPONENTS: [&str; 4] = ["virt-api", "virt-controller", "virt-handler", "virt-launcher"];
/// The tag the test moves them to.
const UPGRADE_TAG: &str = "e2e-upgrade";

/// The KubeVirt CR's observed version and phase.
fn kubevirt_state() -> String {
    kubevirt_field("{.status.observedKubeVirtVersion} {.status.phase} {.status.targetKubeVirtVersion}")
}

/// A JSONPath of the KubeVirt CR, as text.
fn kubevirt_field(jsonpath: &str) -> String {
    let output = kubectl(&[
        "-n",
        "kubevirt",
        "get",
        "kubevirt",
        "kubevirt",
        "-o",
        &format!("jsonpath={jsonpath}"),
    ]);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Merge-patches the KubeVirt CR's spec; fails the test when kubectl does.
fn patch_spec(spec: &str) {
    let patch: serde_json::Value = serde_json::from_str(&format!(r#"{{"spec":{spec}}}"#)).expect("a JSON patch");
    let output = patch_kubevirt(&patch);
    assert!(
        output.status.success(),
        "patching the KubeVirt CR with {spec}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Puts the KubeVirt CR back on the installed tag without workload updates, waits until
/// virt-operator has rolled the components back, and removes the test's tags, however the test
/// ends, so the other tests see the cluster as installed.
struct RestoreImageTag;

impl Drop for RestoreImageTag {
    fn drop(&mut self) {
        let _ = patch_kubevirt(&serde_json::json!({"spec": {"imageTag": null, "workloadUpdateStrategy": null}}));
        let deadline = std::time::Instant::now() + Duration::from_secs(400);
        while kubevirt_state() != "latest Deployed latest" && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
        }
        for component in COMPONENTS {
            let _ = ctr(&[
                "images",
                "rm",
                &format!("localhost/kubevirt-rs/{component}:{UPGRADE_TAG}"),
            ]);
        }
    }
}

/// Deletes the migrations of the test's VMIs (found by the label the migration controller gives
/// them) when made and when dropped, so that a run counts only its own.
struct MigrationsOf(&'static [&'static str]);

impl MigrationsOf {
    fn delete(&self) {
        for vmi in self.0 {
            let _ = kubectl(&[
                "-n",
                "default",
                "delete",
                "vmim",
                "-l",
                &format!("kubevirt.io/vmi-name={vmi}"),
                "--ignore-not-found",
            ]);
        }
    }

    fn new(vmis: &'static [&'static str]) -> Self {
        let migrations = Self(vmis);
        migrations.delete();
        migrations
    }
}

impl Drop for MigrationsOf {
    fn drop(&mut self) {
        self.delete();
    }
}

/// The creation times of the pods labelled `kubevirt.io=<component>`, sorted (RFC 3339 in UTC, so
/// their text sorts as time does).
fn created(component: &str) -> Vec<String> {
    let times = kubectl_ok(&[
        "-n",
        "kubevirt",
        "get",
        "pods",
        "-l",
        &format!("kubevirt.io={component}"),
        "-o",
        "jsonpath={range .items[*]}{.metadata.creationTimestamp}{\"\\n\"}{end}",
    ]);
    let mut times: Vec<String> = times.lines().map(str::to_owned).collect();
    times.sort();
    times
}

/// Waits until VMI `name` reports `LiveMigratable` as `status`.
fn wait_for_migratable(name: &str, status: &str) {
    wait_for(
        &format!("LiveMigratable={status} on {name}"),
        Duration::from_secs(60),
        || {
            let vmi = get("vmi", name, "default")?;
            let conditions = vmi["status"]["conditions"].as_array()?.clone();
            conditions
                .iter()
                .any(|c| c["type"] == "LiveMigratable" && c["status"] == status)
                .then_some(())
        },
    );
}

/// The test guest with a bridge on the pod network, which cannot live-migrate.
fn unmigratable_test_guest(name: &str) -> (Cleanup, u32) {
    let manifest = example("vmi-testguest.yaml", name)
        .replacen(
            "      disks:\n",
            "      interfaces:\n        - name: default\n          bridge: {}\n      disks:\n",
            1,
        )
        .replacen(
            "  volumes:\n",
            "  networks:\n    - name: default\n      pod: {}\n  volumes:\n",
            1,
        );
    assert!(
        manifest.contains("bridge: {}") && manifest.contains("pod: {}"),
        "{manifest}"
    );
    let mut cleanup = Cleanup::new();
    cleanup.apply("vmi", name, &manifest);
    wait_for_phase(name, "Running", Duration::from_secs(120));
    (cleanup, qemu_of(name).expect("QEMU runs").pid)
}

/// The workload-update migrations of VMI `name`.
fn update_migrations(name: &str) -> Vec<String> {
    let all = kubectl_ok(&[
        "-n",
        "default",
        "get",
        "vmim",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.vmiName} {.metadata.annotations.kubevirt\\.io/workloadUpdateMigration}|{\"\\n\"}{end}",
    ]);
    all.lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let (migration, vmi) = (fields.next()?, fields.next()?);
            (vmi == name && migration.starts_with("kubevirt-workload-update-") && l.ends_with(" |"))
                .then(|| migration.to_owned())
        })
        .collect()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
#[allow(clippy::too_many_lines, reason = "one upgrade, step by step")]
fn a_new_image_tag_rolls_the_components_in_order_then_moves_outdated_vmis_as_the_strategy_says() {
    let _migrations = MigrationsOf::new(&["e2e-roll", "e2e-roll-stay"]);
    let (_moved_cleanup, _, node) = running_test_guest("e2e-roll");
    let (_stay_cleanup, stay_qemu) = unmigratable_test_guest("e2e-roll-stay");
    wait_for_migratable("e2e-roll", "True");
    wait_for_migratable("e2e-roll-stay", "False");
    // The same images under a new tag, as a release would bring, in every node's image store.
    for component in COMPONENTS {
        let installed = format!("localhost/kubevirt-rs/{component}:latest");
        let updated = format!("localhost/kubevirt-rs/{component}:{UPGRADE_TAG}");
        let tagged = ctr(&["images", "tag", "--force", &installed, &updated]);
        assert!(
            tagged.status.success(),
            "ctr images tag {installed}: {}",
            String::from_utf8_lossy(&tagged.stderr)
        );
    }
    let _restore = RestoreImageTag;
    let old = handler_pod(&node);
    patch_spec(&format!(
        r#"{{"imageTag":"{UPGRADE_TAG}","workloadUpdateStrategy":{{"workloadUpdateMethods":["LiveMigrate"]}}}}"#
    ));
    let upgraded = format!("{UPGRADE_TAG} Deployed {UPGRADE_TAG}");
    wait_for("virt-operator to deploy the new tag", Duration::from_secs(400), || {
        (kubevirt_state() == upgraded).then_some(())
    });
    assert_ne!(handler_pod(&node), old, "a new handler pod");
    for (kind, name) in [
        ("deployment", "virt-api"),
        ("deployment", "virt-controller"),
        ("daemonset", "virt-handler"),
    ] {
        let object = get(kind, name, "kubevirt").unwrap_or_else(|| panic!("{kind} {name}"));
        assert_eq!(
            field(&object, "spec.template.spec.containers.0.image"),
            format!("localhost/kubevirt-rs/{name}:{UPGRADE_TAG}")
        );
    }
    let new_launcher = format!("localhost/kubevirt-rs/virt-launcher:{UPGRADE_TAG}");
    let controller = get("deployment", "virt-controller", "kubevirt").expect("virt-controller");
    assert!(
        controller
            .to_string()
            .contains(&format!("--launcher-image={new_launcher}")),
        "new VMs get the new launcher"
    );
    // Upstream's update order, each finished before the next: every new handler pod was made
    // before the new controllers, and those before the new virt-api pods.
    let (handlers, controllers, apis) = (created("virt-handler"), created("virt-controller"), created("virt-api"));
    assert!(
        handlers.last() <= controllers.first() && controllers.last() <= apis.first(),
        "handler {handlers:?}, controller {controllers:?}, api {apis:?}"
    );

    // LiveMigrate: the VMI that can migrate moves to a launcher of the new image, through one
    // workload-update migration; the guest runs on.
    let moved = wait_for(
        "the migratable VMI on the new launcher",
        Duration::from_secs(300),
        || {
            let vmi = get("vmi", "e2e-roll", "default")?;
            (field(&vmi, "status.launcherContainerImageVersion") == new_launcher
                && field(&vmi, "status.migrationState.completed") == "true")
                .then_some(vmi)
        },
    );
    assert_eq!(field(&moved, "status.phase"), "Running");
    assert!(
        !update_migrations("e2e-roll").is_empty(),
        "a workload-update migration moved it"
    );
    assert_guest_answers("e2e-roll");
    // The VMI that cannot migrate is left as it was: outdated, labelled and counted.
    assert_undisturbed("e2e-roll-stay", stay_qemu);
    let stay = wait_for(
        "the unmigratable VMI labelled outdated",
        Duration::from_secs(60),
        || {
            get("vmi", "e2e-roll-stay", "default").filter(|v| {
                v["metadata"]["labels"]
                    .as_object()
                    .is_some_and(|l| l.contains_key("kubevirt.io/outdatedLauncherImage"))
            })
        },
    );
    assert_ne!(field(&stay, "status.launcherContainerImageVersion"), new_launcher);
    assert!(update_migrations("e2e-roll-stay").is_empty());
    wait_for("one outdated workload counted", Duration::from_secs(60), || {
        (kubevirt_field("{.status.outdatedVirtualMachineInstanceWorkloads}") == "1").then_some(())
    });

    // Evict: the unmigratable VMI's launcher pod is evicted, which ends the bare VMI.
    patch_spec(r#"{"workloadUpdateStrategy":{"workloadUpdateMethods":["LiveMigrate","Evict"]}}"#);
    wait_for("the evicted VMI to end", Duration::from_secs(180), || {
        let phase = get("vmi", "e2e-roll-stay", "default").map_or_else(String::new, |v| field(&v, "status.phase"));
        matches!(phase.as_str(), "" | "Succeeded" | "Failed").then_some(())
    });
    let events = kubectl_ok(&[
        "-n",
        "default",
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=e2e-roll-stay,reason=SuccessfulEvict",
        "-o",
        "name",
    ]);
    assert!(!events.trim().is_empty(), "a SuccessfulEvict event");
    wait_for("no outdated workload counted", Duration::from_secs(60), || {
        (kubevirt_field("{.status.outdatedVirtualMachineInstanceWorkloads}") == "0").then_some(())
    });

    // Back to the installed tag with Evict alone: the migrated VMI is outdated again, and the
    // pod it now runs in (the migration's former target) is the one evicted.
    patch_spec(r#"{"imageTag":null,"workloadUpdateStrategy":{"workloadUpdateMethods":["Evict"]}}"#);
    wait_for(
        "virt-operator to deploy the installed tag",
        Duration::from_secs(400),
        || (kubevirt_state() == "latest Deployed latest").then_some(()),
    );
    wait_for("the migrated VMI evicted", Duration::from_secs(180), || {
        let phase = get("vmi", "e2e-roll", "default").map_or_else(String::new, |v| field(&v, "status.phase"));
        matches!(phase.as_str(), "" | "Succeeded" | "Failed").then_some(())
    });
}
