//! The operator without a cluster: what a CR renders into, the status matrix, and whole passes
//! over the in-memory API server.

use hostpath_provisioner_operator::api::{HostPathProvisioner, HostPathProvisionerSpec, StoragePool};
use hostpath_provisioner_operator::reconciler::{self, Next};
use hostpath_provisioner_operator::render::{self, DAEMON_SET, RenderError, Settings};
use hostpath_provisioner_operator::status::{self, Pass};
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Container, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use operator_kit::conditions::{AVAILABLE, DEGRADED, OperatorCondition, PROGRESSING};
use operator_kit::objects::Desired;
use operator_kit::objects::fake::FakeObjects;
use operator_kit::placement::NodePlacement;
use pretty_assertions::assert_eq;

fn settings() -> Settings {
    Settings {
        namespace: "hostpath-provisioner".to_owned(),
        driver_image: "example/hostpath-csi-driver:1".to_owned(),
        provisioner_image: "example/csi-provisioner:1".to_owned(),
        version: "v1".to_owned(),
        verbosity: "3".to_owned(),
    }
}

fn pool(name: &str, path: &str) -> StoragePool {
    StoragePool {
        name: name.to_owned(),
        path: path.to_owned(),
        ..StoragePool::default()
    }
}

/// Upstream's sample CR, as the API server gives it (with a uid).
fn sample() -> HostPathProvisioner {
    let mut cr = HostPathProvisioner::new(
        "hostpath-provisioner",
        HostPathProvisionerSpec {
            image_pull_policy: Some("Always".to_owned()),
            storage_pools: vec![pool("local", "/var/hpvolumes"), pool("fast", "/mnt/ssd")],
            workload: NodePlacement {
                node_selector: [("kubernetes.io/os".to_owned(), "linux".to_owned())].into(),
                tolerations: vec![Toleration {
                    key: Some("storage".to_owned()),
                    operator: Some("Exists".to_owned()),
                    ..Toleration::default()
                }],
                ..NodePlacement::default()
            },
            ..HostPathProvisionerSpec::default()
        },
    );
    cr.metadata.uid = Some("cr-uid".to_owned());
    cr
}

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("a valid second"))
}

fn daemon_set_of(objects: &[Desired]) -> DaemonSet {
    objects
        .iter()
        .find(|d| d.resource.kind == "DaemonSet")
        .expect("a DaemonSet")
        .typed()
        .expect("a DaemonSet's shape")
}

fn container<'a>(daemon_set: &'a DaemonSet, name: &str) -> &'a Container {
    daemon_set
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.iter().find(|c| c.name == name))
        .expect("the container")
}

fn env<'a>(container: &'a Container, name: &str) -> Option<&'a str> {
    container
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .as_deref()
}

#[test]
fn a_cr_renders_upstreams_objects_each_controlled_by_it() {
    let objects = render::render(&sample(), &settings()).expect("renders");
    let names: Vec<String> = objects.iter().map(Desired::describe).collect();
    assert_eq!(
        names,
        [
            "ServiceAccount hostpath-provisioner/hostpath-provisioner-admin-csi",
            "ClusterRole hostpath-provisioner-admin-csi",
            "ClusterRoleBinding hostpath-provisioner-admin-csi",
            "Role hostpath-provisioner/hostpath-provisioner-admin-csi",
            "RoleBinding hostpath-provisioner/hostpath-provisioner-admin-csi",
            "CSIDriver kubevirt.io.hostpath-provisioner",
            "DaemonSet hostpath-provisioner/hostpath-provisioner-csi",
        ]
    );
    for object in &objects {
        let owners = object.object.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owners.len(), 1, "{}", object.describe());
        let owner = &owners[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("HostPathProvisioner", "hostpath-provisioner", "cr-uid", Some(true)),
            "{}",
            object.describe()
        );
        let labels = object.object.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("k8s-app").map(String::as_str), Some("hostpath-provisioner"));
    }
}

