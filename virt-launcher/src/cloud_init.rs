//! Cloud-init data sources as upstream builds them. NoCloud (`cidata`): `meta-data` (JSON),
//! `user-data` and `network-config`. ConfigDrive (`config-2`): `openstack/latest/meta_data.json`,
//! `user_data` and `network_data.json`, with the tagged NICs' PCI addresses, so it is made once the
//! domain is defined. User and network data come inline, as base64 or from Secrets; the SSH keys
//! of access credentials propagated by noCloud or configDrive go into the metadata.

use std::path::{Path, PathBuf};

use kubevirt_api::instancetype::annotations as instancetype_annotations;
use kubevirt_api::v1::{AccessCredential, CloudInitSource, VirtualMachineInstance};

use crate::domain::PathLayout;
use crate::volume_step::{PrepareError, Step, volume_error};

pub mod metadata;

use metadata::NoCloudMetadata;
pub use metadata::{ConfigDriveMetadata, DeviceMetadata, TaggedInterface, tagged_devices};

/// Which data source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `cloudInitNoCloud`.
    NoCloud,
    /// `cloudInitConfigDrive`.
    ConfigDrive,
}

impl Flavor {
    fn key(self) -> &'static str {
        match self {
            Self::NoCloud => "cloudInitNoCloud",
            Self::ConfigDrive => "cloudInitConfigDrive",
        }
    }
}

/// Where Secrets are: mounted in a launcher pod, or nowhere (local mode).
#[derive(Clone, Copy, Debug)]
pub enum Secrets<'a> {
    /// The pod's mounts under this layout.
    Pod(&'a PathLayout),
    /// No cluster: a Secret reference is refused.
    None,
}

fn instance_type(vmi: &VirtualMachineInstance) -> Option<String> {
    let annotations = vmi.metadata.annotations.as_ref()?;
    annotations
        .get(instancetype_annotations::CLUSTER_INSTANCETYPE_NAME)
        .or_else(|| annotations.get(instancetype_annotations::INSTANCETYPE_NAME))
        .cloned()
}

fn firmware_uuid(vmi: &VirtualMachineInstance) -> Option<String> {
    vmi.spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.uuid.clone())
        .or_else(|| vmi.metadata.uid.clone())
}

/// Reads the first readable of `files` in `dir`.
fn read_first(dir: &Path, files: [&str; 2]) -> Option<String> {
    files.iter().find_map(|f| std::fs::read_to_string(dir.join(f)).ok())
}

/// User and network data: Secret files override inline text; raw text wins over base64.
fn resolve_data(
    field: &str,
    volume: &str,
    data: &CloudInitSource,
    secrets: Secrets<'_>,
) -> Result<(Vec<u8>, Vec<u8>), PrepareError> {
    let mut data = data.clone();
    let has_ref =
        |r: &Option<k8s_openapi::api::core::v1::LocalObjectReference>| r.as_ref().is_some_and(|r| !r.name.is_empty());
    if has_ref(&data.secret_ref) || has_ref(&data.network_data_secret_ref) {
        let Secrets::Pod(layout) = secrets else {
            return Err(volume_error(
                field,
                "secret references need a Kubernetes cluster; give userData or userDataBase64",
            ));
        };
        let dir = PathBuf::from(layout.secret_dir(volume));
        let user = read_first(&dir, ["userdata", "userData"]);
        let network = read_first(&dir, ["networkdata", "networkData"]);
        if user.is_none() && network.is_none() {
            return Err(volume_error(
                field,
                format!("no cloud-init data-source found at volume: {volume}"),
            ));
        }
        if user.is_some() {
            data.user_data = user;
        }
        if network.is_some() {
            data.network_data = network;
        }
    }
    let decode = |key: &str, text: &str| {
        crate::volume_step::decode_base64(text)
            .ok_or_else(|| volume_error(&format!("{field}.{key}"), "is not a valid base64 value"))
    };
    let pick = |raw: &Option<String>, b64: &Option<String>, key: &str| -> Result<Vec<u8>, PrepareError> {
        match (raw.as_deref().filter(|r| !r.is_empty()), b64.as_deref()) {
            (Some(text), _) => Ok(text.as_bytes().to_vec()),
            (None, Some(b64)) => decode(key, b64),
            (None, None) => Ok(Vec::new()),
        }
    };
    let user = pick(&data.user_data, &data.user_data_base64, "userDataBase64")?;
    let network = pick(&data.network_data, &data.network_data_base64, "networkDataBase64")?;
    if user.is_empty() && network.is_empty() {
        return Err(volume_error(
            field,
            "userDataBase64, userData, networkDataBase64 or networkData is required for a cloud-init data source",
        ));
    }
    Ok((user, network))
}

