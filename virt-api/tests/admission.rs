//! The admission webhooks on a corpus: valid VMIs and VMs get upstream's defaults (asserted field
//! by field after applying the returned JSON patch), invalid ones get a 422 whose causes carry the
//! exact field path.

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kubevirt_api::v1::ClusterConfig;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use virt_api::admission::{AdmissionContext, ReviewAnswer, Webhook, admit, vm_firmware_uuid};
use virt_api::backends::FakeSubresourceCluster;

const NOW: &str = "2026-11-22T00:00:00Z";
const UUID: &str = "5f0c1a2e-8d3b-4c1f-9a7e-2b6d4e8f0a11";

fn context(config: ClusterConfig) -> AdmissionContext {
    AdmissionContext {
        config,
        install_namespace: "kubevirt".to_owned(),
    }
}

fn review(resource: &str, operation: &str, user: &str, object: &Value, old: Option<&Value>) -> Vec<u8> {
    let mut request = json!({
        "uid": "req-1",
        "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachineInstance"},
        "resource": {"group": "kubevirt.io", "version": "v1", "resource": resource},
        "operation": operation,
        "userInfo": {"username": user},
        "object": object,
    });
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .expect("review")
}

fn run(hook: Webhook, body: &[u8], config: ClusterConfig) -> ReviewAnswer {
    let now = Time(NOW.parse::<Timestamp>().expect("time"));
    let cluster = FakeSubresourceCluster::default();
    let answer = futures::executor::block_on(admit(hook, body, &context(config), now, &|| UUID.to_owned(), &cluster));
    assert_eq!(answer.api_version, "admission.k8s.io/v1");
    assert_eq!(answer.kind, "AdmissionReview");
    answer
}

/// Applies the answer's patch to `object`.
fn patched(answer: &ReviewAnswer, object: &Value) -> Value {
    assert!(answer.response.allowed, "{:#?}", answer.response);
    assert_eq!(answer.response.uid, "req-1");
    let mut out = object.clone();
    if let Some(patch) = &answer.response.patch {
        assert_eq!(answer.response.patch_type.as_deref(), Some("JSONPatch"));
        let bytes = base64::engine::general_purpose::STANDARD.decode(patch).expect("base64");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("JSON patch");
        json_patch::patch(&mut out, &patch).expect("patch applies");
    }
    out
}

fn mutate_vmi(object: &Value, config: ClusterConfig) -> Value {
    let answer = run(
        Webhook::VmiMutate,
        &review("virtualmachineinstances", "CREATE", "alice", object, None),
        config,
    );
    patched(&answer, object)
}

fn vmi(spec: Value) -> Value {
    let mut object = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "vmi", "namespace": "default"}});
    object["spec"] = spec;
    object
}

fn minimal_spec() -> Value {
    json!({
        "domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {"disks": [{"name": "root"}]}},
        "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora"}}]
    })
}

#[test]
fn a_minimal_vmi_gets_upstreams_defaults() {
    let out = mutate_vmi(&vmi(minimal_spec()), ClusterConfig::default());
    let spec = &out["spec"];
    assert_eq!(spec["architecture"], "amd64");
    assert_eq!(spec["domain"]["machine"], json!({"type": "q35"}));
    assert_eq!(spec["domain"]["resources"], json!({"requests": {"memory": "128Mi"}}));
    assert_eq!(spec["domain"]["memory"], json!({"guest": "128Mi"}));
    assert_eq!(
        spec["domain"]["cpu"],
        json!({"cores": 1, "sockets": 1, "threads": 1, "model": "host-model"})
    );
    assert_eq!(spec["domain"]["firmware"], json!({"uuid": UUID}));
    assert_eq!(spec["domain"]["features"], json!({}));
    assert_eq!(
        spec["domain"]["devices"]["disks"],
        json!([{"name": "root", "disk": {"bus": "sata"}}])
    );
    assert_eq!(
        spec["domain"]["devices"]["interfaces"],
        json!([{"name": "default", "bridge": {}}])
    );
    assert_eq!(spec["networks"], json!([{"name": "default", "pod": {}}]));
    assert_eq!(spec["volumes"][0]["containerDisk"]["imagePullPolicy"], "Always");
    assert_eq!(out["metadata"]["finalizers"], json!(["foregroundDeleteVirtualMachine"]));
    assert_eq!(
        out["status"],
        json!({
            "phase": "Pending",
            "phaseTransitionTimestamps": [{"phase": "Pending", "phaseTransitionTimestamp": NOW}],
            "currentCPUTopology": {"cores": 1, "sockets": 1, "threads": 1},
            "memory": {"guestAtBoot": "128Mi", "guestCurrent": "128Mi", "guestRequested": "128Mi"},
            "runtimeUser": 107
        })
    );
}

