//! Instance types and preferences applied to a VM's template, restating upstream's
//! `pkg/instancetype/apply`, `preference/apply` and `preference/requirements` cases.

use std::collections::BTreeMap;

use kubevirt_api::instancetype::{
    VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec, apply, check_requirements, layout,
    overcommitted_request, spread_error,
};
use kubevirt_api::v1::VirtualMachineInstanceSpec;
use kubevirt_api::validation::CauseType;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const P: &str = "spec.template.spec";

fn instancetype(value: Value) -> VirtualMachineInstancetypeSpec {
    serde_json::from_value(value).expect("instancetype spec")
}

fn preference(value: Value) -> VirtualMachinePreferenceSpec {
    serde_json::from_value(value).expect("preference spec")
}

fn template(value: Value) -> VirtualMachineInstanceSpec {
    serde_json::from_value(value).expect("VMI spec")
}

fn small() -> VirtualMachineInstancetypeSpec {
    instancetype(json!({"cpu": {"guest": 2}, "memory": {"guest": "1Gi"}}))
}

/// Applies both and returns the spec as JSON, or the conflicting fields.
fn applied(
    it: Option<&VirtualMachineInstancetypeSpec>,
    pref: Option<&VirtualMachinePreferenceSpec>,
    spec: Value,
) -> Result<(Value, BTreeMap<String, String>), Vec<String>> {
    let mut spec = template(spec);
    let mut annotations = BTreeMap::new();
    apply(it, pref, &mut spec, &mut annotations, P)
        .map(|()| (serde_json::to_value(&spec).expect("json"), annotations))
        .map_err(|c| c.0.into_iter().map(|c| c.field).collect())
}

fn topology(guest: u32, pref: Value) -> (u32, u32, u32) {
    layout(guest, Some(&preference(pref)))
}

