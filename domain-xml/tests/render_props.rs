//! Property test: no generated VMI makes the conversion panic. Each case builds a VMI from random
//! pieces (valid and invalid buses, sources, quantities, topologies, features), and rendering must
//! return either a domain or an error.

use domain_xml::{ConvertContext, DomainType, render};
use kubevirt_api::v1::VirtualMachineInstance;
use proptest::prelude::*;
use serde_json::{Value, json};

fn maybe(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop_oneof![Just(Value::Null), value]
}

fn num(max: u32) -> impl Strategy<Value = Value> {
    maybe((0..max).prop_map(Value::from))
}

fn quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => Just(json!("64Mi")),
        1 => Just(json!("1Gi")),
        1 => Just(json!("0")),
        1 => Just(json!("-1")),
        1 => Just(json!("2222222200m")),
        1 => Just(json!("1e30")),
        2 => "[0-9]{0,20}(m|Ki|Mi|Gi|Ei|k|M|G|e9|X)?".prop_map(Value::from),
    ]
}

fn word() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(json!("virtio")),
        2 => Just(json!("sata")),
        1 => Just(json!("scsi")),
        1 => Just(json!("usb")),
        1 => Just(json!("ide")),
        1 => Just(json!("")),
    ]
}

fn disk() -> impl Strategy<Value = Value> {
    (
        0..4usize,
        0..5usize,
        word(),
        maybe("[0-9a-f:.]{0,14}".prop_map(Value::from)),
        maybe(any::<u32>().prop_map(Value::from)),
        any::<[bool; 4]>(),
    )
        .prop_map(|(name, kind, bus, pci, boot, flags)| {
            let mut d = json!({"name": format!("v{name}"), "bootOrder": boot, "dedicatedIOThread": flags[0], "shareable": flags[1]});
            match kind {
                0 | 1 => d["disk"] = json!({"bus": bus, "pciAddress": if flags[3] { pci } else { Value::Null }}),
                2 => d["cdrom"] = json!({"bus": bus, "tray": if flags[2] { "open" } else { "ajar" }}),
                3 => d["lun"] = json!({"bus": bus, "reservation": flags[3]}),
                _ => {}
            }
            if flags[2] {
                d["cache"] = json!(if flags[3] { "writeback" } else { "none" });
            }
            d
        })
}

fn volume() -> impl Strategy<Value = Value> {
    (0..4usize, 0..14usize, quantity()).prop_map(|(name, kind, q)| {
        let mut v = match kind {
            0 | 12 => json!({"containerDisk": {"image": "quay.io/x"}}),
            1 | 13 => json!({"emptyDisk": {"capacity": q}}),
            2 => json!({"persistentVolumeClaim": {"claimName": "c"}}),
            3 => json!({"dataVolume": {"name": "d"}}),
            4 => json!({"hostDisk": {"path": "/x/y.img", "type": "Disk"}}),
            5 => json!({"cloudInitNoCloud": {"userData": "#cloud-config"}}),
            6 => json!({"ephemeral": {"persistentVolumeClaim": {"claimName": "c"}}}),
            7 => json!({"configMap": {"name": "c"}}),
            8 => json!({"memoryDump": {"claimName": "m"}}),
            9 => json!({"containerDisk": {"image": "x"}, "emptyDisk": {"capacity": "1Mi"}}),
            10 => json!({"sysprep": {}}),
            _ => json!({}),
        };
        v["name"] = json!(format!("v{name}"));
        v
    })
}

fn interface() -> impl Strategy<Value = Value> {
    (
        0..3usize,
        0..8usize,
        maybe("[0-9a-fA-F:]{0,17}".prop_map(Value::from)),
        -2i32..70000,
        maybe(Just(json!("down"))),
    )
        .prop_map(|(name, binding, mac, port, state)| {
            let mut i =
                json!({"name": format!("n{name}"), "macAddress": mac, "ports": [{"port": port}], "state": state});
            let key = [
                "bridge",
                "bridge",
                "bridge",
                "masquerade",
                "masquerade",
                "masquerade",
                "sriov",
                "slirp",
            ][binding];
            i[key] = json!({});
            i
        })
}