/// Upstream's mutating webhook marks every new VMI non-root (`status.runtimeUser: 107`) unless the
/// `Root` feature gate is on; virt-controller renders the launcher pod from it.
#[test]
fn a_new_vmi_runs_as_107_unless_the_root_gate_is_on() {
    let default = mutate_vmi(&vmi(minimal_spec()), ClusterConfig::default());
    assert_eq!(default["status"]["runtimeUser"], 107);
    let root = ClusterConfig {
        feature_gates: vec!["Root".to_owned()],
        ..ClusterConfig::default()
    };
    let rooted = mutate_vmi(&vmi(minimal_spec()), root);
    assert_eq!(rooted["status"]["runtimeUser"], 0);
}

#[test]
fn memory_requests_follow_guest_memory_and_overcommit() {
    let spec = json!({"domain": {"memory": {"guest": "1Gi"}, "devices": {}}});
    let plain = mutate_vmi(&vmi(spec.clone()), ClusterConfig::default());
    assert_eq!(plain["spec"]["domain"]["resources"]["requests"]["memory"], "1Gi");
    let config = ClusterConfig {
        memory_overcommit: 150,
        ..ClusterConfig::default()
    };
    let overcommitted = mutate_vmi(&vmi(spec), config);
    assert_eq!(
        overcommitted["spec"]["domain"]["resources"]["requests"]["memory"],
        "715827882"
    );
    let config = ClusterConfig {
        memory_overcommit: 200,
        ..ClusterConfig::default()
    };
    let half = mutate_vmi(
        &vmi(json!({"domain": {"memory": {"guest": "1Gi"}, "devices": {}}})),
        config,
    );
    assert_eq!(half["spec"]["domain"]["resources"]["requests"]["memory"], "512Mi");
    let limits = mutate_vmi(
        &vmi(json!({"domain": {"resources": {"limits": {"memory": "2Gi", "cpu": "1500m"}}, "devices": {}}})),
        ClusterConfig::default(),
    );
    let domain = &limits["spec"]["domain"];
    assert_eq!(
        domain["resources"]["requests"],
        json!({"memory": "2Gi", "cpu": "1500m"})
    );
    assert_eq!(domain["memory"]["guest"], "2Gi");
    assert_eq!(
        domain["cpu"]["sockets"], 2,
        "sockets come from the CPU limit, rounded up"
    );
    let hugepages = mutate_vmi(
        &vmi(json!({"domain": {"memory": {"hugepages": {"pageSize": "2Mi"}}, "devices": {}}})),
        ClusterConfig::default(),
    );
    assert_eq!(hugepages["spec"]["domain"]["resources"]["requests"]["memory"], "2Mi");
    assert_eq!(hugepages["spec"]["domain"]["memory"]["guest"], "2Mi");
}

