//! Cases from upstream's admitter tests whose outcome kubevirt-rs had wrong or lacked, restated:
//! each gives upstream's cause kind, field and message.

use kubevirt_api::v1::{ClusterConfig, VirtualMachine, VirtualMachineInstance};
use kubevirt_api::validation::{CauseType, validate_vm, validate_vmi_spec};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use CauseType::{Invalid, Required};

type Found = Vec<(CauseType, String, String)>;
/// An edit of a VM template.
type Change = dyn Fn(&mut Value);

fn base() -> Value {
    json!({
        "domain": {
            "resources": {"requests": {"memory": "8192Ki"}},
            "devices": {"disks": [{"name": "root"}], "interfaces": [{"name": "default", "masquerade": {}}]}
        },
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}}]
    })
}

fn vmi(change: impl FnOnce(&mut Value)) -> Found {
    let mut spec = base();
    change(&mut spec);
    let vmi: VirtualMachineInstance = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "v"}, "spec": spec
    }))
    .expect("VMI");
    validate_vmi_spec(&vmi.spec, "spec", &ClusterConfig::default())
        .into_iter()
        .map(|c| (c.kind, c.field, c.message))
        .collect()
}

fn one(kind: CauseType, field: &str, message: &str) -> Found {
    vec![(kind, field.to_owned(), message.to_owned())]
}

#[test]
fn memory_limits_and_hugepages() {
    assert_eq!(
        vmi(|s| s["domain"]["resources"]["limits"] = json!({"memory": "-65Mi"})),
        one(
            Invalid,
            "spec.domain.resources.limits.memory",
            "spec.domain.resources.limits.memory '-65Mi': must be greater than or equal to 0."
        )
    );
    assert_eq!(
        vmi(|s| {
            s["domain"]["resources"]["requests"]["memory"] = json!("64Mi");
            s["domain"]["memory"] = json!({"hugepages": {"pageSize": "10Mi"}});
        }),
        one(
            Invalid,
            "spec.domain.resources.requests.memory",
            "spec.domain.resources.requests.memory '64Mi' is not a multiple of the page size spec.domain.memory.hugepages.pageSize '10Mi'"
        )
    );
    let bad_size = vmi(|s| s["domain"]["memory"] = json!({"hugepages": {"pageSize": "2ab"}}));
    assert_eq!(bad_size[0].1, "spec.domain.memory.hugepages.pageSize");
    assert_eq!(
        vmi(|s| {
            s["domain"]["memory"] = json!({"guest": "128Mi"});
            s["domain"]["resources"]["limits"] = json!({"memory": "64Mi"});
            s["domain"]["resources"]["requests"]["memory"] = json!("64Mi");
        }),
        vec![],
        "under LiveUpdate the guest may have more than the limit"
    );
}

#[test]
fn strategies_and_firmware_serial() {
    assert_eq!(
        vmi(|s| {
            s["startStrategy"] = json!("Paused");
            s["livenessProbe"] = json!({"httpGet": {"port": 80}});
        })
        .into_iter()
        .filter(|c| c.1 == "spec.startStrategy")
        .collect::<Found>(),
        one(
            Invalid,
            "spec.startStrategy",
            "either spec.startStrategy or spec.livenessProbe should be provided.Pausing VMI with LivenessProbe is not supported"
        )
    );
    let serial = vmi(|s| s["domain"]["firmware"] = json!({"serial": format!("{}!", "a".repeat(256))}));
    assert_eq!(
        serial.iter().map(|c| c.2.as_str()).collect::<Vec<_>>(),
        [
            "spec.domain.firmware.serial must be less than or equal to 256 in length, if specified",
            "spec.domain.firmware.serial must be made up of the following characters [A-Za-z0-9_.+-], if specified",
        ]
    );
}

#[test]
fn disks_need_positive_boot_orders_and_dns_label_names() {
    assert_eq!(
        vmi(|s| s["domain"]["devices"]["disks"][0]["bootOrder"] = json!(0)),
        one(
            Invalid,
            "spec.domain.devices.disks[0].bootOrder",
            "spec.domain.devices.disks[0] must have a boot order > 0, if supplied"
        )
    );
    let named = vmi(|s| {
        s["domain"]["devices"]["disks"][0]["name"] = json!("Root_Disk");
        s["volumes"][0]["name"] = json!("Root_Disk");
    });
    assert_eq!(named.len(), 1, "{named:#?}");
    assert_eq!(named[0].1, "spec.domain.devices.disks[0].name");
    assert!(named[0].2.starts_with("a lowercase RFC 1123 label must consist of"));
}

