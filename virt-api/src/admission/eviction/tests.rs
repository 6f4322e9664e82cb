//! The pod-eviction webhook through `admit`, with the fake cluster's pods and VMIs.

use kubevirt_api::v1::ClusterConfig;
use serde_json::{Value, json};

use crate::admission::{Webhook, answer_with_fake};
use crate::backends::{FakeSubresourceCluster, PatchTarget, Recorded};

fn review(pod: &str, dry_run: bool, delete_options: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "r1",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "operation": "CREATE",
            "namespace": "prod",
            "name": pod,
            "dryRun": dry_run,
            "userInfo": {"username": "system:serviceaccount:kube-system:drain"},
            "object": {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod, "namespace": "prod"},
                "deleteOptions": delete_options
            }
        }
    }))
    .expect("review")
}

fn launcher_pod(name: &str, node: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "prod",
            "labels": {"kubevirt.io": "virt-launcher"},
            "annotations": {"kubevirt.io/domain": "vm1"}
        },
        "spec": {"nodeName": node, "containers": [{"name": "compute"}]},
        "status": {"phase": phase}
    })
}

fn vmi(strategy: Option<&str>, migratable: bool) -> Value {
    let mut vmi = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm1", "namespace": "prod", "uid": "vmi-uid"},
        "spec": {"domain": {"devices": {}}},
        "status": {
            "phase": "Running",
            "nodeName": "node1",
            "conditions": [{"type": "LiveMigratable", "status": if migratable { "True" } else { "False" }}]
        }
    });
    if let Some(strategy) = strategy {
        vmi["spec"]["evictionStrategy"] = json!(strategy);
    }
    vmi
}

fn cluster(strategy: Option<&str>, migratable: bool) -> FakeSubresourceCluster {
    let cluster = FakeSubresourceCluster::default();
    cluster.put_pod(launcher_pod("virt-launcher-vm1-abcde", "node1", "Running"));
    cluster.put_vmi(vmi(strategy, migratable));
    cluster
}

async fn evict_with(cluster: &FakeSubresourceCluster, body: &[u8], config: ClusterConfig) -> Value {
    answer_with_fake(Webhook::PodEviction, body, config, cluster).await
}

async fn evict(cluster: &FakeSubresourceCluster, pod: &str) -> Value {
    evict_with(cluster, &review(pod, false, &json!({})), ClusterConfig::default()).await
}

fn refused_with(response: &Value) -> (u64, &str) {
    assert_eq!(response["allowed"], false, "{response}");
    (
        response["status"]["code"].as_u64().unwrap_or_default(),
        response["status"]["message"].as_str().unwrap_or_default(),
    )
}

fn evacuation_node(cluster: &FakeSubresourceCluster) -> Value {
    cluster.vmi("prod", "vm1").expect("vmi")["status"]["evacuationNodeName"].clone()
}

#[tokio::test]
async fn a_migratable_vmi_is_marked_and_its_eviction_refused_with_429() {
    let cluster = cluster(Some("LiveMigrate"), true);
    let response = evict(&cluster, "virt-launcher-vm1-abcde").await;
    assert_eq!(
        refused_with(&response),
        (429, "Eviction triggered evacuation of VMI \"prod/vm1\"")
    );
    assert_eq!(evacuation_node(&cluster), "node1");
    assert_eq!(
        cluster.writes(),
        vec![Recorded::Patch {
            target: PatchTarget::VmiStatus,
            key: "prod/vm1".to_owned(),
            patch: json!([{"op": "add", "path": "/status/evacuationNodeName", "value": "node1"}]),
            dry_run: false,
        }]
    );

    // drain retries: the VMI is already marked.
    let again = evict(&cluster, "virt-launcher-vm1-abcde").await;
    assert_eq!(
        refused_with(&again),
        (
            429,
            "Evacuation in progress: Eviction triggered evacuation of VMI \"prod/vm1\""
        )
    );
    assert_eq!(cluster.writes().len(), 1);
}

#[tokio::test]
async fn a_dry_run_eviction_marks_nothing() {
    for (dry_run, options) in [(true, json!({})), (false, json!({"dryRun": ["All"]}))] {
        let cluster = cluster(Some("LiveMigrate"), true);
        let body = review("virt-launcher-vm1-abcde", dry_run, &options);
        let response = evict_with(&cluster, &body, ClusterConfig::default()).await;
        assert_eq!(
            refused_with(&response),
            (429, "Eviction triggered evacuation of VMI \"prod/vm1\"")
        );
        assert_eq!(evacuation_node(&cluster), Value::Null);
        assert!(matches!(
            cluster.writes().as_slice(),
            [Recorded::Patch { dry_run: true, .. }]
        ));
    }
}