/// The SSH public keys of the access credentials propagated by `flavor`, numbered `"0"`, `"1"`...
/// across credentials: every file of each Secret is one key.
fn public_keys(
    credentials: &[AccessCredential],
    flavor: Flavor,
    secrets: Secrets<'_>,
) -> Result<std::collections::BTreeMap<String, String>, PrepareError> {
    let mut keys = std::collections::BTreeMap::new();
    for (index, credential) in credentials.iter().enumerate() {
        let field = format!("spec.accessCredentials[{index}]");
        let Some(ssh) = &credential.ssh_public_key else {
            continue;
        };
        let method = ssh.propagation_method.as_ref();
        let wanted = match flavor {
            Flavor::NoCloud => method.is_some_and(|m| m.no_cloud.is_some()),
            Flavor::ConfigDrive => method.is_some_and(|m| m.config_drive.is_some()),
        };
        let Some(secret) = credential.secret_name().filter(|_| wanted) else {
            continue;
        };
        let Secrets::Pod(layout) = secrets else {
            return Err(volume_error(&field, "access credentials need a Kubernetes cluster"));
        };
        let dir = PathBuf::from(layout.secret_dir(&format!("{secret}-access-cred")));
        for file in crate::mounted::files(&dir).map_err(crate::volume_step::io(&dir))? {
            let key = std::fs::read_to_string(&file).map_err(|e| {
                volume_error(
                    &field,
                    format!(
                        "Unable to read public keys found at volume: {}/{} error: {e}",
                        dir.display(),
                        file.file_name().unwrap_or_default().to_string_lossy()
                    ),
                )
            })?;
            if !key.is_empty() {
                keys.insert(keys.len().to_string(), key);
            }
        }
    }
    Ok(keys)
}