#[test]
fn vcpus_are_laid_out_as_the_preference_prefers() {
    assert_eq!(
        layout(1, Some(&preference(json!({"cpu": {"preferredCPUTopology": "cores"}})))),
        (1, 1, 1)
    );
    assert_eq!(layout(2, None), (2, 1, 1), "sockets by default");
    for (name, expected) in [
        ("cores", (1, 2, 1)),
        ("preferCores", (1, 2, 1)),
        ("threads", (1, 1, 2)),
        ("any", (2, 1, 1)),
    ] {
        assert_eq!(
            topology(2, json!({"cpu": {"preferredCPUTopology": name}})),
            expected,
            "{name}"
        );
    }
    assert_eq!(
        topology(4, json!({"cpu": {"preferredCPUTopology": "spread"}})),
        (2, 2, 1)
    );
    assert_eq!(
        topology(
            6,
            json!({"preferSpreadSocketToCoreRatio": 3, "cpu": {"preferredCPUTopology": "spread"}})
        ),
        (2, 3, 1)
    );
    assert_eq!(
        topology(
            4,
            json!({"cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"across": "CoresThreads"}}})
        ),
        (1, 2, 2)
    );
    assert_eq!(
        topology(
            8,
            json!({"cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"across": "SocketsCoresThreads", "ratio": 2}}})
        ),
        (2, 2, 2)
    );
    assert_eq!(
        topology(
            6,
            json!({"preferSpreadSocketToCoreRatio": 2, "cpu": {"preferredCPUTopology": "spread", "spreadOptions": {"ratio": 3}}})
        ),
        (2, 3, 1),
        "spreadOptions.ratio wins over the deprecated ratio"
    );
}

#[test]
fn vcpus_that_cannot_be_spread_are_refused_with_upstreams_message() {
    let spread = preference(json!({"cpu": {"preferredCPUTopology": "spread"}}));
    assert_eq!(
        spread_error(3, Some(&spread)).as_deref(),
        Some(
            "3 vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2 provided by the preference"
        )
    );
    assert_eq!(spread_error(4, Some(&spread)), None);
    assert_eq!(spread_error(3, None), None, "only the spread topology divides");
}

#[test]
fn the_instance_type_sets_topology_memory_and_placement() {
    let it = instancetype(json!({
        "cpu": {"guest": 4, "model": "Haswell", "dedicatedCPUPlacement": true, "maxSockets": 8},
        "memory": {"guest": "2Gi", "hugepages": {"pageSize": "2Mi"}, "maxGuest": "4Gi"},
        "nodeSelector": {"zone": "a"}, "schedulerName": "custom", "ioThreadsPolicy": "auto",
        "annotations": {"team": "db"}
    }));
    let (spec, annotations) = applied(Some(&it), None, json!({"domain": {"devices": {}}})).expect("no conflict");
    assert_eq!(
        spec["domain"]["cpu"],
        json!({"sockets": 4, "cores": 1, "threads": 1, "maxSockets": 8, "model": "Haswell", "dedicatedCpuPlacement": true})
    );
    assert_eq!(
        spec["domain"]["memory"],
        json!({"guest": "2Gi", "hugepages": {"pageSize": "2Mi"}, "maxGuest": "4Gi"})
    );
    assert_eq!(spec["nodeSelector"], json!({"zone": "a"}));
    assert_eq!(spec["schedulerName"], "custom");
    assert_eq!(spec["domain"]["ioThreadsPolicy"], "auto");
    assert_eq!(annotations, BTreeMap::from([("team".to_owned(), "db".to_owned())]));
}

#[test]
fn every_field_the_vm_sets_too_is_a_conflict() {
    let it = instancetype(json!({
        "cpu": {"guest": 2, "model": "Haswell", "dedicatedCPUPlacement": true, "isolateEmulatorThread": true,
                "numa": {"guestMappingPassthrough": {}}, "realtime": {}},
        "memory": {"guest": "1Gi"}, "nodeSelector": {"a": "b"}, "ioThreadsPolicy": "auto",
        "ioThreads": {"supplementalPoolThreadCount": 2}, "launchSecurity": {"sev": {}},
        "gpus": [{"name": "g", "deviceName": "nvidia.com/gpu"}],
        "hostDevices": [{"name": "h", "deviceName": "vendor.com/dev"}],
        "annotations": {"a": "2", "same": "1"}
    }));
    let spec = json!({
        "nodeSelector": {},
        "domain": {
            "cpu": {"sockets": 2, "cores": 1, "threads": 1, "model": "Skylake", "dedicatedCpuPlacement": true,
                    "isolateEmulatorThread": true, "numa": {"guestMappingPassthrough": {}}, "realtime": {}},
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}},
            "memory": {"guest": "1Gi"}, "ioThreadsPolicy": "shared",
            "ioThreads": {"supplementalPoolThreadCount": 1}, "launchSecurity": {"sev": {}},
            "devices": {"gpus": [{"name": "x", "deviceName": "y"}], "hostDevices": [{"name": "x", "deviceName": "y"}]}
        }
    });
    let mut vm_spec = template(spec);
    let mut annotations = BTreeMap::from([("a".to_owned(), "1".to_owned()), ("same".to_owned(), "1".to_owned())]);
    let conflicts = apply(Some(&it), None, &mut vm_spec, &mut annotations, P).expect_err("conflicts");
    let fields: Vec<String> = conflicts.0.iter().map(|c| c.field.clone()).collect();
    let expect = [
        "nodeSelector",
        "domain.resources.requests.cpu",
        "domain.resources.limits.cpu",
        "domain.cpu.sockets",
        "domain.cpu.cores",
        "domain.cpu.threads",
        "domain.cpu.model",
        "domain.cpu.dedicatedCPUPlacement",
        "domain.cpu.isolateEmulatorThread",
        "domain.cpu.numa",
        "domain.cpu.realtime",
        "domain.memory.guest",
        "domain.ioThreadsPolicy",
        "domain.ioThreads.supplementalPoolThreadCount",
        "domain.launchSecurity",
        "domain.devices.gpus",
        "domain.devices.hostDevices",
    ];
    let mut want: Vec<String> = expect.iter().map(|f| format!("{P}.{f}")).collect();
    want.push("annotations.a".to_owned());
    assert_eq!(fields, want);
    let cause = conflicts.0[3].cause();
    assert_eq!(
        (cause.kind, cause.message.as_str()),
        (
            CauseType::Invalid,
            "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type"
        )
    );
}

#[test]
fn only_the_first_memory_field_the_vm_sets_conflicts() {
    let conflicts = |spec| applied(Some(&small()), None, spec).expect_err("conflict");
    assert_eq!(
        conflicts(
            json!({"domain": {"devices": {}, "memory": {"guest": "1Gi"}, "resources": {"requests": {"memory": "1Gi"}}}})
        ),
        [format!("{P}.domain.memory.guest")]
    );
    // Hugepages and maxGuest conflict only when the instance type sets them too.
    let huge = instancetype(
        json!({"cpu": {"guest": 1}, "memory": {"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}, "maxGuest": "2Gi"}}),
    );
    assert_eq!(
        applied(
            Some(&huge),
            None,
            json!({"domain": {"devices": {}, "memory": {"hugepages": {"pageSize": "1Gi"}}}})
        )
        .expect_err("conflict"),
        [format!("{P}.domain.memory.hugepages")]
    );
    assert_eq!(
        applied(
            Some(&huge),
            None,
            json!({"domain": {"devices": {}, "memory": {"maxGuest": "4Gi"}}})
        )
        .expect_err("conflict"),
        [format!("{P}.domain.memory.maxGuest")]
    );
    let (spec, _) = applied(
        Some(&small()),
        None,
        json!({"domain": {"devices": {}, "memory": {"hugepages": {"pageSize": "2Mi"}}}}),
    )
    .expect("an instance type without hugepages leaves the VM's");
    assert_eq!(spec["domain"]["memory"]["hugepages"]["pageSize"], "2Mi");
    assert_eq!(
        conflicts(
            json!({"domain": {"devices": {}, "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}}})
        ),
        [format!("{P}.domain.resources.requests.memory")]
    );
    assert_eq!(
        conflicts(json!({"domain": {"devices": {}, "resources": {"limits": {"memory": "1Gi"}}}})),
        [format!("{P}.domain.resources.limits.memory")]
    );
}

#[test]
fn overcommit_lowers_the_memory_request_in_single_precision() {
    assert_eq!(overcommitted_request(1 << 30, 10), 966_367_616);
    assert_eq!(overcommitted_request(1 << 30, 50), 512 << 20);
    let it = instancetype(json!({"cpu": {"guest": 1}, "memory": {"guest": "1Gi", "overcommitPercent": 50}}));
    let (spec, _) = applied(Some(&it), None, json!({"domain": {"devices": {}}})).expect("applies");
    assert_eq!(spec["domain"]["resources"]["requests"]["memory"], "512Mi");
}

#[test]
fn the_vm_keeps_what_the_instance_type_leaves_alone() {
    let (spec, _) = applied(
        Some(&small()),
        None,
        json!({"domain": {"devices": {}, "cpu": {"model": "Skylake", "maxSockets": 4}}}),
    )
    .expect("no conflict");
    assert_eq!(spec["domain"]["cpu"]["model"], "Skylake");
    assert_eq!(spec["domain"]["cpu"]["maxSockets"], 4);
    let it = instancetype(
        json!({"cpu": {"guest": 1, "dedicatedCPUPlacement": true, "maxSockets": 2}, "memory": {"guest": "1Gi"}}),
    );
    let (spec, _) = applied(
        Some(&it),
        None,
        json!({"domain": {"devices": {}, "cpu": {"dedicatedCpuPlacement": false, "maxSockets": 4}}}),
    )
    .expect("false is no conflict; maxSockets is overwritten");
    assert_eq!(spec["domain"]["cpu"]["dedicatedCpuPlacement"], true);
    assert_eq!(spec["domain"]["cpu"]["maxSockets"], 2);
}

#[test]
fn instance_type_annotations_are_added_and_equal_ones_agree() {
    let it =
        instancetype(json!({"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}, "annotations": {"a": "1", "b": "2"}}));
    let mut spec = template(json!({"domain": {"devices": {}}}));
    let mut annotations = BTreeMap::from([("a".to_owned(), "1".to_owned())]);
    apply(Some(&it), None, &mut spec, &mut annotations, P).expect("no conflict");
    assert_eq!(
        annotations,
        BTreeMap::from([("a".to_owned(), "1".to_owned()), ("b".to_owned(), "2".to_owned())])
    );
}

#[test]
fn a_conflict_stops_the_preference_from_applying() {
    let pref = preference(json!({"machine": {"preferredMachineType": "q35"}}));
    let mut spec = template(json!({"domain": {"devices": {}, "cpu": {"sockets": 2}}}));
    let mut annotations = BTreeMap::new();
    assert!(apply(Some(&small()), Some(&pref), &mut spec, &mut annotations, P).is_err());
    assert!(spec.domain.machine.is_none());
}

#[test]
fn preferred_buses_models_and_bindings_fill_only_what_is_unset() {
    let pref = preference(json!({"devices": {
        "preferredDiskBus": "virtio", "preferredCdromBus": "scsi", "preferredLunBus": "scsi",
        "preferredDiskDedicatedIoThread": true, "preferredDiskCache": "none", "preferredInterfaceModel": "e1000",
        "preferredInterfaceMasquerade": {}, "preferredAutoattachGraphicsDevice": false,
        "preferredAutoattachSerialConsole": false, "preferredDisableHotplug": true,
        "preferredRng": {}, "preferredPanicDeviceModel": "isa", "preferredSoundModel": "ac97",
        "preferredInputBus": "virtio", "preferredInputType": "tablet"
    }}));
    let (spec, _) = applied(
        None,
        Some(&pref),
        json!({
            "networks": [{"name": "default", "pod": {}}, {"name": "other", "multus": {"networkName": "n"}}],
            "domain": {"devices": {
                "autoattachSerialConsole": true, "disableHotplug": false,
                "disks": [{"name": "a"}, {"name": "b", "disk": {"bus": "sata"}}, {"name": "c", "cdrom": {}}, {"name": "d", "lun": {}}],
                "interfaces": [{"name": "default"}, {"name": "other"}, {"name": "bridged", "bridge": {}, "model": "virtio"}],
                "sound": {"name": "s"}, "panicDevices": [{}, {"model": "hyperv"}], "inputs": [{"name": "t"}]
            }}
        }),
    )
    .expect("applies");
    let devices = &spec["domain"]["devices"];
    assert_eq!(
        devices["disks"],
        json!([
            {"name": "a", "disk": {"bus": "virtio"}, "cache": "none", "dedicatedIOThread": true},
            {"name": "b", "disk": {"bus": "sata"}, "cache": "none"},
            {"name": "c", "cdrom": {"bus": "scsi"}},
            {"name": "d", "lun": {"bus": "scsi"}}
        ])
    );
    assert_eq!(
        devices["interfaces"],
        json!([
            {"name": "default", "model": "e1000", "masquerade": {}},
            {"name": "other", "model": "e1000"},
            {"name": "bridged", "bridge": {}, "model": "virtio"}
        ])
    );
    assert_eq!(devices["autoattachGraphicsDevice"], false);
    assert_eq!(devices["autoattachSerialConsole"], true, "the VM's own value stays");
    assert_eq!(devices["disableHotplug"], true, "always applied");
    assert_eq!(devices["rng"], json!({}));
    assert_eq!(devices["sound"], json!({"name": "s", "model": "ac97"}));
    assert_eq!(devices["panicDevices"], json!([{"model": "isa"}, {"model": "hyperv"}]));
    assert_eq!(
        devices["inputs"],
        json!([{"name": "t", "bus": "virtio", "type": "tablet"}])
    );
}

#[test]
fn the_preferred_video_type_fills_a_missing_or_empty_type_only() {
    let pref = preference(json!({"devices": {"preferredVideoType": "virtio"}}));
    for (devices, want) in [
        (json!({}), "virtio"),
        (json!({"video": {}}), "virtio"),
        (json!({"video": {"type": ""}}), "virtio"),
        (json!({"video": {"type": "vga"}}), "vga"),
    ] {
        let (spec, _) = applied(None, Some(&pref), json!({"domain": {"devices": devices.clone()}})).expect("applies");
        assert_eq!(spec["domain"]["devices"]["video"]["type"], want, "{devices}");
    }
}

#[test]
fn preferred_features_firmware_machine_clock_and_more() {
    let pref = preference(json!({
        "features": {"preferredAcpi": {"enabled": false}, "preferredSmm": {}, "preferredHyperv": {"relaxed": {}, "vapic": {}}},
        "firmware": {"preferredEfi": {"secureBoot": false}, "preferredUseEfi": true, "preferredUseSecureBoot": true},
        "machine": {"preferredMachineType": "pc-q35-rhel9"},
        "clock": {"preferredClockOffset": {"utc": {"offsetSeconds": 10}}, "preferredTimer": {"hpet": {"present": false}}},
        "preferredSubdomain": "sub", "preferredTerminationGracePeriodSeconds": 60,
        "cpu": {"preferredCPUFeatures": [{"name": "pcid"}, {"name": "vmx", "policy": "require"}]},
        "annotations": {"a": "pref", "b": "pref"}
    }));
    let mut spec = template(json!({
        "domain": {"devices": {}, "features": {"acpi": {}, "hyperv": {"relaxed": {"enabled": false}}},
                   "cpu": {"features": [{"name": "vmx", "policy": "disable"}]}}
    }));
    let mut annotations = BTreeMap::from([("a".to_owned(), "vm".to_owned())]);
    apply(None, Some(&pref), &mut spec, &mut annotations, P).expect("applies");
    let spec = serde_json::to_value(&spec).expect("json");
    assert_eq!(
        spec["domain"]["features"],
        json!({"acpi": {"enabled": false}, "smm": {}, "hyperv": {"relaxed": {"enabled": false}, "vapic": {}}})
    );
    assert_eq!(
        spec["domain"]["firmware"],
        json!({"bootloader": {"efi": {"secureBoot": false}}}),
        "preferredEfi wins over the deprecated fields"
    );
    assert_eq!(spec["domain"]["machine"]["type"], "pc-q35-rhel9");
    assert_eq!(
        spec["domain"]["clock"],
        json!({"utc": {"offsetSeconds": 10}, "timer": {"hpet": {"present": false}}})
    );
    assert_eq!(
        (&spec["subdomain"], &spec["terminationGracePeriodSeconds"]),
        (&json!("sub"), &json!(60))
    );
    assert_eq!(
        spec["domain"]["cpu"]["features"],
        json!([{"name": "vmx", "policy": "disable"}, {"name": "pcid"}])
    );
    assert_eq!(
        annotations,
        BTreeMap::from([("a".to_owned(), "vm".to_owned()), ("b".to_owned(), "pref".to_owned())])
    );
}

#[test]
fn a_vm_that_chose_its_bootloader_and_clock_keeps_them() {
    let pref = preference(json!({
        "firmware": {"preferredUseBios": true, "preferredUseBiosSerial": true},
        "clock": {"preferredClockOffset": {"timezone": "Europe/Berlin"}}
    }));
    let (spec, _) = applied(
        None,
        Some(&pref),
        json!({"domain": {"devices": {}, "firmware": {"bootloader": {"efi": {}}}, "clock": {"utc": {}}}}),
    )
    .expect("applies");
    assert_eq!(spec["domain"]["firmware"], json!({"bootloader": {"efi": {}}}));
    assert_eq!(spec["domain"]["clock"], json!({"utc": {}}));
    let (spec, _) = applied(None, Some(&pref), json!({"domain": {"devices": {}}})).expect("applies");
    assert_eq!(
        spec["domain"]["firmware"],
        json!({"bootloader": {"bios": {"useSerial": true}}})
    );
}

#[test]
fn preference_requirements_use_upstreams_messages_and_paths() {
    let requires = preference(json!({"requirements": {"cpu": {"guest": 2}, "memory": {"guest": "2Gi"}}}));
    let check = |it: Option<&VirtualMachineInstancetypeSpec>, pref: &VirtualMachinePreferenceSpec, spec: Value| {
        check_requirements(it, pref, &template(spec)).map(|c| (c.field, c.message))
    };
    let one_vcpu = instancetype(json!({"cpu": {"guest": 1}, "memory": {"guest": "4Gi"}}));
    assert_eq!(
        check(Some(&one_vcpu), &requires, json!({"domain": {"devices": {}}})),
        Some((
            "spec.instancetype".to_owned(),
            "insufficient CPU resources of 1 vCPU provided by instance type, preference requires 2 vCPU".to_owned()
        ))
    );
    assert_eq!(
        check(None, &requires, json!({"domain": {"devices": {}, "cpu": {"sockets": 1}}})),
        Some((
            "spec.template.spec.domain.cpu.sockets".to_owned(),
            "insufficient CPU resources of 1 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as sockets".to_owned()
        ))
    );
    assert_eq!(
        check(None, &requires, json!({"domain": {"devices": {}}})),
        Some((
            "spec.template.spec.domain.cpu".to_owned(),
            "no CPU resources provided by VirtualMachine, preference requires 2 vCPU".to_owned()
        ))
    );
    let one_gib = instancetype(json!({"cpu": {"guest": 2}, "memory": {"guest": "1Gi"}}));
    assert_eq!(
        check(Some(&one_gib), &requires, json!({"domain": {"devices": {}}})),
        Some((
            "spec.instancetype".to_owned(),
            "insufficient Memory resources of 1Gi provided by instance type, preference requires 2Gi".to_owned()
        ))
    );
    let any = preference(json!({"cpu": {"preferredCPUTopology": "any"}, "requirements": {"cpu": {"guest": 4}}}));
    assert_eq!(
        check(None, &any, json!({"domain": {"devices": {}, "cpu": {"sockets": 1, "cores": 2, "threads": 1}}})),
        Some((
            "spec.template.spec.domain.cpu.cores, spec.template.spec.domain.cpu.sockets, spec.template.spec.domain.cpu.threads".to_owned(),
            "insufficient CPU resources of 2 vCPU provided by VirtualMachine, preference requires 4 vCPU provided as cores, sockets and threads".to_owned()
        ))
    );
    assert_eq!(
        check(
            Some(&instancetype(json!({"cpu": {"guest": 2}, "memory": {"guest": "2Gi"}}))),
            &requires,
            json!({"domain": {"devices": {}}})
        ),
        None
    );
}
