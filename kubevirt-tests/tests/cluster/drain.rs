//! `kubectl drain` of a node with VMIs on it, as an administrator drains one for maintenance:
//! virt-api's eviction webhook turns the eviction of a `LiveMigrate` VMI's launcher pod into an
//! evacuation (429, so drain retries), virt-controller migrates the VMI to the other node, and
//! drain completes once the source pod is done. With `evictionStrategy: None` the launcher pod is
//! evicted: a bare VMI is shut down, and a VM with `runStrategy: Always` gets a new VMI on the
//! other node.

use std::time::Duration;

use super::migration::{migratable_vm, running_and_migratable};
use super::support::{Cleanup, example, field, get, kubectl, kubectl_ok, node_names, wait_for, wait_for_phase};

/// On drop: every node schedulable again, whatever the test did. Declared before the test's
/// [`Cleanup`], so that the VMs are gone first.
struct Uncordon(Vec<String>);

impl Drop for Uncordon {
    fn drop(&mut self) {
        for node in &self.0 {
            let _ = kubectl(&["uncordon", node]);
        }
    }
}

/// The nodes virt-api's pods run on.
fn virt_api_nodes() -> Vec<String> {
    kubectl_ok(&[
        "-n",
        "kubevirt",
        "get",
        "pods",
        "-l",
        "kubevirt.io=virt-api",
        "-o",
        "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
    ])
    .lines()
    .map(str::to_owned)
    .collect()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
#[allow(
    clippy::too_many_lines,
    reason = "one drain, its set-up and each VMI's outcome, in order"
)]
fn kubectl_drain_migrates_live_migrate_vmis_and_evicts_the_others() {
    const MOVES: &str = "e2e-drain-moves";
    const RESTARTS: &str = "e2e-drain-restarts";
    const STOPS: &str = "e2e-drain-stops";
    let nodes = node_names();
    assert!(nodes.len() >= 2, "the e2e tier runs on two nodes: {nodes:?}");
    let drained = nodes[nodes.len() - 1].clone();
    let _uncordon = Uncordon(nodes.clone());
    let mut cleanup = Cleanup::new();

    // Everything starts on the node to drain: the others are cordoned meanwhile.
    for node in nodes.iter().filter(|n| **n != drained) {
        kubectl_ok(&["cordon", node]);
    }
    cleanup.apply(
        "vm",
        MOVES,
        &migratable_vm(MOVES, "", "", "      evictionStrategy: LiveMigrate\n"),
    );
    cleanup.apply(
        "vm",
        RESTARTS,
        &example("vm-testguest.yaml", RESTARTS).replace(
            "      terminationGracePeriodSeconds: 30\n",
            "      evictionStrategy: None\n      terminationGracePeriodSeconds: 30\n",
        ),
    );
    assert!(
        kubectl_ok(&[
            "get",
            "vm",
            RESTARTS,
            "-o",
            "jsonpath={.spec.template.spec.evictionStrategy}"
        ]) == "None",
        "the VM's VMIs are evicted"
    );
    let bare = example("vmi-testguest.yaml", STOPS).replace(
        "  terminationGracePeriodSeconds: 30\n",
        "  evictionStrategy: None\n  terminationGracePeriodSeconds: 30\n",
    );
    assert!(bare.contains("evictionStrategy: None"), "{bare}");
    cleanup.apply("vmi", STOPS, &bare);
    let moves = running_and_migratable(MOVES);
    let restarts = wait_for_phase(RESTARTS, "Running", Duration::from_secs(180));
    let stops = wait_for_phase(STOPS, "Running", Duration::from_secs(180));
    for vmi in [&moves, &restarts, &stops] {
        assert_eq!(field(vmi, "status.nodeName"), drained, "{vmi}");
    }
    for node in nodes.iter().filter(|n| **n != drained) {
        kubectl_ok(&["uncordon", node]);
    }
    // virt-api leaves the node first, so that its eviction webhook answers throughout the drain
    // (it fails open: an eviction it cannot answer goes through).
    kubectl_ok(&["cordon", &drained]);
    kubectl_ok(&[
        "-n",
        "kubevirt",
        "delete",
        "pods",
        "-l",
        "kubevirt.io=virt-api",
        "--field-selector",
        &format!("spec.nodeName={drained}"),
        "--wait=true",
    ]);
    kubectl_ok(&[
        "-n",
        "kubevirt",
        "rollout",
        "status",
        "deployment/virt-api",
        "--timeout=180s",
    ]);
    assert!(!virt_api_nodes().contains(&drained), "virt-api left {drained}");

    let drain = kubectl(&[
        "drain",
        &drained,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=400s",
    ]);
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&drain.stdout),
        String::from_utf8_lossy(&drain.stderr)
    );
    assert!(drain.status.success(), "kubectl drain completes: {output}");
    assert!(
        output.contains(&format!(
            "admission webhook \"virt-launcher-eviction-interceptor.kubevirt.io\" denied the request: Eviction triggered evacuation of VMI \"default/{MOVES}\""
        )),
        "the first eviction became an evacuation: {output}"
    );

    // LiveMigrate: the same VMI, moved.
    let migrated = get("vmi", MOVES, "default").expect("the migrated VMI");
    assert_eq!(
        field(&migrated, "metadata.uid"),
        field(&moves, "metadata.uid"),
        "the same VMI"
    );
    assert_eq!(field(&migrated, "status.phase"), "Running");
    assert_ne!(field(&migrated, "status.nodeName"), drained);
    assert_eq!(migrated["status"]["migrationState"]["completed"], true, "{migrated}");
    let evacuation = migrated["status"]["migrationState"]["migrationUid"].clone();
    assert!(evacuation.is_string(), "{migrated}");
    wait_for("the evacuation mark cleared", Duration::from_secs(60), || {
        get("vmi", MOVES, "default").filter(|v| v["status"]["evacuationNodeName"].is_null())
    });

    // None on a VM that always runs: a new VMI, on another node.
    let restarted = wait_for("a new VMI of the VM", Duration::from_secs(240), || {
        get("vmi", RESTARTS, "default").filter(|v| {
            field(v, "metadata.uid") != field(&restarts, "metadata.uid") && field(v, "status.phase") == "Running"
        })
    });
    assert_ne!(field(&restarted, "status.nodeName"), drained);

    // None on a bare VMI: it is shut down and stays down.
    wait_for("the bare VMI stopped", Duration::from_secs(120), || {
        match get("vmi", STOPS, "default") {
            None => Some(()),
            Some(v) if field(&v, "metadata.uid") == field(&stops, "metadata.uid") => {
                matches!(field(&v, "status.phase").as_str(), "Succeeded" | "Failed").then_some(())
            }
            Some(v) => panic!("the bare VMI came back: {v}"),
        }
    });
}
