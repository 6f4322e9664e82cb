//! The VM webhooks with instance types and preferences, against the in-memory cluster: matcher
//! checks and defaults, inference from volume labels, missing objects, conflicts, requirements,
//! spread topologies, and the template rules checked with the instance type applied.

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kubevirt_api::instancetype::{
    VirtualMachineClusterInstancetype, VirtualMachineClusterPreference, VirtualMachineInstancetype,
};
use kubevirt_api::v1::ClusterConfig;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use virt_api::admission::lookup::VolumeObject;
use virt_api::admission::{AdmissionContext, ReviewAnswer, Webhook, admit};
use virt_api::backends::FakeSubresourceCluster;

fn cluster() -> FakeSubresourceCluster {
    let cluster = FakeSubresourceCluster::default();
    cluster.put_instancetype_object(
        &VirtualMachineClusterInstancetype::NAMES,
        "",
        json!({"metadata": {"name": "u1.small"}, "spec": {"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}}}),
    );
    cluster.put_instancetype_object(
        &VirtualMachineInstancetype::NAMES,
        "default",
        json!({"metadata": {"name": "three"}, "spec": {"cpu": {"guest": 3}, "memory": {"guest": "1Gi"}}}),
    );
    cluster.put_instancetype_object(
        &VirtualMachineClusterPreference::NAMES,
        "",
        json!({"metadata": {"name": "needs-two"}, "spec": {"requirements": {"cpu": {"guest": 2}}}}),
    );
    cluster.put_instancetype_object(
        &VirtualMachineClusterPreference::NAMES,
        "",
        json!({"metadata": {"name": "spread"}, "spec": {"cpu": {"preferredCPUTopology": "spread"},
               "machine": {"preferredMachineType": "pc-q35-7.2"}}}),
    );
    cluster
}

fn vm(extra: &Value) -> Value {
    let mut vm = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "my-vm", "namespace": "default"},
        "spec": {"runStrategy": "Always", "template": {"spec": {
            "domain": {"devices": {"disks": [{"name": "root"}]}},
            "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora"}}]
        }}}
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        vm["spec"][key] = value.clone();
    }
    vm
}

fn run(
    hook: Webhook,
    operation: &str,
    object: &Value,
    old: Option<&Value>,
    cluster: &FakeSubresourceCluster,
) -> ReviewAnswer {
    let mut request = json!({
        "uid": "req", "operation": operation, "userInfo": {"username": "alice"},
        "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachine"},
        "resource": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
        "object": object,
    });
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    let body = serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}),
    )
    .expect("review");
    let context = AdmissionContext {
        config: ClusterConfig::default(),
        install_namespace: "kubevirt".to_owned(),
    };
    let now = Time("2026-11-22T00:00:00Z".parse::<Timestamp>().expect("time"));
    futures::executor::block_on(admit(hook, &body, &context, now, &|| "uuid".to_owned(), cluster))
}

fn mutated(object: &Value, cluster: &FakeSubresourceCluster) -> Value {
    let answer = run(Webhook::VmMutate, "CREATE", object, None, cluster);
    assert!(answer.response.allowed, "{:#?}", answer.response);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(answer.response.patch.as_ref().expect("patch"))
        .expect("base64");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch");
    let mut out = object.clone();
    json_patch::patch(&mut out, &patch).expect("applies");
    out
}