#[test]
fn the_cluster_configuration_picks_model_machine_binding_and_cpu_request() {
    let config = ClusterConfig {
        cpu_model: Some("Haswell".to_owned()),
        machine_type: "pc-q35-7.2".to_owned(),
        default_network_interface: "masquerade".to_owned(),
        cpu_request: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
            "250m".to_owned(),
        )),
        eviction_strategy: Some("LiveMigrate".to_owned()),
        ..ClusterConfig::default()
    };
    let out = mutate_vmi(&vmi(minimal_spec()), config);
    let spec = &out["spec"];
    assert_eq!(spec["domain"]["cpu"]["model"], "Haswell");
    assert_eq!(spec["domain"]["machine"]["type"], "pc-q35-7.2");
    assert_eq!(
        spec["domain"]["devices"]["interfaces"],
        json!([{"name": "default", "masquerade": {}}])
    );
    assert_eq!(spec["domain"]["resources"]["requests"]["cpu"], "250m");
    assert_eq!(spec["evictionStrategy"], "LiveMigrate");

    let forbidden = ClusterConfig {
        permit_bridge_interface_on_pod_network: false,
        ..ClusterConfig::default()
    };
    let object = vmi(minimal_spec());
    let answer = run(
        Webhook::VmiMutate,
        &review("virtualmachineinstances", "CREATE", "alice", &object, None),
        forbidden,
    );
    assert!(!answer.response.allowed);
    let status = answer.response.status.expect("status");
    assert_eq!(
        (status.code, status.message.as_str()),
        (400, "bridge interface is not enabled in kubevirt-config")
    );
}

