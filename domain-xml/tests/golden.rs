//! Golden cases for VMI -> domain XML: each `tests/golden/<case>.yaml` holds a VMI, optionally a
//! conversion context, and either an expected error or a `<case>.xml` beside it. Domains are
//! compared semantically (parsed into the model), and every golden passes `virt-xml-validate`.
//!
//! `KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p domain-xml --test golden` rewrites the XML files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use domain_xml::convert::{HostCell, HostCpu};
use domain_xml::{ConvertContext, Domain, DomainType, HostCpus, render};
use kubevirt_api::Manifest;
use kubevirt_api::v1::VirtualMachineInstance;
use pretty_assertions::assert_eq;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseContext {
    domain_type: Option<String>,
    #[serde(default)]
    block_volumes: BTreeSet<String>,
    #[serde(default)]
    container_disk_formats: BTreeMap<String, String>,
    bochs_display_for_efi: Option<bool>,
    run_as_root: Option<bool>,
    mem_balloon_stats_period: Option<u32>,
    free_page_reporting: Option<bool>,
    host_cpus: Option<CaseHostCpus>,
}

/// The pod's cpuset and the host's cells, each core as its sibling list (`"0,4"`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseHostCpus {
    cpuset: String,
    cells: Vec<CaseHostCell>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseHostCell {
    id: u32,
    cores: Vec<String>,
}

impl CaseHostCpus {
    fn host_cpus(&self) -> HostCpus {
        let list = |text: &str| domain_xml::convert::parse_cpu_list(text).expect("CPU list");
        HostCpus {
            cpuset: list(&self.cpuset),
            cells: self
                .cells
                .iter()
                .map(|cell| HostCell {
                    id: cell.id,
                    cpus: cell
                        .cores
                        .iter()
                        .flat_map(|core| {
                            let siblings = list(core);
                            siblings.clone().into_iter().map(move |id| HostCpu {
                                id,
                                siblings: siblings.clone(),
                            })
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    context: Option<CaseContext>,
    vmi: serde_json::Value,
    expect_error: Option<String>,
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn cases() -> Vec<(String, Case)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("golden dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read case");
            let case: Case = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path.file_stem().expect("stem").to_string_lossy().into_owned();
            (name, case)
        })
        .collect()
}

fn vmi_of(name: &str, case: &Case) -> VirtualMachineInstance {
    let mut value = case.vmi.clone();
    value["apiVersion"] = "kubevirt.io/v1".into();
    value["kind"] = "VirtualMachineInstance".into();
    let text = serde_json::to_string(&value).expect("json");
    match Manifest::parse(&text, Path::new(name)).unwrap_or_else(|e| panic!("{e}")) {
        Manifest::Vmi(vmi) => *vmi,
        Manifest::Vm(_) => panic!("{name}: not a VMI"),
    }
}

fn context_of(vmi: &VirtualMachineInstance, case: &Case) -> ConvertContext {
    let given = case.context.as_ref();
    let defaults = ConvertContext::default();
    let mut formats = ConvertContext {
        container_disk_formats: given.map(|c| c.container_disk_formats.clone()).unwrap_or_default(),
        ..ConvertContext::default()
    };
    formats.assume_container_disk_format(vmi, "raw");
    let formats = formats.container_disk_formats;
    ConvertContext {
        domain_type: match given.and_then(|c| c.domain_type.as_deref()) {
            Some("qemu") => DomainType::Qemu,
            _ => DomainType::Kvm,
        },
        block_volumes: given.map(|c| c.block_volumes.clone()).unwrap_or_default(),
        container_disk_formats: formats,
        bochs_display_for_efi: given
            .and_then(|c| c.bochs_display_for_efi)
            .unwrap_or(defaults.bochs_display_for_efi),
        run_as_root: given.and_then(|c| c.run_as_root).unwrap_or(defaults.run_as_root),
        mem_balloon_stats_period: given
            .and_then(|c| c.mem_balloon_stats_period)
            .unwrap_or(defaults.mem_balloon_stats_period),
        free_page_reporting: given
            .and_then(|c| c.free_page_reporting)
            .unwrap_or(defaults.free_page_reporting),
        host_cpus: given.and_then(|c| c.host_cpus.as_ref()).map(CaseHostCpus::host_cpus),
        ..defaults
    }
}

#[test]
fn there_are_at_least_forty_golden_domains_and_fifteen_error_cases() {
    let all = cases();
    let errors = all.iter().filter(|(_, c)| c.expect_error.is_some()).count();
    assert!(all.len() - errors >= 40, "only {} golden domains", all.len() - errors);
    assert!(errors >= 15, "only {errors} error cases");
}

#[test]
fn every_case_renders_its_golden_domain_or_its_error() {
    let failures: Vec<String> = cases()
        .into_iter()
        .filter_map(|(name, case)| check_case(&name, &case).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Renders one case and compares it with its golden domain or its expected error.
fn check_case(name: &str, case: &Case) -> Result<(), String> {
    let update = std::env::var_os("KUBEVIRT_RS_UPDATE_GOLDEN").is_some();
    let vmi = vmi_of(name, case);
    let result = render(&vmi, &context_of(&vmi, case));
    let xml_path = golden_dir().join(format!("{name}.xml"));
    match (&case.expect_error, result) {
        (Some(expected), Err(err)) if &err.to_string() == expected => Ok(()),
        (Some(expected), Err(err)) => Err(format!("{name}: expected the error {expected:?}, got {err}")),
        (Some(expected), Ok(_)) => Err(format!("{name}: rendered, but expected the error {expected:?}")),
        (None, Err(err)) => Err(format!("{name}: {err}")),
        (None, Ok(domain)) => {
            let xml = domain.to_xml().expect("write XML");
            assert_eq!(
                Domain::from_xml(&xml).expect("read our own XML"),
                domain,
                "{name}: model round trip"
            );
            if update {
                std::fs::write(&xml_path, &xml).expect("write golden");
            }
            let golden = std::fs::read_to_string(&xml_path).map_err(|_| {
                format!(
                    "{name}: no golden {} (set KUBEVIRT_RS_UPDATE_GOLDEN=1)",
                    xml_path.display()
                )
            })?;
            let expected = Domain::from_xml(&golden).map_err(|e| format!("{name}: golden XML: {e}"))?;
            if domain == expected {
                Ok(())
            } else {
                Err(format!(
                    "{name}: rendered domain differs from the golden:\n{}",
                    pretty_assertions::Comparison::new(&domain, &expected)
                ))
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs virt-xml-validate: make test runs it (feature host-tests)"
)]
fn every_golden_domain_passes_virt_xml_validate() {
    let mut checked = 0;
    let cases = cases();
    for (name, case) in &cases {
        let xml = golden_dir().join(format!("{name}.xml"));
        assert_eq!(
            case.expect_error.is_none(),
            xml.exists(),
            "{name}: golden XML exists only for rendering cases"
        );
        if !xml.exists() {
            continue;
        }
        let output = Command::new("virt-xml-validate")
            .arg(&xml)
            .arg("domain")
            .output()
            .expect("virt-xml-validate (libvirt-clients and libxml2-utils; run `make deps`)");
        assert!(
            output.status.success(),
            "{name}: virt-xml-validate failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        checked += 1;
    }
    assert!(checked >= 40, "validated only {checked} domains");
    let stale: Vec<_> = std::fs::read_dir(golden_dir())
        .expect("golden dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .filter(|p| !p.with_extension("yaml").exists())
        .collect();
    assert!(stale.is_empty(), "golden XML without a case: {stale:?}");
}