#[test]
fn each_pool_is_a_host_directory_the_driver_is_given() {
    let daemon_set = daemon_set_of(&render::render(&sample(), &settings()).expect("renders"));
    let driver = container(&daemon_set, "hostpath-provisioner");
    assert_eq!(
        env(driver, "PV_DIR"),
        Some(
            r#"[{"name":"local","path":"local-data-dir/csi","shared":false},{"name":"fast","path":"fast-data-dir/csi","shared":false}]"#
        )
    );
    assert_eq!(env(driver, "VERSION"), Some("v1"));
    assert_eq!(driver.image.as_deref(), Some("example/hostpath-csi-driver:1"));
    let mounts: Vec<(String, Option<String>)> = driver
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| m.name.ends_with("-data-dir"))
        .map(|m| (m.mount_path.clone(), m.mount_propagation.clone()))
        .collect();
    let host_to_container = Some("HostToContainer".to_owned());
    assert_eq!(
        mounts,
        [
            ("/local-data-dir".to_owned(), host_to_container.clone()),
            ("/fast-data-dir".to_owned(), host_to_container)
        ]
    );
    let pod = daemon_set
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod");
    let host_paths: Vec<(String, String)> = pod
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.name.ends_with("-data-dir"))
        .map(|v| {
            (
                v.name.clone(),
                v.host_path.as_ref().map(|h| h.path.clone()).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        host_paths,
        [
            ("local-data-dir".to_owned(), "/var/hpvolumes".to_owned()),
            ("fast-data-dir".to_owned(), "/mnt/ssd".to_owned())
        ]
    );
    let provisioner = container(&daemon_set, "csi-provisioner");
    assert!(provisioner.args.iter().flatten().any(|a| a == "--node-deployment=true"));
    assert_eq!(provisioner.image.as_deref(), Some("example/csi-provisioner:1"));
}

#[test]
fn the_workload_placement_and_pull_policy_reach_the_pods() {
    let cr = sample();
    let daemon_set = daemon_set_of(&render::render(&cr, &settings()).expect("renders"));
    let pod = daemon_set
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod");
    assert_eq!(pod.node_selector.as_ref(), Some(&cr.spec.workload.node_selector));
    assert_eq!(pod.tolerations.as_ref(), Some(&cr.spec.workload.tolerations));
    for name in ["hostpath-provisioner", "csi-provisioner"] {
        assert_eq!(
            container(&daemon_set, name).image_pull_policy.as_deref(),
            Some("Always")
        );
    }

    let mut plain = sample();
    plain.spec.workload = NodePlacement::default();
    plain.spec.image_pull_policy = None;
    let daemon_set = daemon_set_of(&render::render(&plain, &settings()).expect("renders"));
    let pod = daemon_set
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod");
    assert_eq!(
        (
            pod.node_selector.as_ref(),
            pod.tolerations.as_ref(),
            pod.affinity.as_ref()
        ),
        (None, None, None)
    );
    assert_eq!(container(&daemon_set, "csi-provisioner").image_pull_policy, None);
}

#[test]
fn a_cr_without_a_uid_is_not_rendered() {
    let mut cr = sample();
    cr.metadata.uid = None;
    let error = render::render(&cr, &settings()).expect_err("no owner");
    assert!(
        matches!(error, RenderError::NoUid(ref name) if name == "hostpath-provisioner"),
        "{error}"
    );
}

fn daemon_set(desired: i32, ready: i32) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta::default(),
        status: Some(DaemonSetStatus {
            desired_number_scheduled: desired,
            updated_number_scheduled: Some(desired),
            number_ready: ready,
            ..DaemonSetStatus::default()
        }),
        ..DaemonSet::default()
    }
}

/// (Available, Progressing, Degraded) and the explaining reason.
fn summary(conditions: &[OperatorCondition]) -> (Vec<&str>, Option<&str>) {
    let status = |t: &str| {
        conditions
            .iter()
            .find(|c| c.condition_type == t)
            .map_or("missing", |c| c.status.as_str())
    };
    (
        vec![status(AVAILABLE), status(PROGRESSING), status(DEGRADED)],
        conditions.iter().find_map(|c| c.reason.as_deref()),
    )
}

/// A case of the status matrix: the pass, the DaemonSet, the version installed before; the
/// conditions (Available, Progressing, Degraded), the reason and the version installed after.
type Case<'a> = (
    &'a Pass,
    Option<&'a DaemonSet>,
    Option<&'a str>,
    [&'a str; 3],
    &'a str,
    Option<&'a str>,
);

