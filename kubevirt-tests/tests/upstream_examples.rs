//! Upstream KubeVirt's `examples/` folder, restated as our own fixtures in
//! `tests/upstream_examples/` (one file per upstream VMI or VM example, named like it; the instance
//! types and preferences the VMs name are the `instancetype-*.yaml` and `preference-*.yaml` files).
//! Each fixture goes the way a cluster takes it and ends in the one outcome [`CASES`] expects:
//!
//! - [`Expected::Renders`]: the example needs only what kubevirt-rs supports, and its domain
//!   passes `virt-xml-validate` (a missing tool fails the test);
//! - [`Expected::Refused`]: the example asks for something kubevirt-rs refuses on purpose, and
//!   the refusal says "`<feature>` is not supported by kubevirt-rs".
//!
//! The way, for each fixture:
//! 1. A VM is checked for refused fields as virt-api's validating webhook checks it
//!    (`kubevirt_api::support::vm`: volume migration, VM-owned DRA claims, its template).
//! 2. The VMI is loaded as local mode loads it (`virt_launcher::local::manifest::load_vmi`): a VM
//!    becomes its template's VMI, with the instance type and preference applied as virt-controller
//!    applies them.
//! 3. virt-api's mutating defaults for a new VMI are applied under the default cluster
//!    configuration (`virt_api::defaults::set_vmi_create_defaults`): a disk for each volume
//!    without one, SATA for disks without a bus, the pod interface, the machine type.
//! 4. The domain is rendered for emulation (TCG): containerDisks taken to be raw images, PVCs in
//!    filesystem mode, dedicated CPUs pinned onto a fixed host of eight CPUs.
//!
//! A fixture missing from [`CASES`], or an entry without its fixture, fails the test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use domain_xml::convert::{HostCell, HostCpu};
use domain_xml::{ConvertContext, DomainType, HostCpus, render};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::v1::ClusterConfig;
use kubevirt_api::{Manifest, support};

/// What a fixture must end in.
#[derive(Clone, Copy, Debug)]
enum Expected {
    /// A domain that passes `virt-xml-validate`.
    Renders,
    /// A refusal whose text contains this (which itself ends in "is not supported by kubevirt-rs").
    Refused(&'static str),
}

use Expected::{Refused, Renders};

/// Hook sidecars are refused, not ignored.
const HOOKS: &str = "hook sidecars is not supported by kubevirt-rs";

/// One fixture: its file, the instance type and preference files it needs, and its outcome.
struct Case {
    file: &'static str,
    with: &'static [&'static str],
    expected: Expected,
}

const fn case(file: &'static str, expected: Expected) -> Case {
    Case {
        file,
        with: &[],
        expected,
    }
}

