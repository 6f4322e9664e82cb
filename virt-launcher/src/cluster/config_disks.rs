//! ISOs of the config volumes a launcher pod has mounted (upstream's `pkg/config`): ConfigMaps,
//! Secrets, downward API files and the service account token for the disks that use them, and
//! every sysprep volume's answer file, each at upstream's path with upstream's label.

use std::path::{Path, PathBuf};

use kubevirt_api::v1::{VirtualMachineInstance, VolumeSource};

use crate::domain::PathLayout;
use crate::volumes::{PrepareError, Step, volume_error};

/// Where the kubelet mounts a pod's service account token.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The label of a config ISO without a `volumeLabel`.
const DEFAULT_LABEL: &str = "cfgdata";

fn label(volume_label: Option<&String>) -> String {
    volume_label
        .filter(|l| !l.is_empty())
        .cloned()
        .unwrap_or_else(|| DEFAULT_LABEL.to_owned())
}

/// Whether the sysprep directory holds an answer file (any case).
fn check_sysprep(dir: &Path, field: &str) -> Result<(), PrepareError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        volume_error(
            field,
            format!("Error validating that autounattend.xml or unattend.xml have been provided: {e}"),
        )
    })?;
    let has_answers = entries.filter_map(Result::ok).any(|e| {
        let name = e.file_name().to_string_lossy().to_lowercase();
        name == "autounattend.xml" || name == "unattend.xml"
    });
    if has_answers {
        Ok(())
    } else {
        Err(volume_error(
            field,
            "Sysprep drive should contain autounattend.xml or unattend.xml but neither were found.",
        ))
    }
}

/// The ISO step of config volume `spec.volumes[index]`, if it needs one.
pub fn config_disk_step(
    vmi: &VirtualMachineInstance,
    layout: &PathLayout,
    index: usize,
    source: &VolumeSource<'_>,
) -> Result<Option<Step>, PrepareError> {
    let name = vmi.spec.volumes[index].name.as_str();
    let field = format!("spec.volumes[{index}]");
    let has_disk = vmi.spec.domain.devices.disks.iter().any(|d| d.name == name);
    let private = Path::new(&layout.private_dir);
    let step = |dir: PathBuf, iso: String, label: String| Step::IsoOfDir {
        field: field.clone(),
        iso: PathBuf::from(iso),
        label,
        dir,
    };
    Ok(match source {
        VolumeSource::ConfigMap(c) if has_disk => Some(step(
            private.join("config-map").join(name),
            layout.private_iso("config-map-disks", name),
            label(c.volume_label.as_ref()),
        )),
        VolumeSource::Secret(s) if has_disk => Some(step(
            private.join("secret").join(name),
            layout.private_iso("secret-disks", name),
            label(s.volume_label.as_ref()),
        )),
        VolumeSource::DownwardApi(d) if has_disk => Some(step(
            private.join("downwardapi").join(name),
            layout.private_iso("downwardapi-disks", name),
            label(d.volume_label.as_ref()),
        )),
        VolumeSource::ServiceAccount(_) if has_disk => Some(step(
            PathBuf::from(SERVICE_ACCOUNT_DIR),
            layout.private_iso("service-account-disk", "service-account"),
            DEFAULT_LABEL.to_owned(),
        )),
        VolumeSource::Sysprep(_) => {
            let dir = private.join("sysprep").join(name);
            check_sysprep(&dir, &format!("{field}.sysprep"))?;
            Some(step(
                dir,
                layout.private_iso("sysprep-disks", name),
                "unattendCD".to_owned(),
            ))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(spec: &serde_json::Value) -> VirtualMachineInstance {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm", "namespace": "default"}, "spec": spec
        }))
        .expect("vmi")
    }

    fn steps(vmi: &VirtualMachineInstance, layout: &PathLayout) -> Vec<Result<Option<Step>, PrepareError>> {
        vmi.spec
            .volumes
            .iter()
            .enumerate()
            .map(|(i, v)| config_disk_step(vmi, layout, i, &v.source().expect("source")))
            .collect()
    }

    #[test]
    fn config_volumes_with_disks_get_isos_at_upstreams_paths() {
        let layout = PathLayout {
            private_dir: "/p".to_owned(),
            ..PathLayout::default()
        };
        let vmi = vmi(&serde_json::json!({
            "domain": {"devices": {"disks": [{"name": "cm"}, {"name": "sec"}, {"name": "sa"}]}},
            "volumes": [
                {"name": "cm", "configMap": {"name": "app"}},
                {"name": "sec", "secret": {"secretName": "s", "volumeLabel": "OEMDRV"}},
                {"name": "sa", "serviceAccount": {"serviceAccountName": "builder"}},
                {"name": "nodisk", "downwardAPI": {}}
            ]
        }));
        let described: Vec<Option<(String, String, String)>> = steps(&vmi, &layout)
            .into_iter()
            .map(|s| match s.expect("planned") {
                Some(Step::IsoOfDir { iso, label, dir, .. }) => {
                    Some((iso.display().to_string(), label, dir.display().to_string()))
                }
                None => None,
                Some(other) => panic!("{other:?}"),
            })
            .collect();
        let some = |a: &str, b: &str, c: &str| Some((a.to_owned(), b.to_owned(), c.to_owned()));
        assert_eq!(
            described,
            [
                some("/p/config-map-disks/cm.iso", "cfgdata", "/p/config-map/cm"),
                some("/p/secret-disks/sec.iso", "OEMDRV", "/p/secret/sec"),
                some(
                    "/p/service-account-disk/service-account.iso",
                    "cfgdata",
                    "/var/run/secrets/kubernetes.io/serviceaccount"
                ),
                None,
            ]
        );
    }

    #[test]
    fn sysprep_needs_an_answer_file_in_any_case() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = PathLayout {
            private_dir: dir.path().display().to_string(),
            ..PathLayout::default()
        };
        let vmi = vmi(&serde_json::json!({
            "domain": {"devices": {}},
            "volumes": [{"name": "sysprep-volume", "sysprep": {"configMap": {"name": "test-config"}}}]
        }));
        let answers = dir.path().join("sysprep/sysprep-volume");
        std::fs::create_dir_all(&answers).expect("mkdir");
        std::fs::write(answers.join("wrongname.xml"), "<x/>").expect("write");
        let error = steps(&vmi, &layout).remove(0).expect_err("no answer file");
        assert!(
            error
                .to_string()
                .contains("Sysprep drive should contain autounattend.xml or unattend.xml but neither were found."),
            "{error}"
        );
        std::fs::write(answers.join("AutounattenD.xml"), "<x/>").expect("write");
        match steps(&vmi, &layout).remove(0).expect("planned") {
            Some(Step::IsoOfDir { iso, label, .. }) => {
                assert!(iso.ends_with("sysprep-disks/sysprep-volume.iso"));
                assert_eq!(label, "unattendCD");
            }
            other => panic!("{other:?}"),
        }
    }
}