fn causes(answer: &ReviewAnswer) -> Vec<(String, String, String)> {
    let status = answer.response.status.as_ref().expect("refused");
    status
        .details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn validated(object: &Value, cluster: &FakeSubresourceCluster) -> ReviewAnswer {
    run(Webhook::VmValidate, "CREATE", object, None, cluster)
}

#[test]
fn matchers_get_the_cluster_wide_kind_and_no_default_machine_type_where_the_preference_has_one() {
    let cluster = cluster();
    let out = mutated(
        &vm(&json!({"instancetype": {"name": "u1.small"}, "preference": {"name": "spread"}})),
        &cluster,
    );
    assert_eq!(
        out["spec"]["instancetype"],
        json!({"name": "u1.small", "kind": "VirtualMachineClusterInstancetype"})
    );
    assert_eq!(
        out["spec"]["preference"],
        json!({"name": "spread", "kind": "VirtualMachineClusterPreference"})
    );
    assert_eq!(
        out["spec"]["template"]["spec"]["domain"]["machine"],
        json!({}),
        "the preference's machine type applies later"
    );
    let plain = mutated(&vm(&json!({})), &cluster);
    assert_eq!(plain["spec"]["template"]["spec"]["domain"]["machine"]["type"], "q35");
}

#[test]
fn malformed_matchers_are_refused_with_upstreams_causes() {
    let cluster = cluster();
    let answer = run(
        Webhook::VmMutate,
        "CREATE",
        &vm(
            &json!({"instancetype": {}, "preference": {"name": "p", "inferFromVolume": "root", "kind": "k", "inferFromVolumeFailurePolicy": "Maybe"}}),
        ),
        None,
        &cluster,
    );
    assert_eq!(
        causes(&answer),
        [
            (
                "FieldValueNotFound",
                "spec.instancetype",
                "Either Name or InferFromVolume should be provided within the instancetype matcher"
            ),
            (
                "FieldValueInvalid",
                "spec.preference.name",
                "Name should not be provided when InferFromVolume is used within the preference matcher"
            ),
            (
                "FieldValueInvalid",
                "spec.preference.kind",
                "Kind should not be provided when InferFromVolume is used within the preference matcher"
            ),
            (
                "FieldValueInvalid",
                "spec.preference.inferFromVolumeFailurePolicy",
                "Invalid value 'Maybe' for InferFromVolumeFailurePolicy"
            ),
        ]
        .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
    );
}

#[test]
fn a_renamed_matcher_with_the_same_pinned_revision_is_refused_on_update() {
    let cluster = cluster();
    let old = vm(&json!({"instancetype": {"name": "u1.small", "revisionName": "r1"}}));
    let new = vm(&json!({"instancetype": {"name": "u1.large", "revisionName": "r1"}}));
    let answer = run(Webhook::VmMutate, "UPDATE", &new, Some(&old), &cluster);
    assert_eq!(
        causes(&answer),
        [(
            "FieldValueInvalid".to_owned(),
            "spec.instancetype.revisionName".to_owned(),
            "the Matcher Name has been updated without updating the RevisionName".to_owned()
        )]
    );
}

#[test]
fn the_instance_type_and_preference_are_inferred_from_a_pvcs_labels() {
    let cluster = cluster();
    cluster.put_volume_object(
        VolumeObject::PersistentVolumeClaim,
        "default",
        json!({"metadata": {"name": "fedora-root", "labels": {
            "instancetype.kubevirt.io/default-instancetype": "three",
            "instancetype.kubevirt.io/default-instancetype-kind": "VirtualMachineInstancetype",
            "instancetype.kubevirt.io/default-preference": "spread"}}}),
    );
    let mut object =
        vm(&json!({"instancetype": {"inferFromVolume": "root"}, "preference": {"inferFromVolume": "root"}}));
    object["spec"]["template"]["spec"]["volumes"][0] =
        json!({"name": "root", "persistentVolumeClaim": {"claimName": "fedora-root"}});
    let out = mutated(&object, &cluster);
    assert_eq!(
        out["spec"]["instancetype"],
        json!({"name": "three", "kind": "VirtualMachineInstancetype"})
    );
    assert_eq!(
        out["spec"]["preference"],
        json!({"name": "spread", "kind": "VirtualMachineClusterPreference"})
    );
}

#[test]
fn inference_failures_refuse_the_vm_or_drop_the_matcher_as_the_policy_says() {
    let cluster = cluster();
    let reject = vm(&json!({"instancetype": {"inferFromVolume": "root"}}));
    let answer = run(Webhook::VmMutate, "CREATE", &reject, None, &cluster);
    let status = answer.response.status.expect("refused");
    assert_eq!(
        (status.code, status.message.as_str()),
        (
            400,
            "unable to infer defaults from volume root as type is not supported"
        )
    );
    let mut ignore =
        vm(&json!({"instancetype": {"inferFromVolume": "root", "inferFromVolumeFailurePolicy": "Ignore"}}));
    ignore["spec"]["template"]["spec"]["domain"]["memory"] = json!({"guest": "512Mi"});
    let out = mutated(&ignore, &cluster);
    assert_eq!(out["spec"].get("instancetype"), None, "dropped");
    assert_eq!(
        out["spec"]["template"]["spec"]["domain"]["memory"],
        json!({"guest": "512Mi"}),
        "the fallback stays"
    );
    let missing =
        vm(&json!({"instancetype": {"inferFromVolume": "nowhere", "inferFromVolumeFailurePolicy": "Ignore"}}));
    let status = run(Webhook::VmMutate, "CREATE", &missing, None, &cluster)
        .response
        .status
        .expect("refused");
    assert_eq!(status.message, "unable to find volume nowhere to infer defaults");
}

#[test]
fn a_missing_instance_type_or_preference_is_refused() {
    let cluster = cluster();
    let answer = validated(
        &vm(
            &json!({"instancetype": {"name": "nowhere", "kind": "VirtualMachineClusterInstancetype"},
                   "preference": {"name": "gone", "kind": "VirtualMachinePreference"}}),
        ),
        &cluster,
    );
    assert_eq!(
        causes(&answer),
        [
            ("FieldValueNotFound", "spec.instancetype",
             "Failure to find instancetype: virtualmachineclusterinstancetypes.instancetype.kubevirt.io \"nowhere\" not found"),
            ("FieldValueNotFound", "spec.preference",
             "Failure to find preference: virtualmachinepreferences.instancetype.kubevirt.io \"gone\" not found"),
        ]
        .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
    );
}

#[test]
fn the_template_is_checked_with_the_instance_type_applied() {
    let cluster = cluster();
    let answer = validated(
        &vm(&json!({"instancetype": {"name": "u1.small", "kind": "VirtualMachineClusterInstancetype"}})),
        &cluster,
    );
    assert!(
        answer.response.allowed,
        "memory comes from the instance type: {:#?}",
        answer.response
    );
    let mut conflicting = vm(&json!({"instancetype": {"name": "u1.small"}}));
    conflicting["spec"]["template"]["spec"]["domain"]["cpu"] = json!({"sockets": 2});
    assert_eq!(
        causes(&validated(&conflicting, &cluster)),
        [(
            "FieldValueInvalid".to_owned(),
            "spec.template.spec.domain.cpu.sockets".to_owned(),
            "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type".to_owned()
        )]
    );
}

#[test]
fn preference_requirements_and_spread_topologies_are_enforced() {
    let cluster = cluster();
    let answer = validated(
        &vm(&json!({"instancetype": {"name": "u1.small"}, "preference": {"name": "needs-two"}})),
        &cluster,
    );
    assert_eq!(
        causes(&answer),
        [(
            "FieldValueInvalid".to_owned(),
            "spec.instancetype".to_owned(),
            "insufficient CPU resources of 1 vCPU provided by instance type, preference requires 2 vCPU".to_owned()
        )]
    );
    let answer = validated(
        &vm(
            &json!({"instancetype": {"name": "three", "kind": "VirtualMachineInstancetype"}, "preference": {"name": "spread"}}),
        ),
        &cluster,
    );
    assert_eq!(
        causes(&answer),
        [(
            "FieldValueInvalid".to_owned(),
            "instancetype.spec.cpu.guest".to_owned(),
            "3 vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2 provided by the preference".to_owned()
        )]
    );
}