/// The step that makes the ISO of the cloud-init volume `spec.volumes[index]`.
pub fn iso_step(
    vmi: &VirtualMachineInstance,
    layout: &PathLayout,
    index: usize,
    flavor: Flavor,
    data: &CloudInitSource,
    secrets: Secrets<'_>,
) -> Result<Step, PrepareError> {
    let volume = &vmi.spec.volumes[index];
    let field = format!("spec.volumes[{index}].{}", flavor.key());
    let (user, network) = resolve_data(&field, &volume.name, data, secrets)?;
    let keys = public_keys(&vmi.spec.access_credentials, flavor, secrets)?;
    let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
    let name = vmi.metadata.name.as_deref().unwrap_or_default();
    let hostname = Some(kubevirt_api::guest::hostname(vmi)).filter(|h| !h.is_empty());
    match flavor {
        Flavor::NoCloud => {
            let meta = NoCloudMetadata {
                instance_type: instance_type(vmi),
                instance_id: firmware_uuid(vmi).unwrap_or_default(),
                local_hostname: hostname,
                public_keys: keys,
            };
            let mut files = vec![
                ("meta-data".to_owned(), serde_json::to_vec(&meta).unwrap_or_default()),
                ("user-data".to_owned(), user),
            ];
            if !network.is_empty() {
                files.push(("network-config".to_owned(), network));
            }
            Ok(Step::Iso {
                field,
                iso: PathBuf::from(layout.cloud_init_iso(namespace, name, "noCloud.iso")),
                label: "cidata",
                files,
            })
        }
        Flavor::ConfigDrive => {
            let meta = ConfigDriveMetadata {
                instance_type: instance_type(vmi),
                instance_id: format!("{name}.{namespace}"),
                hostname,
                uuid: firmware_uuid(vmi),
                devices: Vec::new(),
                public_keys: keys,
            };
            let mut files = vec![("openstack/latest/user_data".to_owned(), user)];
            if !network.is_empty() {
                files.push(("openstack/latest/network_data.json".to_owned(), network));
            }
            let tagged = vmi
                .spec
                .domain
                .devices
                .interfaces
                .iter()
                .filter_map(|i| {
                    i.tag.clone().filter(|t| !t.is_empty()).map(|tag| TaggedInterface {
                        name: i.name.clone(),
                        tag,
                    })
                })
                .collect();
            Ok(Step::ConfigDrive {
                field,
                iso: PathBuf::from(layout.cloud_init_iso(namespace, name, "configdrive.iso")),
                meta,
                files,
                tagged,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mounted::pod_layout_with_secrets;

    fn vmi(spec: &serde_json::Value) -> VirtualMachineInstance {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "fake", "namespace": "fake-namespace", "uid": "u-1",
                         "annotations": {"kubevirt.io/cluster-instancetype-name": "fake.fake-instancetype"}},
            "spec": spec
        }))
        .expect("vmi")
    }

    fn files_of(step: &Step) -> Vec<(String, String)> {
        let files = match step {
            Step::Iso { files, .. } | Step::ConfigDrive { files, .. } => files,
            other => panic!("{other:?}"),
        };
        files
            .iter()
            .map(|(n, c)| (n.clone(), String::from_utf8_lossy(c).into_owned()))
            .collect()
    }

    #[test]
    fn nocloud_metadata_is_upstreams_json_with_the_keys_of_access_credentials() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = pod_layout_with_secrets(
            dir.path(),
            &[
                ("test-volume/userdata", "secret-userdata"),
                ("test-volume/networkData", "secret-networkdata"),
                ("my-pkey-access-cred/somekey", "ssh-1234"),
                ("my-pkey-access-cred/someotherkey", "ssh-5678"),
                ("my-pkey-access-cred/..data/ignored", "ssh-0000"),
            ],
        );
        let vmi = vmi(&serde_json::json!({
            "domain": {"firmware": {"uuid": "fake.fake-namespace"}, "devices": {}},
            "volumes": [{"name": "test-volume", "cloudInitNoCloud": {
                "secretRef": {"name": "s1"}, "networkDataSecretRef": {"name": "s2"}, "userData": "inline"
            }}],
            "accessCredentials": [{"sshPublicKey": {
                "source": {"secret": {"secretName": "my-pkey"}}, "propagationMethod": {"noCloud": {}}
            }}]
        }));
        let data = vmi.spec.volumes[0].cloud_init_no_cloud.clone().expect("nocloud");
        let step = iso_step(&vmi, &layout, 0, Flavor::NoCloud, &data, Secrets::Pod(&layout)).expect("planned");
        assert_eq!(
            files_of(&step),
            [
                (
                    "meta-data".to_owned(),
                    r#"{"instance-type":"fake.fake-instancetype","instance-id":"fake.fake-namespace","local-hostname":"fake","public-keys":{"0":"ssh-1234","1":"ssh-5678"}}"#
                        .to_owned()
                ),
                ("user-data".to_owned(), "secret-userdata".to_owned()),
                ("network-config".to_owned(), "secret-networkdata".to_owned()),
            ]
        );
        assert!(
            matches!(&step, Step::Iso { label: "cidata", iso, .. } if iso.ends_with("fake-namespace/fake/noCloud.iso"))
        );
    }

    #[test]
    fn secret_references_must_find_their_files_and_need_a_cluster() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = pod_layout_with_secrets(dir.path(), &[]);
        let vmi = vmi(&serde_json::json!({
            "domain": {"devices": {}},
            "volumes": [{"name": "test-volume", "cloudInitConfigDrive": {"secretRef": {"name": "s1"}}}]
        }));
        let data = vmi.spec.volumes[0]
            .cloud_init_config_drive
            .clone()
            .expect("configdrive");
        let missing = iso_step(&vmi, &layout, 0, Flavor::ConfigDrive, &data, Secrets::Pod(&layout));
        assert!(
            missing
                .expect_err("no files")
                .to_string()
                .contains("no cloud-init data-source found at volume: test-volume")
        );
        let local = iso_step(&vmi, &layout, 0, Flavor::ConfigDrive, &data, Secrets::None);
        assert!(
            local
                .expect_err("local")
                .to_string()
                .contains("need a Kubernetes cluster")
        );
        let empty = CloudInitSource::default();
        let error = iso_step(&vmi, &layout, 0, Flavor::NoCloud, &empty, Secrets::None).expect_err("empty");
        assert!(error.to_string().contains(
            "userDataBase64, userData, networkDataBase64 or networkData is required for a cloud-init data source"
        ));
    }

    #[test]
    fn configdrive_metadata_lists_tagged_nics_by_their_defined_pci_address() {
        let vmi = vmi(&serde_json::json!({
            "domain": {"firmware": {"uuid": "fake.fake-namespace"}, "devices": {
                "interfaces": [{"name": "default", "tag": "testtag", "masquerade": {}}, {"name": "plain", "bridge": {}}]
            }},
            "volumes": [{"name": "cd", "cloudInitConfigDrive": {"userDataBase64": "I2Nsb3VkLWNvbmZpZwo="}}]
        }));
        let data = vmi.spec.volumes[0]
            .cloud_init_config_drive
            .clone()
            .expect("configdrive");
        let layout = PathLayout::default();
        let Step::ConfigDrive {
            mut meta,
            files,
            tagged,
            ..
        } = iso_step(&vmi, &layout, 0, Flavor::ConfigDrive, &data, Secrets::None).expect("planned")
        else {
            panic!("not a ConfigDrive step");
        };
        assert_eq!(
            files,
            [("openstack/latest/user_data".to_owned(), b"#cloud-config\n".to_vec())]
        );
        let defined = crate::domain::Domain::from_xml(
            r#"<domain type="kvm"><name>x</name><memory>1</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>
                 <interface type="ethernet"><mac address="02:00:00:84:e9:58"/><alias name="ua-default"/>
                   <address type="pci" domain="0x0000" bus="0x01" slot="0x00" function="0x0"/></interface>
                 <interface type="ethernet"><alias name="ua-plain"/>
                   <address type="pci" domain="0x0000" bus="0x02" slot="0x00" function="0x0"/></interface>
               </devices></domain>"#,
        )
        .expect("domain");
        meta.devices = tagged_devices(&defined, &tagged);
        assert_eq!(
            String::from_utf8(meta.to_json()).expect("utf-8"),
            r#"{"instance_type":"fake.fake-instancetype","instance_id":"fake.fake-namespace","hostname":"fake","uuid":"fake.fake-namespace","devices":[{"type":"nic","bus":"pci","address":"0000:01:00:0","mac":"02:00:00:84:e9:58","tags":["testtag"]}]}"#
        );
    }
}