/// Every pass outcome × DaemonSet state × installed version.
#[test]
#[expect(clippy::too_many_lines, reason = "a table of cases")]
fn the_status_matrix() {
    let failed = Pass::Failed("applying DaemonSet x failed: forbidden".to_owned());
    let ready = daemon_set(2, 2);
    let not_ready = daemon_set(2, 1);
    let cases: Vec<Case<'_>> = vec![
        // pass, DaemonSet, observed before -> conditions, reason, observed after
        (
            &failed,
            Some(&ready),
            None,
            ["False", "True", "True"],
            "Reconcile Failed",
            None,
        ),
        (
            &failed,
            None,
            Some("v1"),
            ["False", "True", "True"],
            "Reconcile Failed",
            Some("v1"),
        ),
        (
            &Pass::Applied,
            Some(&ready),
            None,
            ["True", "False", "False"],
            "Complete",
            Some("v1"),
        ),
        (
            &Pass::Applied,
            Some(&ready),
            Some("v1"),
            ["True", "False", "False"],
            "Complete",
            Some("v1"),
        ),
        (
            &Pass::Applied,
            Some(&ready),
            Some("v0"),
            ["True", "False", "False"],
            "Complete",
            Some("v1"),
        ),
        (
            &Pass::Applied,
            Some(&not_ready),
            None,
            ["False", "True", "False"],
            "DeployStarted",
            None,
        ),
        (
            &Pass::Applied,
            None,
            None,
            ["False", "True", "False"],
            "DeployStarted",
            None,
        ),
        (
            &Pass::Applied,
            Some(&not_ready),
            Some("v1"),
            ["False", "False", "True"],
            "Degraded",
            Some("v1"),
        ),
        (
            &Pass::Applied,
            None,
            Some("v1"),
            ["False", "False", "True"],
            "Degraded",
            Some("v1"),
        ),
        (
            &Pass::Applied,
            Some(&not_ready),
            Some("v0"),
            ["True", "True", "True"],
            "UpgradeStarted",
            Some("v0"),
        ),
        (
            &Pass::Applied,
            None,
            Some("v0"),
            ["True", "True", "True"],
            "UpgradeStarted",
            Some("v0"),
        ),
    ];
    for (pass, daemon_set, observed, conditions, reason, observed_after) in cases {
        let mut cr = sample();
        cr.status = Some(hostpath_provisioner_operator::api::HostPathProvisionerStatus {
            observed_version: observed.map(str::to_owned),
            ..Default::default()
        });
        let status = status::decide(&cr, pass, daemon_set, "v1", &at(10));
        let case = format!("{pass:?} {daemon_set:?} {observed:?}");
        assert_eq!(
            summary(&status.conditions),
            (conditions.to_vec(), Some(reason)),
            "{case}"
        );
        assert_eq!(status.observed_version.as_deref(), observed_after, "{case}");
        assert_eq!(
            (status.operator_version.as_deref(), status.target_version.as_deref()),
            (Some("v1"), Some("v1"))
        );
        let pools: Vec<(&str, &str)> = status
            .storage_pool_statuses
            .iter()
            .map(|p| (p.name.as_str(), p.phase.as_str()))
            .collect();
        assert_eq!(pools, [("fast", "Ready"), ("local", "Ready")], "sorted by name");
    }
    let failed_status = status::decide(&sample(), &failed, None, "v1", &at(10));
    assert_eq!(
        degraded_message(&failed_status.conditions),
        "Unable to successfully reconcile: applying DaemonSet x failed: forbidden"
    );
}

/// The CR `name` as the fake API server holds it (the operator writes its status there).
fn stored_cr_named(objects: &FakeObjects, name: &str) -> HostPathProvisioner {
    let key = format!("HostPathProvisioner {name}");
    objects
        .state()
        .objects
        .get(&key)
        .expect("the CR")
        .clone()
        .try_parse()
        .expect("a CR")
}

/// The sample CR as the fake API server holds it.
fn stored_cr(objects: &FakeObjects) -> HostPathProvisioner {
    stored_cr_named(objects, "hostpath-provisioner")
}

/// The `Degraded` condition's message.
fn degraded_message(conditions: &[OperatorCondition]) -> String {
    let degraded = conditions
        .iter()
        .find(|c| c.condition_type == DEGRADED)
        .expect("Degraded");
    degraded.message.clone().unwrap_or_default()
}

