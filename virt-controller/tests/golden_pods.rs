//! Golden launcher pods: each `tests/golden/<case>.vmi.yaml` renders to `<case>.pod.yaml` (compared
//! as data). `KUBEVIRT_RS_UPDATE_GOLDEN=1` rewrites the goldens after an intended change; review
//! the diff.

use std::path::Path;

use kubevirt_api::v1::VirtualMachineInstance;
use pretty_assertions::assert_eq;
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
        let pod = render_launcher_pod(&vmi, &config_for(case)).expect("render");
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
        cases, 7,
        "minimal, emulation, forced emulation, many disks, hugepages, EFI, dedicated"
    );
}