#[test]
fn interfaces_and_networks() {
    assert_eq!(
        vmi(|s| s["domain"]["devices"]["interfaces"] = json!([])),
        one(
            Required,
            "spec.networks[0].name",
            "spec.networks[0].name 'default' not found."
        )
    );
    assert_eq!(
        vmi(|s| s["networks"] = json!([])),
        one(
            Invalid,
            "spec.domain.devices.interfaces[0].name",
            "spec.domain.devices.interfaces[0].name 'default' not found."
        )
    );
    let iface = |change: Value| {
        vmi(|s| {
            for (key, value) in change.as_object().expect("object") {
                s["domain"]["devices"]["interfaces"][0][key] = value.clone();
            }
        })
    };
    assert_eq!(
        iface(json!({"macAddress": "de:ad:00:00:be:af:be:af"})),
        one(
            Invalid,
            "spec.domain.devices.interfaces[0].macAddress",
            "interface spec.domain.devices.interfaces[0].name has too long MAC address (de:ad:00:00:be:af:be:af)."
        )
    );
    assert_eq!(
        iface(json!({"macAddress": "02:00:00:00:00:00"})),
        one(
            Invalid,
            "spec.domain.devices.interfaces[0].macAddress",
            "The requested MAC address is reserved for the in-pod bridge. Please choose another one."
        )
    );
    for bad in ["0000:80.10.1", "0000:80:80:1.0", "0000:80:11.15"] {
        assert_eq!(
            iface(json!({"pciAddress": bad})),
            one(
                Invalid,
                "spec.domain.devices.interfaces[0].pciAddress",
                &format!("interface spec.domain.devices.interfaces[0].name has malformed PCI address ({bad}).")
            )
        );
    }
    assert_eq!(
        iface(json!({"state": "foo"})),
        one(
            Invalid,
            "spec.domain.devices.interfaces[0].state",
            "logical default interface state value is unsupported: foo"
        )
    );
    assert_eq!(
        iface(json!({"binding": {"name": "boo"}})),
        one(
            Invalid,
            "spec.domain.devices.interfaces[0].binding",
            "logical default interface cannot have both binding plugin and interface binding method"
        )
    );
    assert_eq!(
        iface(json!({"ports": [{"name": "test", "port": 0}]})),
        one(
            Required,
            "spec.domain.devices.interfaces[0].ports[0].port",
            "Port field is mandatory."
        )
    );
    let passt = vmi(|s| s["domain"]["devices"]["interfaces"][0] = json!({"name": "default", "passt": {}}));
    assert_eq!(
        passt,
        one(
            Invalid,
            "spec.domain.devices.interfaces[0].passt",
            "Passt network binding has been discontinued since v1.3"
        )
    );
    let masquerade_on_multus = vmi(|s| {
        s["networks"][0] = json!({"name": "default", "multus": {"networkName": "br"}});
        s["domain"]["devices"]["interfaces"][0]["ports"] = json!([{"name": "test", "port": 0}]);
    });
    assert_eq!(
        masquerade_on_multus,
        one(
            Invalid,
            "spec.domain.devices.interfaces[0].name",
            "Masquerade interface only implemented with pod network"
        )
    );
}