#[tokio::test]
async fn passes_deploy_then_serve_then_rest() {
    let objects = FakeObjects::default();
    objects.put(&Desired::from_typed(&sample()).expect("converts"));

    // First pass: everything applied, the DaemonSet has no ready pod yet.
    let next = reconciler::reconcile(&objects, &stored_cr(&objects), &settings(), &at(1))
        .await
        .expect("a pass");
    assert_eq!(next, Next::LookAgain);
    let writes = objects.state().writes.clone();
    assert_eq!(writes.len(), 8, "{writes:?}");
    assert_eq!(
        writes.last().map(String::as_str),
        Some("status HostPathProvisioner hostpath-provisioner")
    );
    assert_eq!(
        summary(&stored_cr(&objects).status.unwrap_or_default().conditions).1,
        Some("DeployStarted")
    );

    // The kubelets start the pods.
    {
        let mut state = objects.state();
        let key = format!("DaemonSet hostpath-provisioner/{DAEMON_SET}");
        let ds = state.objects.get_mut(&key).expect("the DaemonSet");
        ds.data["status"] = serde_json::json!({ "observedGeneration": ds.metadata.generation, "desiredNumberScheduled": 2, "numberReady": 2, "updatedNumberScheduled": 2, "currentNumberScheduled": 2, "numberMisscheduled": 0 });
        state.writes.clear();
    }
    let next = reconciler::reconcile(&objects, &stored_cr(&objects), &settings(), &at(2))
        .await
        .expect("a pass");
    assert_eq!(next, Next::Rest);
    let status = stored_cr(&objects).status.unwrap_or_default();
    assert_eq!(
        summary(&status.conditions),
        (vec!["True", "False", "False"], Some("Complete"))
    );
    assert_eq!(status.observed_version.as_deref(), Some("v1"));

    // Nothing changed: nothing is written, neither the objects nor the status.
    objects.state().writes.clear();
    reconciler::reconcile(&objects, &stored_cr(&objects), &settings(), &at(3))
        .await
        .expect("a pass");
    assert_eq!(objects.state().writes, Vec::<String>::new());
}

#[tokio::test]
async fn a_refused_object_degrades_the_cr_with_the_api_servers_message() {
    let objects = FakeObjects::default();
    objects.put(&Desired::from_typed(&sample()).expect("converts"));
    objects.state().refuse_apply = Some((
        "ClusterRole hostpath-provisioner-admin-csi".to_owned(),
        "forbidden: escalation".to_owned(),
    ));
    let next = reconciler::reconcile(&objects, &stored_cr(&objects), &settings(), &at(1))
        .await
        .expect("a pass");
    assert_eq!(next, Next::LookAgain);
    let writes = objects.state().writes.clone();
    assert_eq!(
        writes,
        [
            "apply ServiceAccount hostpath-provisioner/hostpath-provisioner-admin-csi",
            "status HostPathProvisioner hostpath-provisioner"
        ],
        "nothing after the refused object"
    );
    let status = stored_cr(&objects).status.unwrap_or_default();
    assert_eq!(
        summary(&status.conditions),
        (vec!["False", "True", "True"], Some("Reconcile Failed"))
    );
    let message = degraded_message(&status.conditions);
    assert!(
        message.contains("ClusterRole hostpath-provisioner-admin-csi failed: forbidden: escalation"),
        "{message}"
    );
}

#[tokio::test]
async fn a_cr_being_deleted_is_left_to_the_garbage_collector() {
    let objects = FakeObjects::default();
    let mut cr = sample();
    cr.metadata.deletion_timestamp = Some(at(5));
    objects.put(&Desired::from_typed(&cr).expect("converts"));
    let next = reconciler::reconcile(&objects, &cr, &settings(), &at(6))
        .await
        .expect("a pass");
    assert_eq!(next, Next::Rest);
    assert!(objects.state().writes.is_empty());
}

#[test]
fn the_objects_it_made_lead_back_to_their_cr() {
    let objects = render::render(&sample(), &settings()).expect("renders");
    for object in &objects {
        assert_eq!(
            reconciler::owner_of(&object.object.metadata).as_deref(),
            Some("hostpath-provisioner"),
            "{}",
            object.describe()
        );
    }
    assert_eq!(reconciler::owner_of(&ObjectMeta::default()), None);
}

#[tokio::test]
async fn a_second_cr_is_refused_and_nothing_is_applied() {
    let objects = FakeObjects::default();
    objects.put(&Desired::from_typed(&sample()).expect("converts"));
    let mut other = sample();
    other.metadata.name = Some("another".to_owned());
    other.metadata.uid = Some("another-uid".to_owned());
    objects.put(&Desired::from_typed(&other).expect("converts"));
    let next = reconciler::reconcile(&objects, &other, &settings(), &at(1))
        .await
        .expect("a pass");
    assert_eq!(next, Next::LookAgain, "looked at again: the other CR may go");
    assert_eq!(objects.state().writes, ["status HostPathProvisioner another"]);
    let status = stored_cr_named(&objects, "another").status.unwrap_or_default();
    assert_eq!(
        degraded_message(&status.conditions),
        "Unable to successfully reconcile: there should be a single hostpath provisioner, 2 items found"
    );
}