#[test]
fn explicit_values_are_kept_and_dependent_defaults_filled() {
    let spec = json!({
        "domain": {
            "cpu": {"cores": 2, "model": "host-passthrough"},
            "memory": {"guest": "256Mi"},
            "machine": {"type": "pc-q35-9.0"},
            "firmware": {"uuid": "11111111-2222-3333-4444-555555555555"},
            "features": {"acpi": {}, "hyperv": {"synictimer": {}, "evmcs": {}, "spinlocks": {}}},
            "clock": {"timer": {"hpet": {}, "rtc": {"tickPolicy": "catchup"}}},
            "devices": {
                "disks": [{"name": "cd", "cdrom": {}}, {"name": "data", "disk": {"bus": "virtio"}}],
                "inputs": [{"name": "tablet"}],
                "watchdog": {"name": "w"},
                "interfaces": [{"name": "default", "masquerade": {}}]
            }
        },
        "networks": [{"name": "default", "pod": {}}],
        "readinessProbe": {"guestAgentPing": {}},
        "volumes": [
            {"name": "cd", "containerDisk": {"image": "registry/iso:v1"}},
            {"name": "data", "emptyDisk": {"capacity": "1Gi"}},
            {"name": "extra", "emptyDisk": {"capacity": "1Gi"}}
        ]
    });
    let out = mutate_vmi(&vmi(spec), ClusterConfig::default());
    let domain = &out["spec"]["domain"];
    assert_eq!(domain["cpu"]["cores"], 2);
    assert_eq!(
        domain["cpu"]["sockets"],
        Value::Null,
        "a given topology is not completed"
    );
    assert_eq!(domain["cpu"]["model"], "host-passthrough");
    assert_eq!(domain["cpu"]["features"], json!([{"name": "vmx", "policy": "require"}]));
    assert_eq!(domain["machine"]["type"], "pc-q35-9.0");
    assert_eq!(domain["firmware"]["uuid"], "11111111-2222-3333-4444-555555555555");
    assert_eq!(domain["features"]["acpi"], json!({"enabled": true}));
    assert_eq!(
        domain["features"]["hyperv"],
        json!({
            "vapic": {"enabled": true}, "spinlocks": {"enabled": true, "spinlocks": 4096},
            "vpindex": {"enabled": true}, "synic": {"enabled": true}, "synictimer": {"enabled": true},
            "evmcs": {"enabled": true}
        })
    );
    assert_eq!(
        domain["clock"]["timer"],
        json!({"hpet": {"present": true}, "rtc": {"tickPolicy": "catchup", "present": true}})
    );
    assert_eq!(
        domain["devices"]["disks"],
        json!([
            {"name": "cd", "cdrom": {"bus": "sata", "readonly": true, "tray": "closed"}},
            {"name": "data", "disk": {"bus": "virtio"}},
            {"name": "extra", "disk": {"bus": "sata"}}
        ])
    );
    assert_eq!(
        domain["devices"]["inputs"],
        json!([{"name": "tablet", "bus": "usb", "type": "tablet"}])
    );
    assert_eq!(
        domain["devices"]["watchdog"],
        json!({"name": "w", "i6300esb": {"action": "reset"}})
    );
    assert_eq!(
        domain["devices"]["interfaces"],
        json!([{"name": "default", "masquerade": {}}])
    );
    assert_eq!(
        out["spec"]["volumes"][0]["containerDisk"]["imagePullPolicy"],
        "IfNotPresent"
    );
    assert_eq!(
        out["spec"]["readinessProbe"],
        json!({"guestAgentPing": {}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
}

#[test]
fn every_example_vmi_is_admitted_and_defaulted() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("examples") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            continue; // instancetypes/: VMs that need their instance type (tests/admission_instancetypes.rs)
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let object: Value = serde_saphyr::from_str(&text).expect("YAML");
        let (resource, mutate, validate) = match object["kind"].as_str() {
            Some("VirtualMachineInstance") => (
                "virtualmachineinstances",
                Webhook::VmiMutate,
                Webhook::VmiValidateCreate,
            ),
            _ => ("virtualmachines", Webhook::VmMutate, Webhook::VmValidate),
        };
        let body = review(resource, "CREATE", "alice", &object, None);
        let mutated = patched(&run(mutate, &body, ClusterConfig::default()), &object);
        let body = review(resource, "CREATE", "alice", &mutated, None);
        let answer = run(validate, &body, ClusterConfig::default());
        assert!(answer.response.allowed, "{}: {:#?}", path.display(), answer.response);
        let spec = if resource == "virtualmachines" {
            &mutated["spec"]["template"]["spec"]
        } else {
            &mutated["spec"]
        };
        assert!(spec["domain"]["machine"]["type"].is_string(), "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 8);
}

fn denied(answer: &ReviewAnswer) -> Vec<(String, String, String)> {
    assert!(!answer.response.allowed);
    let status = answer.response.status.as_ref().expect("status");
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes = &status.details.as_ref().expect("details").causes;
    let joined = causes.iter().map(|c| c.message.as_str()).collect::<Vec<_>>().join(", ");
    assert_eq!(status.message, joined);
    causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

#[test]
fn invalid_vmis_are_refused_with_their_field_paths() {
    let mut spec = minimal_spec();
    spec["domain"]["devices"]["disks"][0]["name"] = json!("missing");
    let body = review("virtualmachineinstances", "CREATE", "alice", &vmi(spec), None);
    let causes = denied(&run(Webhook::VmiValidateCreate, &body, ClusterConfig::default()));
    let fields: Vec<&str> = causes.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.domain.devices.disks[0].name", "spec.domain.volumes[0].name"],
        "upstream's path for unused volumes"
    );
    assert_eq!(causes[0].0, "FieldValueNotFound");

    let mut bad_type = vmi(minimal_spec());
    bad_type["spec"]["domain"]["cpu"] = json!({"cores": "two"});
    let body = review("virtualmachineinstances", "CREATE", "alice", &bad_type, None);
    let causes = denied(&run(Webhook::VmiValidateCreate, &body, ClusterConfig::default()));
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].1, "spec.domain.cpu.cores");

    let mut labelled = vmi(minimal_spec());
    labelled["metadata"]["labels"] = json!({"kubevirt.io/nodeName": "node1"});
    let body = review("virtualmachineinstances", "CREATE", "alice", &labelled, None);
    let causes = denied(&run(Webhook::VmiValidateCreate, &body, ClusterConfig::default()));
    assert_eq!(causes[0].1, "metadata.labels");
    let body = review(
        "virtualmachineinstances",
        "CREATE",
        "system:serviceaccount:kubevirt:kubevirt-controller",
        &labelled,
        None,
    );
    assert!(
        run(Webhook::VmiValidateCreate, &body, ClusterConfig::default())
            .response
            .allowed
    );
}

/// Realtime vCPUs and NUMA passthrough need CAP_SYS_NICE, which an unprivileged launcher pod does
/// not have: refused unless the Root feature gate is on.
#[test]
fn an_unprivileged_vmi_cannot_ask_for_realtime_or_numa_passthrough() {
    let mut spec = minimal_spec();
    spec["domain"]["cpu"] =
        json!({"dedicatedCpuPlacement": true, "realtime": {}, "numa": {"guestMappingPassthrough": {}}});
    let object = vmi(spec);
    let body = review("virtualmachineinstances", "CREATE", "alice", &object, None);
    let causes = denied(&run(Webhook::VmiValidateCreate, &body, ClusterConfig::default()));
    let refused: Vec<(&str, &str)> = causes
        .iter()
        .filter(|c| c.2.contains("unprivileged"))
        .map(|c| (c.0.as_str(), c.1.as_str()))
        .collect();
    assert_eq!(
        refused,
        [
            ("FieldValueNotSupported", "spec.domain.cpu.realtime"),
            ("FieldValueNotSupported", "spec.domain.cpu.numa.guestMappingPassthrough")
        ],
        "{causes:?}"
    );
    assert!(
        causes
            .iter()
            .all(|c| !c.2.contains("unprivileged") || c.2.contains("Root feature gate"))
    );
    let root = ClusterConfig {
        feature_gates: vec!["Root".to_owned()],
        ..ClusterConfig::default()
    };
    let answer = run(Webhook::VmiValidateCreate, &body, root);
    let messages: Vec<String> = if answer.response.allowed {
        Vec::new()
    } else {
        denied(&answer).into_iter().map(|c| c.2).collect()
    };
    assert!(messages.iter().all(|m| !m.contains("unprivileged")), "{messages:?}");
}

#[test]
fn vmi_updates_are_restricted_to_kubevirt() {
    let old = vmi(minimal_spec());
    let mut new = old.clone();
    new["spec"]["domain"]["resources"]["requests"]["memory"] = json!("256Mi");
    let body = review("virtualmachineinstances", "UPDATE", "alice", &new, Some(&old));
    let causes = denied(&run(Webhook::VmiValidateUpdate, &body, ClusterConfig::default()));
    assert_eq!(
        causes,
        [(
            "FieldValueNotSupported".to_owned(),
            String::new(),
            "update of VMI object is restricted".to_owned()
        )]
    );
    let body = review(
        "virtualmachineinstances",
        "UPDATE",
        "system:serviceaccount:kubevirt:kubevirt-handler",
        &new,
        Some(&old),
    );
    assert!(
        run(Webhook::VmiValidateUpdate, &body, ClusterConfig::default())
            .response
            .allowed
    );
    let body = review(
        "virtualmachineinstances",
        "UPDATE",
        "system:serviceaccount:other:kubevirt-handler",
        &new,
        Some(&old),
    );
    assert!(
        !run(Webhook::VmiValidateUpdate, &body, ClusterConfig::default())
            .response
            .allowed
    );

    // A status change by a user is reverted by the mutating webhook.
    let mut old_status = old.clone();
    old_status["status"] = json!({"phase": "Running"});
    let mut new_status = old_status.clone();
    new_status["status"]["phase"] = json!("Failed");
    let body = review(
        "virtualmachineinstances",
        "UPDATE",
        "alice",
        &new_status,
        Some(&old_status),
    );
    let out = patched(&run(Webhook::VmiMutate, &body, ClusterConfig::default()), &new_status);
    assert_eq!(out["status"]["phase"], "Running");
    let body = review(
        "virtualmachineinstances",
        "UPDATE",
        "system:serviceaccount:kubevirt:kubevirt-handler",
        &new_status,
        Some(&old_status),
    );
    let answer = run(Webhook::VmiMutate, &body, ClusterConfig::default());
    assert_eq!(
        answer.response.patch, None,
        "KubeVirt's own status writes pass unchanged"
    );
}

fn vm(template_spec: Value, strategy: &str) -> Value {
    let mut object = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
           "metadata": {"name": "my-vm", "namespace": "default"},
           "spec": {"runStrategy": strategy, "template": {}}});
    object["spec"]["template"]["spec"] = template_spec;
    object
}

