//! The pod volumes behind a VMI's config volumes (upstream's `rendervolumes.go`): ConfigMaps,
//! Secrets and downward API files mounted read-only under the launcher's private directory for
//! the disks that use them, sysprep answer files, cloud-init user and network data from Secrets,
//! the Secrets of access credentials, and the service account whose token the guest gets.

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, DownwardAPIVolumeSource, SecretVolumeSource, Volume, VolumeMount,
};
use kubevirt_api::v1::{CloudInitSource, VirtualMachineInstance, VolumeSource};

use super::RenderError;
use super::volumes::PRIVATE_DIR;

/// What config volumes add to the pod.
#[derive(Debug, Default, PartialEq)]
pub struct ConfigVolumes {
    /// Pod volumes.
    pub volumes: Vec<Volume>,
    /// The `compute` container's mounts.
    pub mounts: Vec<VolumeMount>,
    /// The service account of a serviceAccount volume, whose token the kubelet mounts.
    pub service_account: Option<String>,
}

fn read_only(name: &str, path: String) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path,
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

fn secret(name: &str, secret_name: &str, optional: Option<bool>) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret_name.to_owned()),
            optional,
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn config_map(name: &str, config_map_name: &str, optional: Option<bool>) -> Volume {
    Volume {
        name: name.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name.to_owned(),
            optional,
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// Whether the VMI's disks (or, for Secrets, its ACPI tables) use volume `name`.
fn is_used(vmi: &VirtualMachineInstance, name: &str) -> bool {
    let acpi = vmi.spec.domain.firmware.as_ref().and_then(|f| f.acpi.as_ref());
    vmi.spec.domain.devices.disks.iter().any(|d| d.name == name)
        || acpi.is_some_and(|a| a.slic_name_ref.as_deref() == Some(name) || a.msdm_name_ref.as_deref() == Some(name))
}

/// The Secrets holding cloud-init user and network data, each mounted under both key spellings
/// the launcher accepts.
fn cloud_init_secrets(volume: &str, data: &CloudInitSource, out: &mut ConfigVolumes) {
    for (secret_ref, suffix, keys) in [
        (&data.secret_ref, "udata", ["userdata", "userData"]),
        (&data.network_data_secret_ref, "ndata", ["networkdata", "networkData"]),
    ] {
        let Some(name) = secret_ref.as_ref().map(|r| r.name.as_str()).filter(|n| !n.is_empty()) else {
            continue;
        };
        let pod_volume = format!("{volume}-{suffix}");
        out.volumes.push(secret(&pod_volume, name, None));
        for key in keys {
            out.mounts.push(VolumeMount {
                sub_path: Some(key.to_owned()),
                ..read_only(&pod_volume, format!("{PRIVATE_DIR}/secret/{volume}/{key}"))
            });
        }
    }
}

/// The pod volumes and mounts of `vmi`'s config volumes and access credentials.
pub fn config_volumes(vmi: &VirtualMachineInstance) -> Result<ConfigVolumes, RenderError> {
    let mut out = ConfigVolumes::default();
    for (index, volume) in vmi.spec.volumes.iter().enumerate() {
        let name = volume.name.as_str();
        let field = format!("spec.volumes[{index}]");
        let Ok(source) = volume.source() else { continue };
        let mount_in = |dir: &str| read_only(name, format!("{PRIVATE_DIR}/{dir}/{name}"));
        match source {
            VolumeSource::ConfigMap(source) => {
                out.volumes.push(config_map(
                    name,
                    source.name.as_deref().unwrap_or_default(),
                    source.optional,
                ));
                if is_used(vmi, name) {
                    out.mounts.push(mount_in("config-map"));
                }
            }
            VolumeSource::Secret(source) => {
                out.volumes.push(secret(
                    name,
                    source.secret_name.as_deref().unwrap_or_default(),
                    source.optional,
                ));
                if is_used(vmi, name) {
                    out.mounts.push(mount_in("secret"));
                }
            }
            VolumeSource::DownwardApi(source) => {
                out.volumes.push(Volume {
                    name: name.to_owned(),
                    downward_api: Some(DownwardAPIVolumeSource {
                        items: Some(source.fields.clone()),
                        ..DownwardAPIVolumeSource::default()
                    }),
                    ..Volume::default()
                });
                if is_used(vmi, name) {
                    out.mounts.push(mount_in("downwardapi"));
                }
            }
            VolumeSource::Sysprep(sysprep) => {
                let pod_volume = match (&sysprep.secret, &sysprep.config_map) {
                    (Some(s), _) => secret(name, &s.name, None),
                    (None, Some(c)) => config_map(name, &c.name, None),
                    (None, None) => {
                        return Err(RenderError::Volume {
                            field: format!("{field}.sysprep"),
                            message: "Sysprep must have Secret or ConfigMap reference set".to_owned(),
                        });
                    }
                };
                out.volumes.push(pod_volume);
                out.mounts.push(mount_in("sysprep"));
            }
            VolumeSource::ServiceAccount(account) if out.service_account.is_none() => {
                out.service_account = account.service_account_name.clone().filter(|n| !n.is_empty());
            }
            VolumeSource::CloudInitNoCloud(data) | VolumeSource::CloudInitConfigDrive(data) => {
                cloud_init_secrets(name, data, &mut out);
            }
            _ => {}
        }
    }
    for credential in &vmi.spec.access_credentials {
        let Some(secret_name) = credential.secret_name() else {
            continue;
        };
        let pod_volume = format!("{secret_name}-access-cred");
        // Two credentials from one Secret share its mount (upstream would repeat the volume and
        // the pod would be refused).
        if out.volumes.iter().any(|v| v.name == pod_volume) {
            continue;
        }
        out.volumes.push(secret(&pod_volume, secret_name, None));
        out.mounts
            .push(read_only(&pod_volume, format!("{PRIVATE_DIR}/secret/{pod_volume}")));
    }
    Ok(out)
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

    fn mounts(out: &ConfigVolumes) -> Vec<(String, String, Option<String>)> {
        out.mounts
            .iter()
            .map(|m| (m.name.clone(), m.mount_path.clone(), m.sub_path.clone()))
            .collect()
    }

    #[test]
    fn cloud_init_secrets_are_mounted_under_both_key_spellings() {
        let out = config_volumes(&vmi(&serde_json::json!({
            "domain": {"devices": {"disks": [{"name": "pepitos-drive"}]}},
            "volumes": [{"name": "pepitos-drive", "cloudInitConfigDrive": {
                "secretRef": {"name": "break-dancing-flamingo"},
                "networkDataSecretRef": {"name": "hoooonk.hooooonk"}
            }}]
        })))
        .expect("rendered");
        let volumes: Vec<(String, Option<String>)> = out
            .volumes
            .iter()
            .map(|v| (v.name.clone(), v.secret.as_ref().and_then(|s| s.secret_name.clone())))
            .collect();
        assert_eq!(
            volumes,
            [
                (
                    "pepitos-drive-udata".to_owned(),
                    Some("break-dancing-flamingo".to_owned())
                ),
                ("pepitos-drive-ndata".to_owned(), Some("hoooonk.hooooonk".to_owned())),
            ]
        );
        let base = "/var/run/kubevirt-private/secret/pepitos-drive";
        let expect = |volume: &str, key: &str| (volume.to_owned(), format!("{base}/{key}"), Some(key.to_owned()));
        assert_eq!(
            mounts(&out),
            [
                expect("pepitos-drive-udata", "userdata"),
                expect("pepitos-drive-udata", "userData"),
                expect("pepitos-drive-ndata", "networkdata"),
                expect("pepitos-drive-ndata", "networkData"),
            ]
        );
        assert!(out.mounts.iter().all(|m| m.read_only == Some(true)));
    }

    #[test]
    fn config_volumes_are_mounted_only_for_the_disks_that_use_them() {
        let out = config_volumes(&vmi(&serde_json::json!({
            "domain": {"devices": {"disks": [{"name": "downward-then-upward"}, {"name": "cm"}]}},
            "volumes": [
                {"name": "downward-then-upward", "downwardAPI": {}},
                {"name": "cm", "configMap": {"name": "app-config", "optional": true}},
                {"name": "unused", "secret": {"secretName": "s"}},
                {"name": "sa", "serviceAccount": {"serviceAccountName": "builder"}}
            ]
        })))
        .expect("rendered");
        assert_eq!(
            out.volumes.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
            ["downward-then-upward", "cm", "unused"]
        );
        assert_eq!(
            out.volumes[0].downward_api.as_ref().and_then(|d| d.items.clone()),
            Some(vec![])
        );
        let cm = out.volumes[1].config_map.as_ref().expect("configMap");
        assert_eq!((cm.name.as_str(), cm.optional), ("app-config", Some(true)));
        assert_eq!(
            mounts(&out),
            [
                (
                    "downward-then-upward".to_owned(),
                    "/var/run/kubevirt-private/downwardapi/downward-then-upward".to_owned(),
                    None
                ),
                (
                    "cm".to_owned(),
                    "/var/run/kubevirt-private/config-map/cm".to_owned(),
                    None
                ),
            ]
        );
        assert_eq!(out.service_account.as_deref(), Some("builder"));
    }

    #[test]
    fn sysprep_and_access_credential_secrets_are_mounted_whole() {
        let out = config_volumes(&vmi(&serde_json::json!({
            "domain": {"devices": {}},
            "volumes": [{"name": "unattend", "sysprep": {"configMap": {"name": "answers"}}}],
            "accessCredentials": [
                {"sshPublicKey": {"source": {"secret": {"secretName": "keys"}}, "propagationMethod": {"noCloud": {}}}},
                {"userPassword": {"source": {"secret": {"secretName": "keys"}}, "propagationMethod": {"qemuGuestAgent": {}}}}
            ]
        })))
        .expect("rendered");
        assert_eq!(
            out.volumes.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
            ["unattend", "keys-access-cred"],
            "one mount for a Secret two credentials share"
        );
        assert_eq!(
            mounts(&out),
            [
                (
                    "unattend".to_owned(),
                    "/var/run/kubevirt-private/sysprep/unattend".to_owned(),
                    None
                ),
                (
                    "keys-access-cred".to_owned(),
                    "/var/run/kubevirt-private/secret/keys-access-cred".to_owned(),
                    None
                ),
            ]
        );
        let empty = config_volumes(&vmi(&serde_json::json!({
            "domain": {"devices": {}},
            "volumes": [{"name": "unattend", "sysprep": {}}]
        })));
        assert!(matches!(empty, Err(RenderError::Volume { field, .. }) if field == "spec.volumes[0].sysprep"));
    }
}