#[test]
fn network_sources() {
    let networks = |list: Value, interfaces: Value| {
        vmi(|s| {
            s["networks"] = list;
            s["domain"]["devices"]["interfaces"] = interfaces;
        })
    };
    let bridge = |name: &str| json!({"name": name, "bridge": {}});
    assert_eq!(
        networks(
            json!([{"name": "a", "pod": {}}, {"name": "b", "pod": {}}]),
            json!([bridge("a"), bridge("b")])
        ),
        one(
            Invalid,
            "spec.networks",
            "more than one interface is connected to a pod network in spec.interfaces"
        )
    );
    assert_eq!(
        networks(
            json!([{"name": "a", "pod": {}, "multus": {"networkName": "x"}}]),
            json!([bridge("a")])
        ),
        one(Invalid, "spec.networks[0]", "should have only one network type")
    );
    assert_eq!(
        networks(json!([{"name": "a"}]), json!([bridge("a")])),
        one(Required, "spec.networks[0]", "should have a network type")
    );
    assert_eq!(
        networks(
            json!([{"name": "a", "multus": {"networkName": ""}}]),
            json!([bridge("a")])
        ),
        one(
            Required,
            "spec.networks[0].multus.networkName",
            "CNI delegating plugin must have a networkName"
        )
    );
    assert_eq!(
        networks(
            json!([{"name": "a", "multus": {"networkName": "x", "default": true}}, {"name": "b", "multus": {"networkName": "y", "default": true}}]),
            json!([bridge("a"), bridge("b")])
        ),
        one(
            Invalid,
            "spec.networks",
            "Multus CNI should only have one default network"
        )
    );
    assert_eq!(
        networks(
            json!([{"name": "a", "pod": {}}, {"name": "b", "multus": {"networkName": "y", "default": true}}]),
            json!([bridge("a"), bridge("b")])
        ),
        one(
            Invalid,
            "spec.networks",
            "Pod network cannot be defined when Multus default network is defined"
        )
    );
}

#[test]
fn a_diag288_watchdog_is_not_for_amd64() {
    let found = vmi(|s| s["domain"]["devices"]["watchdog"] = json!({"name": "w", "diag288": {}}));
    assert!(
        found.contains(&(
            Invalid,
            "spec.domain.devices.watchdog".to_owned(),
            "amd64 only supports I6300ESB watchdog device".to_owned()
        )),
        "{found:#?}"
    );
}

#[test]
fn memory_hotplug_rules_of_vm_templates() {
    let vm = |change: &dyn Fn(&mut Value)| -> Found {
        let mut template = base();
        template["domain"]["resources"] = json!({});
        template["domain"]["memory"] = json!({"guest": "64Mi", "maxGuest": "128Mi"});
        change(&mut template);
        let vm: VirtualMachine = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "vm"},
            "spec": {"runStrategy": "Always", "template": {"spec": template}}
        }))
        .expect("VM");
        validate_vm(&vm, &ClusterConfig::default())
            .into_iter()
            .map(|c| (c.kind, c.field, c.message))
            .collect()
    };
    assert_eq!(vm(&|_| {}), vec![]);
    let cases: [(&Change, &str, &str); 8] = [
        (
            &|t| {
                t["domain"]["cpu"] =
                    json!({"dedicatedCpuPlacement": true, "realtime": {}, "numa": {"guestMappingPassthrough": {}}});
            },
            "spec.template.spec.domain.cpu.realtime",
            "Memory hotplug is not compatible with realtime VMs",
        ),
        (
            &|t| t["domain"]["launchSecurity"] = json!({"sev": {}}),
            "spec.template.spec.domain.launchSecurity",
            "Memory hotplug is not compatible with encrypted VMs",
        ),
        (
            &|t| t["domain"]["cpu"] = json!({"dedicatedCpuPlacement": true, "cores": 1}),
            "spec.template.spec.domain.cpu.dedicatedCpuPlacement",
            "Memory hotplug is not compatible with dedicated CPUs",
        ),
        (
            &|t| t["domain"]["memory"] = json!({"maxGuest": "128Mi"}),
            "spec.template.spec.domain.memory.guest",
            "Guest memory must be configured when memory hotplug is enabled",
        ),
        (
            &|t| t["domain"]["memory"]["guest"] = json!("144Mi"),
            "spec.template.spec.domain.memory.guest",
            "Guest memory is greater than the configured maxGuest memory",
        ),
        (
            &|t| t["domain"]["memory"]["maxGuest"] = json!("333Mi"),
            "spec.template.spec.domain.memory.maxGuest",
            "MaxGuest must be 2Mi aligned",
        ),
        (
            &|t| t["domain"]["memory"]["guest"] = json!("123"),
            "spec.template.spec.domain.memory.guest",
            "Guest memory must be 2Mi aligned",
        ),
        (
            &|t| t["architecture"] = json!("arm64"),
            "spec.template.spec.architecture",
            "Memory hotplug is only available for x86_64 VMs",
        ),
    ];
    for (change, field, message) in cases {
        let found = vm(change);
        assert!(
            found.iter().any(|c| c.0 == Invalid && c.1 == field && c.2 == message),
            "expected {field}: {message} in {found:#?}"
        );
    }
}