#[test]
fn vms_get_machine_type_and_a_stable_firmware_identity() {
    let object = vm(minimal_spec(), "Always");
    let answer = run(
        Webhook::VmMutate,
        &review("virtualmachines", "CREATE", "alice", &object, None),
        ClusterConfig::default(),
    );
    let out = patched(&answer, &object);
    let domain = &out["spec"]["template"]["spec"]["domain"];
    let uuid = vm_firmware_uuid("my-vm");
    assert_eq!(uuid, vm_firmware_uuid("my-vm"), "derived from the name, stable");
    assert_ne!(uuid, vm_firmware_uuid("other-vm"));
    assert_eq!(domain["firmware"], json!({"uuid": uuid, "serial": uuid}));
    assert_eq!(domain["machine"]["type"], "q35");
    assert_eq!(out["spec"]["template"]["spec"]["architecture"], "amd64");
    // Idempotent: a second pass changes nothing.
    let again = run(
        Webhook::VmMutate,
        &review("virtualmachines", "UPDATE", "alice", &out, Some(&out)),
        ClusterConfig::default(),
    );
    assert_eq!(patched(&again, &out), out);
}

#[test]
fn invalid_vms_are_refused_with_template_field_paths() {
    let mut spec = minimal_spec();
    spec["domain"]["devices"]["disks"][0]["name"] = json!("missing");
    let body = review("virtualmachines", "CREATE", "alice", &vm(spec, "Sometimes"), None);
    let causes = denied(&run(Webhook::VmValidate, &body, ClusterConfig::default()));
    let fields: Vec<&str> = causes.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.runStrategy", "spec.template.spec.domain.devices.disks[0].name"]
    );
    assert_eq!(causes[0].2, "Invalid RunStrategy (Sometimes)");
}