const fn case_with(file: &'static str, with: &'static [&'static str], expected: Expected) -> Case {
    Case { file, with, expected }
}

/// The text every refusal carries.
const NOT_SUPPORTED: &str = "is not supported by kubevirt-rs";

const MULTUS: Expected = Refused("Multus networks is not supported by kubevirt-rs");
const GPUS: Expected = Refused("GPU passthrough is not supported by kubevirt-rs");

/// Every fixture and its outcome.
const CASES: &[Case] = &[
    // VirtualMachineInstance examples.
    case("vmi-ephemeral.yaml", Renders),
    case("vmi-migratable.yaml", Renders),
    case("vmi-sata.yaml", Renders),
    case("vmi-fedora.yaml", Renders),
    case("vmi-fedora-isolated.yaml", Renders),
    case("vmi-fedora-dedicated.yaml", Renders),
    case("vmi-secureboot.yaml", Renders),
    case("vmi-alpine-efi.yaml", Renders),
    case("vmi-nocloud.yaml", Renders),
    case("vmi-pvc.yaml", Renders),
    case("vmi-host-disk.yaml", Renders),
    case("vmi-windows.yaml", Renders),
    case("vmi-kernel-boot.yaml", Renders),
    case("vmi-arm.yaml", Renders),
    case("vmi-masquerade.yaml", Renders),
    case(
        "vmi-sriov.yaml",
        Refused("the SR-IOV binding is not supported by kubevirt-rs"),
    ),
    case("vmi-multus-ptp.yaml", MULTUS),
    case("vmi-multus-multiple-net.yaml", MULTUS),
    case("vmi-gpu.yaml", GPUS),
    case(
        "vmi-usb.yaml",
        Refused("host device passthrough is not supported by kubevirt-rs"),
    ),
    case("vmi-with-sidecar-hook.yaml", Refused(HOOKS)),
    case("vmi-with-sidecar-hook-configmap.yaml", Refused(HOOKS)),
    case("vmi-sidecar-qemu-args.yaml", Refused(HOOKS)),
    case("vmi-with-virt-xml-sidecar-hook.yaml", Refused(HOOKS)),
    case("vmi-with-sidecar-hostpath.yaml", Refused(HOOKS)),
    case("vmi-ssd-emulation.yaml", Renders),
    case(
        "vmi-file-memory-backing.yaml",
        Refused("file-backed guest memory is not supported by kubevirt-rs"),
    ),
    case("vmi-dra-pgpu.yaml", GPUS),
    // VirtualMachine examples.
    case("vm-cirros.yaml", Renders),
    case("vm-priorityclass.yaml", Renders),
    case("vm-cirros-sata.yaml", Renders),
    case("vm-cirros-with-sidecar-hook-configmap.yaml", Refused(HOOKS)),
    case("vm-alpine-datavolume.yaml", Renders),
    case("vm-alpine-multipvc.yaml", Renders),
    case_with("vm-cirros-csmall.yaml", &["instancetype-csmall.yaml"], Renders),
    case_with(
        "vm-cirros-cluster-csmall.yaml",
        &["instancetype-cluster-csmall.yaml"],
        Renders,
    ),
    case_with("vm-cirros-clarge.yaml", &["instancetype-clarge.yaml"], Renders),
    case_with(
        "vm-cirros-clarge-virtio.yaml",
        &["instancetype-clarge.yaml", "preference-virtio.yaml"],
        Renders,
    ),
    case_with(
        "vm-cirros-clarge-windows.yaml",
        &["instancetype-clarge.yaml", "preference-windows.yaml"],
        Renders,
    ),
    case_with(
        "vm-windows-clarge-windows.yaml",
        &["instancetype-clarge.yaml", "preference-windows.yaml"],
        Renders,
    ),
    case("vm-win2k19.yaml", MULTUS),
    case("vm_multus_with_nad.yaml", MULTUS),
    case(
        "vm-dra-pgpu.yaml",
        Refused("dynamic resource allocation is not supported by kubevirt-rs"),
    ),
];

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstream_examples")
}

/// An instance type or preference a VM names, rather than a fixture of its own.
fn is_object_file(name: &str) -> bool {
    name.starts_with("instancetype-") || name.starts_with("preference-")
}

/// The YAML files in the fixtures folder, by name.
fn yaml_files() -> BTreeSet<String> {
    std::fs::read_dir(fixtures_dir())
        .expect("tests/upstream_examples")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect()
}

#[test]
fn every_fixture_has_an_entry_and_every_entry_its_fixture() {
    let files = yaml_files();
    let fixtures: BTreeSet<&str> = files
        .iter()
        .map(String::as_str)
        .filter(|n| !is_object_file(n))
        .collect();
    let entries: BTreeSet<&str> = CASES.iter().map(|c| c.file).collect();
    assert_eq!(entries.len(), CASES.len(), "a fixture is listed twice");
    let unlisted: Vec<_> = fixtures.difference(&entries).collect();
    assert!(unlisted.is_empty(), "fixtures missing from CASES: {unlisted:?}");
    let missing: Vec<_> = entries.difference(&fixtures).collect();
    assert!(missing.is_empty(), "CASES entries without a fixture: {missing:?}");

    let used: BTreeSet<&str> = CASES.iter().flat_map(|c| c.with.iter().copied()).collect();
    let objects: BTreeSet<&str> = files.iter().map(String::as_str).filter(|n| is_object_file(n)).collect();
    let unknown: Vec<_> = used.difference(&objects).collect();
    assert!(unknown.is_empty(), "--with files that do not exist: {unknown:?}");
    let unused: Vec<_> = objects.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "instance types or preferences no fixture uses: {unused:?}"
    );
}

