//! Golden launcher pods: each `tests/golden/<case>.vmi.yaml` renders to `<case>.pod.yaml` (compared
//! as data). `KUBEVIRT_RS_UPDATE_GOLDEN=1` rewrites the goldens after an intended change; review
//! the diff.

use std::path::Path;

use kubevirt_api::v1::VirtualMachineInstance;
use pretty_assertions::assert_eq;
use virt_controller::claims::{ClaimModes, VolumeMode, claim_of};
use virt_controller::pod::{Emulation, PodConfig, render_launcher_pod};

const LAUNCHER_IMAGE: &str = "registry.example/kubevirt-rs/virt-launcher:v0.1.0";

fn config_for(case: &str) -> PodConfig {
    let mut config = PodConfig::new(LAUNCHER_IMAGE);
    config.emulation = if case.starts_with("emulation") {
        Emulation::WhereKvmIsMissing
    } else if case.starts_with("forced-emulation") {
        Emulation::Forced
    } else {
        Emulation::Off
    };
    config
}

/// The claims' modes as the PVC watch would give them: block for the claims whose name says so.
fn claims_of(vmi: &VirtualMachineInstance) -> ClaimModes {
    ClaimModes::new(vmi.spec.volumes.iter().filter_map(claim_of).map(|name| {
        let mode = if name.ends_with("-block") {
            VolumeMode::Block
        } else {
            VolumeMode::Filesystem
        };
        (name.to_owned(), mode)
    }))
}

#[test]
fn every_vmi_renders_its_golden_pod() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("KUBEVIRT_RS_UPDATE_GOLDEN").is_some();
    let mut cases = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("golden dir")
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(std::fs::DirEntry::path);
    for entry in entries {
        let path = entry.path();
        let Some(case) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".vmi.yaml"))
        else {
            continue;
        };
        cases += 1;
        let vmi: VirtualMachineInstance =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).expect("read VMI")).expect("VMI YAML");
        let pod = render_launcher_pod(&vmi, &config_for(case), &claims_of(&vmi)).expect("render");
        let rendered = serde_json::to_value(&pod).expect("pod JSON");
        let golden_path = dir.join(format!("{case}.pod.yaml"));
        if update {
            let text = serde_saphyr::to_string(&rendered).expect("YAML");
            std::fs::write(
                &golden_path,
                format!("# Rendered from {case}.vmi.yaml; see tests/golden_pods.rs.\n{text}"),
            )
            .expect("write golden");
            continue;
        }
        let golden: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&golden_path).unwrap_or_else(|_| {
                panic!(
                    "{} is missing: run with KUBEVIRT_RS_UPDATE_GOLDEN=1",
                    golden_path.display()
                )
            }))
            .expect("golden YAML");
        assert_eq!(rendered, golden, "{case}");
    }
    assert_eq!(
        cases, 8,
        "minimal, emulation, forced emulation, many disks, block claims, hugepages, EFI, dedicated"
    );
}

#[test]
fn a_claim_whose_mode_is_unknown_is_refused_by_field() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let vmi: VirtualMachineInstance =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("block-claims.vmi.yaml")).expect("read"))
            .expect("VMI YAML");
    let only_fast = ClaimModes::new([("fast-block".to_owned(), VolumeMode::Block)]);
    let refused = render_launcher_pod(&vmi, &PodConfig::new(LAUNCHER_IMAGE), &only_fast).expect_err("refused");
    assert_eq!(
        refused.to_string(),
        "spec.volumes[1]: PVC default/home-dv does not exist, waiting for it to appear"
    );
}