#[test]
fn fields_kubevirt_rs_does_not_act_on_are_refused_with_their_path() {
    let mut spec = minimal_spec();
    spec["domain"]["devices"]["gpus"] = json!([{"name": "gpu1", "deviceName": "nvidia.com/GV100GL"}]);
    spec["domain"]["launchSecurity"] = json!({"sev": {}});
    let body = review("virtualmachineinstances", "CREATE", "alice", &vmi(spec.clone()), None);
    let causes: Vec<_> = denied(&run(Webhook::VmiValidateCreate, &body, ClusterConfig::default()))
        .into_iter()
        .filter(|c| c.0 == "FieldValueNotSupported")
        .collect();
    assert_eq!(
        causes,
        [
            (
                "FieldValueNotSupported".to_owned(),
                "spec.domain.launchSecurity".to_owned(),
                "confidential computing launch security (SEV, SEV-SNP, TDX) is not supported by kubevirt-rs".to_owned()
            ),
            (
                "FieldValueNotSupported".to_owned(),
                "spec.domain.devices.gpus".to_owned(),
                "GPU passthrough is not supported by kubevirt-rs".to_owned()
            ),
        ]
    );
    let body = review("virtualmachines", "CREATE", "alice", &vm(spec, "Always"), None);
    let fields: Vec<String> = denied(&run(Webhook::VmValidate, &body, ClusterConfig::default()))
        .into_iter()
        .filter(|c| c.0 == "FieldValueNotSupported")
        .map(|c| c.1)
        .collect();
    assert_eq!(
        fields,
        [
            "spec.template.spec.domain.launchSecurity",
            "spec.template.spec.domain.devices.gpus"
        ]
    );
}

/// A VM with a DataVolume template its volumes use is admitted; a template in another namespace
/// than the VM's is refused at upstream's path, on create and on an update that changes the
/// templates, but not on an update that leaves them as they were.
#[test]
fn data_volume_templates_are_admitted_in_the_vm_namespace_only() {
    let mut spec = minimal_spec();
    spec["volumes"] = json!([{"name": "root", "dataVolume": {"name": "root"}}]);
    spec["domain"]["devices"]["disks"] = json!([{"name": "root", "disk": {}}]);
    let template = |namespace: Option<&str>| {
        let mut meta = json!({"name": "root"});
        if let Some(namespace) = namespace {
            meta["namespace"] = json!(namespace);
        }
        json!([{"metadata": meta, "spec": {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "1Gi"}}}}}])
    };
    let mut object = vm(spec, "Always");
    object["metadata"]["namespace"] = json!("default");
    object["spec"]["dataVolumeTemplates"] = template(None);
    let body = review("virtualmachines", "CREATE", "alice", &object, None);
    assert!(
        run(Webhook::VmValidate, &body, ClusterConfig::default())
            .response
            .allowed
    );
    object["spec"]["dataVolumeTemplates"] = template(Some("other"));
    let body = review("virtualmachines", "CREATE", "alice", &object, None);
    assert_eq!(
        denied(&run(Webhook::VmValidate, &body, ClusterConfig::default())),
        [(
            "FieldValueInvalid".to_owned(),
            "spec.dataVolumeTemplates[0]".to_owned(),
            "Embedded DataVolume namespace other differs from VM namespace default".to_owned()
        )]
    );
    let body = review("virtualmachines", "UPDATE", "alice", &object, Some(&object));
    assert!(
        run(Webhook::VmValidate, &body, ClusterConfig::default())
            .response
            .allowed
    );
}

