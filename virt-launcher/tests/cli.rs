//! `virt-launcher render` as a user runs it: XML on stdout for a good manifest; for a bad one an
//! error naming the file and the field, exit code 2, and nothing on stdout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn render(manifest: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
        .arg("render")
        .arg("--vmi")
        .arg(manifest)
        .args(extra)
        .output()
        .expect("run virt-launcher")
}

fn write_manifest(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("vmi.yaml");
    std::fs::write(&path, text).expect("write manifest");
    path
}

const GOOD: &str = "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: cli}
spec:
  domain:
    memory: {guest: 64Mi}
    devices:
      disks: [{name: scratch, disk: {bus: virtio}}]
  volumes: [{name: scratch, emptyDisk: {capacity: 1Gi}}]
";

#[test]
fn force_emulation_renders_a_qemu_domain_on_stdout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = render(&write_manifest(&dir, GOOD), &["--force-emulation"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let xml = String::from_utf8_lossy(&out.stdout);
    assert!(xml.starts_with("<domain type=\"qemu\""), "{xml}");
    assert!(xml.contains("<name>default_cli</name>"), "{xml}");
}

#[test]
fn the_test_guest_example_renders_with_direct_kernel_boot() {
    let out = render(
        &repo().join("manifests/examples/vmi-testguest.yaml"),
        &["--force-emulation"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let xml = String::from_utf8_lossy(&out.stdout);
    assert!(
        xml.contains("<kernel>") && xml.contains("<cmdline>console=ttyS0"),
        "{xml}"
    );
}

#[test]
fn a_vm_manifest_renders_its_template() {
    let out = render(
        &repo().join("manifests/examples/vm-testguest.yaml"),
        &["--force-emulation"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("<name>default_testguest</name>"));
}

fn assert_bad_input(out: &Output, expected: &[&str]) {
    assert_eq!(out.status.code(), Some(2), "exit code");
    assert!(
        out.stdout.is_empty(),
        "stdout must stay empty: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for part in expected {
        assert!(stderr.contains(part), "stderr {stderr:?} lacks {part:?}");
    }
    // The error and each of its causes are said once, however the libraries chain them.
    let line = stderr
        .lines()
        .find(|l| l.starts_with("virt-launcher: error: "))
        .expect("an error line");
    let cause = line.rsplit(": ").next().unwrap_or_default();
    assert_eq!(line.matches(cause).count(), 1, "the cause repeats: {line:?}");
}

#[test]
fn a_contradictory_spec_names_the_field_and_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = GOOD.replace("{bus: virtio}", "{bus: sata, pciAddress: '0000:81:01.0'}");
    let path = write_manifest(&dir, &text);
    assert_bad_input(
        &render(&path, &["--force-emulation"]),
        &["vmi.yaml", "spec.domain.devices.disks[0].disk.pciAddress"],
    );
}

#[test]
fn an_unknown_field_names_its_path_and_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_manifest(&dir, &GOOD.replace("bus: virtio", "buss: virtio"));
    assert_bad_input(
        &render(&path, &["--force-emulation"]),
        &["unknown field spec.domain.devices.disks[0].disk.buss"],
    );
}

#[test]
fn a_missing_file_is_named_and_exits_2() {
    assert_bad_input(
        &render(Path::new("/nonexistent/vmi.yaml"), &[]),
        &["/nonexistent/vmi.yaml"],
    );
}

#[test]
fn a_disk_without_a_volume_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_manifest(
        &dir,
        &GOOD.replace("volumes: [{name: scratch, emptyDisk: {capacity: 1Gi}}]", ""),
    );
    assert_bad_input(
        &render(&path, &["--force-emulation"]),
        &["spec.domain.devices.disks[0].name 'scratch' not found."],
    );
}

#[test]
fn a_vm_naming_an_instance_type_renders_with_the_manifests_given_with_it() {
    let dir = repo().join("manifests/examples/instancetypes");
    let with = |file: &str| dir.join(file).display().to_string();
    let (it, pref) = (with("instancetype-testguest.yaml"), with("preference-testguest.yaml"));
    let out = render(
        &dir.join("vm-testguest.yaml"),
        &["--force-emulation", "--with", &it, "--with", &pref],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let xml = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "<memory unit=\"b\">268435456</memory>",
        "<vcpu placement=\"static\">1</vcpu>",
        "<target dev=\"vda\" bus=\"virtio\"/>",
    ] {
        assert!(xml.contains(expected), "{expected} missing:\n{xml}");
    }
    assert!(!xml.contains("<graphics"), "the preference turns graphics off:\n{xml}");
}

#[test]
fn a_vm_whose_instance_type_is_not_given_is_refused_by_field() {
    let dir = repo().join("manifests/examples/instancetypes");
    let out = render(&dir.join("vm-testguest.yaml"), &["--force-emulation"]);
    assert_bad_input(
        &out,
        &[
            "vm-testguest.yaml: spec.instancetype:",
            "virtualmachineclusterinstancetypes.instancetype.kubevirt.io \"testguest.small\" not found; give its manifest with --with",
        ],
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = write_manifest(
        &tmp,
        "apiVersion: instancetype.kubevirt.io/v1beta1\nkind: VirtualMachineClusterInstancetype\nmetadata: {name: x}\nspec: {cpu: {guest: 1, cores: 2}, memory: {guest: 1Gi}}\n",
    );
    let bad = bad.display().to_string();
    let out = render(&dir.join("vm-testguest.yaml"), &["--force-emulation", "--with", &bad]);
    assert_bad_input(&out, &["unknown field spec.cpu.cores"]);
}

/// `virt-launcher render --vmi <manifest>` allowed onto the one CPU `cpu` (util-linux's taskset).
fn render_on_cpu(cpu: usize, manifest: &std::path::Path) -> std::process::Output {
    Command::new("taskset")
        .args([
            "-c",
            &cpu.to_string(),
            env!("CARGO_BIN_EXE_virt-launcher"),
            "render",
            "--vmi",
        ])
        .arg(manifest)
        .output()
        .expect("run taskset (util-linux)")
}

#[test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs /dev/kvm and taskset: make test runs it (feature host-tests)"
)]
fn dedicated_cpus_are_pinned_within_the_cpus_render_may_run_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = write_manifest(
        &dir,
        &GOOD.replace(
            "    memory: {guest: 64Mi}\n",
            "    memory: {guest: 64Mi}\n    cpu: {cores: 1, dedicatedCpuPlacement: true}\n",
        ),
    );
    let last_cpu = std::thread::available_parallelism().map_or(1, std::num::NonZero::get) - 1;
    let out = render_on_cpu(last_cpu, &manifest);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let xml = String::from_utf8_lossy(&out.stdout);
    assert!(
        xml.contains(&format!("<vcpupin vcpu=\"0\" cpuset=\"{last_cpu}\"/>")),
        "the vCPU is pinned to the one CPU taskset allowed: {xml}"
    );
    assert!(xml.contains("<hint-dedicated state=\"on\"/>"), "{xml}");

    let two_cores = GOOD.replace(
        "    memory: {guest: 64Mi}\n",
        "    memory: {guest: 64Mi}\n    cpu: {cores: 2, dedicatedCpuPlacement: true}\n",
    );
    let out = render_on_cpu(last_cpu, &write_manifest(&dir, &two_cores));
    assert_eq!(out.status.code(), Some(2), "two vCPUs do not fit one CPU");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "spec.domain.cpu.dedicatedCpuPlacement: not enough exclusive threads provided, could not fit 1 core(s)"
        ),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn persistent_tpm_and_efi_are_refused_locally_by_field() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (text, field) in [
        (
            GOOD.replace("    devices:\n", "    devices:\n      tpm: {persistent: true}\n"),
            "spec.domain.devices.tpm.persistent",
        ),
        (
            GOOD.replace(
                "    devices:\n",
                "    firmware: {bootloader: {efi: {secureBoot: false, persistent: true}}}\n    devices:\n",
            ),
            "spec.domain.firmware.bootloader.efi.persistent",
        ),
    ] {
        let manifest = write_manifest(&tmp, &text);
        let out = render(&manifest, &["--force-emulation"]);
        assert_bad_input(
            &out,
            &[
                &format!("vmi.yaml: {field}:"),
                "persistent state needs VM state storage, a claim virt-controller makes in a cluster; a local launcher has none",
            ],
        );
    }
}