fn vmi() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(disk(), 0..6),
        prop::collection::vec(volume(), 0..6),
        prop::collection::vec(interface(), 0..3),
        prop::collection::vec((0..3usize, any::<bool>()), 0..3),
        (num(8), num(8), num(4), num(12)),
        (maybe(quantity()), maybe(quantity()), maybe(quantity())),
        any::<[bool; 8]>(),
        (0..8usize, 0..6usize, 0..6usize),
    )
        .prop_map(|(disks, volumes, interfaces, networks, (sockets, cores, threads, max), (guest, request, cpu), flags, (clock, input, dedicated))| {
            // Mostly one network per interface, sometimes a stray one.
            let mut names: Vec<(usize, bool)> = interfaces
                .iter()
                .filter_map(|i| i["name"].as_str().and_then(|n| n[1..].parse().ok()))
                .map(|n| (n, flags[3]))
                .collect();
            names.dedup();
            if flags[4] && flags[5] {
                names.extend(networks);
            }
            let networks: Vec<Value> = names
                .into_iter()
                .map(|(n, pod)| if pod { json!({"name": format!("n{n}"), "pod": {}}) } else { json!({"name": format!("n{n}"), "multus": {"networkName": "x"}}) })
                .collect();
            json!({
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstance",
                "metadata": {"name": "prop", "uid": "u"},
                "spec": {
                    "domain": {
                        "cpu": {"sockets": sockets, "cores": cores, "threads": threads, "maxSockets": max,
                                "model": if flags[0] { "Conroe" } else { "host-model" }, "dedicatedCpuPlacement": dedicated == 0},
                        "memory": {"guest": guest, "hugepages": if flags[2] { json!({"pageSize": "2Mi"}) } else { Value::Null }},
                        "resources": {"requests": {"memory": request, "cpu": cpu}},
                        "ioThreadsPolicy": if flags[3] { "auto" } else { "shared" },
                        "firmware": if flags[4] && flags[5] { json!({"bootloader": {"efi": {}}}) } else { json!({"bootloader": {"bios": {"useSerial": true}}}) },
                        "features": if flags[5] { json!({"smm": {}, "hyperv": {"spinlocks": {}}}) } else { Value::Null },
                        "clock": match clock {
                            0 => json!({"utc": {}, "timezone": "UTC"}),
                            1 => json!({"timer": {"rtc": {"tickPolicy": "bogus"}}}),
                            2 => json!({"timezone": "Europe/Berlin"}),
                            _ => json!({"utc": {"offsetSeconds": 60}, "timer": {"rtc": {"tickPolicy": "catchup"}, "hpet": {"present": false}}}),
                        },
                        "devices": {
                            "disks": disks, "interfaces": interfaces, "blockMultiQueue": flags[7],
                            "networkInterfaceMultiqueue": flags[7], "autoattachSerialConsole": flags[0],
                            "inputs": [{"name": "t", "type": if input == 0 { "mouse" } else { "tablet" }}]
                        }
                    },
                    "volumes": volumes,
                    "networks": networks
                }
            })
        })
}

/// JSON nulls stand for absent optional fields.
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Renders one generated VMI; `Some(true)` when it became a domain, `None` when it did not parse.
fn render_one(mut value: Value, emulate: bool) -> Option<bool> {
    strip_nulls(&mut value);
    let vmi = serde_json::from_value::<VirtualMachineInstance>(value).ok()?;
    let mut ctx = ConvertContext {
        domain_type: if emulate { DomainType::Qemu } else { DomainType::Kvm },
        ..ConvertContext::default()
    };
    ctx.container_disk_formats.insert("v0".to_owned(), "qcow2".to_owned());
    Some(render(&vmi, &ctx).is_ok_and(|domain| domain.to_xml().is_ok()))
}

#[test]
fn rendering_generated_vmis_never_panics_and_often_succeeds() {
    // A fixed seed keeps the coverage counts below stable from run to run.
    let rng = proptest::test_runner::TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha);
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(ProptestConfig::with_cases(3000), rng);
    let (parsed, rendered) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let result = runner.run(&(vmi(), any::<bool>()), |(value, emulate)| {
        if let Some(ok) = render_one(value, emulate) {
            parsed.set(parsed.get() + 1);
            rendered.set(rendered.get() + u32::from(ok));
        }
        Ok(())
    });
    assert!(result.is_ok(), "{result:?}");
    // The generator must reach the renderer's happy paths, not only its early rejections.
    let (parsed, rendered) = (parsed.get(), rendered.get());
    assert!(parsed > 2000, "only {parsed} of 3000 generated VMIs parsed");
    assert!(rendered >= 50, "only {rendered} generated VMIs rendered");
}

#[test]
fn the_fuzz_body_survives_its_seed_corpus() {
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for dir in ["../manifests/examples", "tests/golden"] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for entry in std::fs::read_dir(dir).expect("seed dir").filter_map(Result::ok) {
            if entry.path().is_dir() {
                continue;
            }
            seeds.push(std::fs::read(entry.path()).expect("seed"));
        }
    }
    for seed in &seeds {
        domain_xml::fuzzing::render_untrusted(seed);
        // Truncations and byte flips of each seed, as a fuzzer's first mutations would be.
        for cut in (0..seed.len()).step_by(97) {
            domain_xml::fuzzing::render_untrusted(&seed[..cut]);
            let mut flipped = seed.clone();
            flipped[cut] ^= 0x20;
            domain_xml::fuzzing::render_untrusted(&flipped);
        }
    }
    assert!(seeds.len() > 40);
}

#[test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs virt-xml-validate: make test runs it (feature host-tests)"
)]
fn the_benchmark_fixtures_render() {
    for value in [domain_xml::fixtures::minimal_vmi(), domain_xml::fixtures::large_vmi()] {
        let vmi = domain_xml::fixtures::vmi(value);
        let ctx = ConvertContext::assuming_container_disk_format(DomainType::Qemu, &vmi, "qcow2");
        let domain = render(&vmi, &ctx).unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("domain.xml");
        std::fs::write(&file, domain.to_xml().expect("xml")).expect("write");
        let out = std::process::Command::new("virt-xml-validate")
            .arg(&file)
            .arg("domain")
            .output()
            .expect("validate");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}