#[test]
fn malformed_reviews_get_a_400() {
    let answer = run(Webhook::VmiValidateCreate, b"{not json", ClusterConfig::default());
    assert!(!answer.response.allowed);
    assert_eq!(answer.response.status.as_ref().map(|s| s.code), Some(400));
    let body = review("virtualmachines", "CREATE", "alice", &vmi(minimal_spec()), None);
    let answer = run(Webhook::VmiValidateCreate, &body, ClusterConfig::default());
    let status = answer.response.status.expect("status");
    assert_eq!(
        (status.code, status.message.as_str()),
        (400, "expect resource to be 'virtualmachineinstances'")
    );
}

#[test]
fn an_isolated_emulator_gets_the_clusters_even_parity_only_under_align_cpus() {
    let mut spec = minimal_spec();
    spec["domain"]["cpu"] = json!({"cores": 2, "dedicatedCpuPlacement": true, "isolateEmulatorThread": true});
    let annotation = "alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity";
    let config = |annotated: bool, gates: &[&str]| ClusterConfig {
        emulator_thread_complete_to_even_parity: annotated,
        feature_gates: gates.iter().map(|g| (*g).to_owned()).collect(),
        ..ClusterConfig::default()
    };
    let parity = |object: &Value, config: ClusterConfig| {
        mutate_vmi(object, config)["metadata"]["annotations"][annotation]
            .as_str()
            .map(str::to_owned)
    };
    assert_eq!(
        parity(&vmi(spec.clone()), config(true, &["AlignCPUs"])),
        Some(String::new())
    );
    assert_eq!(
        parity(&vmi(spec.clone()), config(false, &["AlignCPUs"])),
        None,
        "the CR does not ask"
    );
    assert_eq!(parity(&vmi(spec.clone()), config(true, &[])), None, "the gate is off");
    spec["domain"]["cpu"]["isolateEmulatorThread"] = json!(false);
    assert_eq!(
        parity(&vmi(spec), config(true, &["AlignCPUs"])),
        None,
        "no isolated emulator"
    );
}

/// Regression (#31): a VM whose template's cloud-init volume has two user-data sources is refused
/// at the template's path, as the VMI would be.
#[test]
fn a_vm_with_two_cloud_init_user_data_sources_is_refused() {
    let mut spec = minimal_spec();
    spec["domain"]["devices"]["disks"]
        .as_array_mut()
        .expect("disks")
        .push(json!({"name": "init", "disk": {"bus": "virtio"}}));
    spec["volumes"].as_array_mut().expect("volumes").push(json!({
        "name": "init",
        "cloudInitNoCloud": {"userData": "#cloud-config\n", "userDataBase64": "I2Nsb3VkLWNvbmZpZwo="}
    }));
    for (resource, object, hook, field) in [
        (
            "virtualmachines",
            vm(spec.clone(), "Always"),
            Webhook::VmValidate,
            "spec.template.spec.volumes[1].cloudInitNoCloud",
        ),
        (
            "virtualmachineinstances",
            vmi(spec.clone()),
            Webhook::VmiValidateCreate,
            "spec.volumes[1].cloudInitNoCloud",
        ),
    ] {
        let body = review(resource, "CREATE", "alice", &object, None);
        let causes = denied(&run(hook, &body, ClusterConfig::default()));
        assert_eq!(
            causes,
            [(
                "FieldValueInvalid".to_owned(),
                field.to_owned(),
                format!("{field} must have only one userdatasource set.")
            )],
            "{resource}"
        );
    }
}