#[test]
fn every_fixture_says_which_upstream_example_it_restates_and_its_outcome() {
    for case in CASES {
        let text = std::fs::read_to_string(fixtures_dir().join(case.file)).expect("read fixture");
        let upstream = format!("upstream KubeVirt's examples/{}", case.file);
        assert!(
            text.starts_with("# ") && text.replace("\n# ", " ").contains(&upstream),
            "{}: the opening comment must name {upstream}",
            case.file
        );
        let outcome = match case.expected {
            Renders => "# Expected: renders",
            Refused(_) => "# Expected: refused",
        };
        assert!(
            text.contains(outcome),
            "{}: the comment must say {outcome:?}",
            case.file
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs virt-xml-validate: make test runs it (feature host-tests)"
)]
fn every_upstream_example_renders_a_valid_domain_or_is_refused_as_expected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let failures: Vec<String> = CASES.iter().filter_map(|case| check(case, dir.path()).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} upstream examples differ from what CASES expects:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

/// Takes one fixture the whole way and compares the outcome with the expected one.
fn check(case: &Case, scratch: &Path) -> Result<(), String> {
    let name = case.file;
    match (case.expected, xml_of(case)) {
        (Renders, Ok(xml)) => validate(name, &xml, scratch),
        (Renders, Err(e)) => Err(format!("{name}: expected a domain, got: {e}")),
        (Refused(expected), Ok(_)) => Err(format!("{name}: rendered, but expected the refusal {expected:?}")),
        (Refused(expected), Err(e)) if e.contains(expected) && e.contains(NOT_SUPPORTED) => Ok(()),
        (Refused(expected), Err(e)) => Err(format!("{name}: expected the refusal {expected:?}, got: {e}")),
    }
}

/// The domain XML of a fixture, or the text of why there is none.
fn xml_of(case: &Case) -> Result<String, String> {
    let path = fixtures_dir().join(case.file);
    if let Manifest::Vm(vm) = Manifest::from_path(&path).map_err(|e| e.to_string())?
        && let Some(refused) = support::vm(&vm).into_iter().next()
    {
        return Err(refused.to_string());
    }
    let with: Vec<PathBuf> = case.with.iter().map(|f| fixtures_dir().join(f)).collect();
    let mut vmi = virt_launcher::local::manifest::load_vmi(&path, &with).map_err(|e| e.to_string())?;
    virt_api::defaults::set_vmi_create_defaults(
        &mut vmi,
        &ClusterConfig::default(),
        Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        &|| "6f2a0c1e-8b7d-4c3a-9e5f-1a2b3c4d5e6f".to_owned(),
    )
    .map_err(|e| format!("virt-api's defaults: {e}"))?;
    let mut ctx = ConvertContext::assuming_container_disk_format(DomainType::Qemu, &vmi, "raw");
    ctx.host_cpus = Some(eight_cpu_host());
    let domain = render(&vmi, &ctx).map_err(|e| e.to_string())?;
    domain.to_xml().map_err(|e| format!("writing the XML: {e}"))
}

/// One NUMA cell of four cores with two threads each (CPUs 0-7, siblings n and n+4), all of
/// them in the pod's cpuset.
fn eight_cpu_host() -> HostCpus {
    HostCpus {
        cpuset: (0..8).collect(),
        cells: vec![HostCell {
            id: 0,
            cpus: (0..8)
                .map(|id| HostCpu {
                    id,
                    siblings: vec![id % 4, id % 4 + 4],
                })
                .collect(),
        }],
    }
}

/// Runs `virt-xml-validate` on the domain; a missing tool fails the test.
fn validate(name: &str, xml: &str, scratch: &Path) -> Result<(), String> {
    let file = scratch.join(Path::new(name).with_extension("xml"));
    std::fs::write(&file, xml).expect("write the domain XML");
    let output = Command::new("virt-xml-validate")
        .arg(&file)
        .arg("domain")
        .output()
        .expect("virt-xml-validate (libvirt-clients and libxml2-utils; run `make deps`)");
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{name}: virt-xml-validate failed:\n{}{}\n{xml}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