#[tokio::test]
async fn each_strategy_decides_by_migratability() {
    let marked = "Eviction triggered evacuation of VMI \"prod/vm1\"";
    let not_migratable = "VMI vm1 is configured with an eviction strategy but is not live-migratable";
    // (strategy, live migratable, refusal message or None when allowed)
    let cases = [
        (None, true, None),
        (Some("None"), true, None),
        (Some("LiveMigrate"), true, Some(marked)),
        (Some("LiveMigrate"), false, Some(not_migratable)),
        (Some("LiveMigrateIfPossible"), true, Some(marked)),
        (Some("LiveMigrateIfPossible"), false, None),
        (Some("External"), true, Some(marked)),
        (Some("External"), false, Some(marked)),
    ];
    for (strategy, migratable, refusal) in cases {
        let cluster = cluster(strategy, migratable);
        let response = evict(&cluster, "virt-launcher-vm1-abcde").await;
        let case = format!("{strategy:?} migratable={migratable}");
        match refusal {
            None => {
                assert_eq!(response["allowed"], true, "{case}: {response}");
                assert!(cluster.writes().is_empty(), "{case}");
            }
            Some(message) => {
                assert_eq!(refused_with(&response), (429, message), "{case}");
                let marked_now = evacuation_node(&cluster) == "node1";
                assert_eq!(marked_now, message == marked, "{case}");
            }
        }
    }
}

#[tokio::test]
async fn the_cluster_strategy_applies_when_the_vmi_has_none() {
    let cluster = cluster(None, true);
    let config = ClusterConfig {
        eviction_strategy: Some("LiveMigrate".to_owned()),
        ..ClusterConfig::default()
    };
    let response = evict_with(&cluster, &review("virt-launcher-vm1-abcde", false, &json!({})), config).await;
    assert_eq!(refused_with(&response).0, 429);
    assert_eq!(evacuation_node(&cluster), "node1");

    // The VMI's own strategy wins over the cluster's.
    let cluster = self::cluster(Some("None"), true);
    let config = ClusterConfig {
        eviction_strategy: Some("LiveMigrate".to_owned()),
        ..ClusterConfig::default()
    };
    let response = evict_with(&cluster, &review("virt-launcher-vm1-abcde", false, &json!({})), config).await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn pods_that_run_no_vmi_are_let_go() {
    let cluster = cluster(Some("LiveMigrate"), true);
    let mut plain = launcher_pod("web", "node1", "Running");
    plain["metadata"]["labels"] = json!({"app": "web"});
    cluster.put_pod(plain);
    cluster.put_pod(launcher_pod("virt-launcher-vm1-done", "node1", "Succeeded"));
    cluster.put_pod(launcher_pod("virt-launcher-vm1-failed", "node1", "Failed"));
    let mut unannotated = launcher_pod("virt-launcher-vm1-bare", "node1", "Running");
    unannotated["metadata"]["annotations"] = json!({});
    cluster.put_pod(unannotated);
    for pod in [
        "web",
        "virt-launcher-vm1-done",
        "virt-launcher-vm1-failed",
        "virt-launcher-vm1-bare",
        "missing",
    ] {
        let response = evict(&cluster, pod).await;
        assert_eq!(response["allowed"], true, "{pod}: {response}");
    }
    assert!(cluster.writes().is_empty());
}

#[tokio::test]
async fn a_target_pod_or_a_missing_vmi_is_refused() {
    let cluster = cluster(Some("LiveMigrate"), true);
    cluster.put_pod(launcher_pod("virt-launcher-vm1-target", "node2", "Running"));
    let response = evict(&cluster, "virt-launcher-vm1-target").await;
    assert_eq!(refused_with(&response), (429, "Eviction request for target Pod"));
    assert!(cluster.writes().is_empty());

    let orphan = FakeSubresourceCluster::default();
    orphan.put_pod(launcher_pod("virt-launcher-vm1-abcde", "node1", "Running"));
    let response = evict(&orphan, "virt-launcher-vm1-abcde").await;
    assert_eq!(
        refused_with(&response),
        (
            429,
            "kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io \"vm1\" not found"
        )
    );
}

#[tokio::test]
async fn only_pod_evictions_are_reviewed() {
    let cluster = cluster(Some("LiveMigrate"), true);
    let mut body: Value = serde_json::from_slice(&review("virt-launcher-vm1-abcde", false, &json!({}))).expect("json");
    body["request"]["resource"] =
        json!({"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"});
    let response = evict_with(
        &cluster,
        &serde_json::to_vec(&body).expect("bytes"),
        ClusterConfig::default(),
    )
    .await;
    assert_eq!(refused_with(&response), (400, "expect resource to be 'pods'"));

    // A pod change other than an eviction passes untouched.
    let mut body: Value = serde_json::from_slice(&review("virt-launcher-vm1-abcde", false, &json!({}))).expect("json");
    body["request"]["subResource"] = json!("status");
    let response = evict_with(
        &cluster,
        &serde_json::to_vec(&body).expect("bytes"),
        ClusterConfig::default(),
    )
    .await;
    assert_eq!(response["allowed"], true);
    assert!(cluster.writes().is_empty());
}
