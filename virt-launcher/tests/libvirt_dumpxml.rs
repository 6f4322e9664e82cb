//! libvirt's own `dumpxml` of a running domain parses into our model and renders back equivalently.
//!
//! The domains run on libvirt's in-process `test:///default` driver through `virsh`, so this needs
//! libvirt-clients but no daemon and no QEMU. (The launcher's runtime tests boot real QEMU.)

use std::path::Path;
use std::process::Command;

use kubevirt_api::Manifest;
use pretty_assertions::assert_eq;
use virt_launcher::domain::{ConvertContext, Domain, DomainType, render};

fn repo_file(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Defines and starts `domain` on the test driver and returns libvirt's live XML.
fn dumpxml_of_running(domain: &Domain) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("domain.xml");
    std::fs::write(&file, domain.to_xml().expect("xml")).expect("write");
    let script = format!(
        "define {}; start {name}; dumpxml {name}",
        file.display(),
        name = domain.name
    );
    let out = Command::new("virsh")
        .args(["-q", "-c", "test:///default", &script])
        .output()
        .expect("virsh (libvirt-clients)");
    assert!(
        out.status.success(),
        "virsh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = text.find("<domain").expect("dumpxml output");
    let end = text.rfind("</domain>").expect("end of domain") + "</domain>".len();
    text[start..end].to_owned()
}

/// Target, device kind, source, format and alias of one disk.
type DiskFact = (String, String, Option<String>, Option<String>, Option<String>);

/// Disk facts by target; libvirt keeps disks sorted by bus and target, not in spec order.
fn disk_facts(d: &Domain) -> Vec<DiskFact> {
    let mut facts: Vec<_> = d
        .devices
        .disk
        .iter()
        .map(|disk| {
            let source = disk.source.as_ref();
            (
                disk.target.dev.clone(),
                disk.device.clone(),
                source.and_then(|s| s.file.clone().or_else(|| s.dev.clone())),
                disk.driver.as_ref().and_then(|d| d.format.clone()),
                disk.alias.as_ref().map(|a| a.name.clone()),
            )
        })
        .collect();
    facts.sort();
    facts
}

fn check_round_trip(manifest: &str) {
    let path = repo_file(manifest);
    let mut vmi = Manifest::from_path(&path)
        .and_then(|m| m.into_vmi(&path))
        .expect("manifest");
    vmi.metadata.uid = Some("3d5a1b7e-1f0e-4c57-9a55-0d1f3e9c2b11".to_owned());
    let ctx = ConvertContext::assuming_container_disk_format(DomainType::Qemu, &vmi, "qcow2");
    let ours = render(&vmi, &ctx).expect("render");
    let live_xml = dumpxml_of_running(&ours);
    let live =
        Domain::from_xml(&live_xml).unwrap_or_else(|e| panic!("{manifest}: dumpxml does not parse: {e}\n{live_xml}"));

    assert!(
        live_xml.contains(" id='"),
        "{manifest}: the dumped domain is not running"
    );
    assert_eq!(live.name, ours.name);
    assert_eq!(live.domain_type, "qemu");
    assert_eq!(live.memory.to_bytes(), ours.memory.to_bytes(), "{manifest}: memory");
    assert_eq!(live.vcpu.count, ours.vcpu.count);
    assert_eq!(live.os.kernel, ours.os.kernel);
    assert_eq!(live.os.cmdline, ours.os.cmdline);
    assert_eq!(disk_facts(&live), disk_facts(&ours), "{manifest}: disks");
    assert_eq!(
        live.devices.interface.len(),
        ours.devices.interface.len(),
        "{manifest}: interfaces"
    );
    assert_eq!(
        live.devices.serial.len(),
        ours.devices.serial.len(),
        "{manifest}: serial ports"
    );
    let live_uid = live
        .metadata
        .as_ref()
        .and_then(|m| m.kubevirt.as_ref())
        .and_then(|k| k.uid.clone());
    assert_eq!(
        live_uid, vmi.metadata.uid,
        "{manifest}: KubeVirt metadata survives libvirt"
    );

    // Rendering libvirt's version back gives the same model, and a valid domain.
    let rendered = live.to_xml().expect("render live domain");
    assert_eq!(
        Domain::from_xml(&rendered).expect("reparse"),
        live,
        "{manifest}: round trip"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("live.xml");
    std::fs::write(&file, &rendered).expect("write");
    let validate = Command::new("virt-xml-validate")
        .arg(&file)
        .arg("domain")
        .output()
        .expect("virt-xml-validate");
    assert!(
        validate.status.success(),
        "{manifest}: {}",
        String::from_utf8_lossy(&validate.stderr)
    );
}

#[test]
fn the_test_guest_round_trips_through_libvirt() {
    check_round_trip("manifests/examples/vmi-testguest.yaml");
}

#[test]
fn a_vmi_with_many_disks_and_interfaces_round_trips_through_libvirt() {
    check_round_trip("manifests/examples/vmi-multi-disk-nic.yaml");
}

#[test]
fn a_cloud_init_vmi_with_masquerade_round_trips_through_libvirt() {
    check_round_trip("manifests/examples/vmi-cloudinit-nocloud.yaml");
}
