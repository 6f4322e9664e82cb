//! The launcher pod's containers: `compute` (virt-launcher with upstream's flags), one sidecar per
//! containerDisk (and the kernel-boot image) that serves its image, and the init containers that
//! share the containerDisk binary and pull the images early.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, LocalObjectReference, ObjectFieldSelector, ResourceRequirements, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubevirt_api::v1::VirtualMachineInstance;

use super::PodConfig;
use super::volumes::{BIN_SHARE_DIR, CONTAINER_DISK_DIR, EPHEMERAL_DISK_DIR, SHARE_DIR};
use crate::overhead::wants_guaranteed_qos;

/// Upstream's spread of `--qemu-timeout` across launchers, in seconds.
pub const QEMU_TIMEOUT_JITTER: u64 = 120;
/// Extra seconds the launcher waits beyond the VMI's grace period before killing the guest.
pub const LAUNCHER_GRACE_EXTRA: i64 = 15;

/// A stable jitter from the VMI's UID (upstream draws it at random; a hash keeps renders equal).
fn jitter(uid: &str) -> u64 {
    // FNV-1a.
    let hash = uid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    hash % QEMU_TIMEOUT_JITTER
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

/// The disk containers' resources; in a pod that must be Guaranteed, requests equal limits.
fn small_resources(vmi: &VirtualMachineInstance) -> ResourceRequirements {
    let quantities = |cpu: &str, memory: &str| {
        [
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ]
        .into_iter()
        .collect()
    };
    if wants_guaranteed_qos(vmi) {
        return ResourceRequirements {
            requests: Some(quantities("10m", "40M")),
            limits: Some(quantities("10m", "40M")),
            ..ResourceRequirements::default()
        };
    }
    ResourceRequirements {
        requests: Some(quantities("10m", "1M")),
        limits: Some(quantities("100m", "40M")),
        ..ResourceRequirements::default()
    }
}

/// The `compute` container.
#[must_use]
pub fn compute(
    vmi: &VirtualMachineInstance,
    config: &PodConfig,
    resources: ResourceRequirements,
    mounts: Vec<VolumeMount>,
    devices: Vec<k8s_openapi::api::core::v1::VolumeDevice>,
) -> Container {
    let uid = vmi.metadata.uid.clone().unwrap_or_default();
    let mut args: Vec<String> = vec![
        "--qemu-timeout".to_owned(),
        format!("{}s", config.qemu_timeout_seconds + jitter(&uid)),
        "--name".to_owned(),
        vmi.metadata.name.clone().unwrap_or_default(),
        "--uid".to_owned(),
        uid,
        "--namespace".to_owned(),
        vmi.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned()),
        "--kubevirt-share-dir".to_owned(),
        SHARE_DIR.to_owned(),
        "--ephemeral-disk-dir".to_owned(),
        EPHEMERAL_DISK_DIR.to_owned(),
        "--container-disk-dir".to_owned(),
        CONTAINER_DISK_DIR.to_owned(),
        "--grace-period-seconds".to_owned(),
        (vmi.termination_grace_period_seconds() + LAUNCHER_GRACE_EXTRA).to_string(),
        "--hook-sidecars".to_owned(),
        "0".to_owned(),
        "--ovmf-path".to_owned(),
        "/usr/share/OVMF".to_owned(),
        "--disk-memory-limit".to_owned(),
        config.disk_memory_limit.to_string(),
        // The pod is the launcher's sandbox: libvirt's directories are used in place.
        "--container-libvirt".to_owned(),
    ];
    if let Some(flag) = config.emulation.launcher_flag() {
        args.push(flag.to_owned());
    }
    Container {
        name: "compute".to_owned(),
        image: Some(config.launcher_image.clone()),
        image_pull_policy: Some(config.image_pull_policy.clone()),
        command: Some(vec!["/usr/bin/virt-launcher".to_owned()]),
        args: Some(args),
        env: Some(vec![
            EnvVar {
                name: "POD_NAME".to_owned(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.name".to_owned(),
                        ..ObjectFieldSelector::default()
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
            env("KUBEVIRT_LAUNCHER_IMAGE", &config.launcher_image),
        ]),
        resources: Some(resources),
        security_context: Some(super::security::compute_security_context(vmi)),
        volume_mounts: Some(mounts),
        volume_devices: Some(devices).filter(|d| !d.is_empty()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    }
}

/// An image a sidecar serves: the containerDisk volumes in order, then the kernel-boot image.
struct ServedImage {
    name: String,
    /// The file the launcher reads: `disk_<index in spec.volumes>` or `kernel-boot`.
    file: String,
    image: String,
    pull_policy: Option<String>,
    pull_secret: Option<String>,
}

/// The pod's `imagePullSecrets`: each containerDisk's and the kernel-boot image's secret, once,
/// in the order of the images.
#[must_use]
pub fn image_pull_secrets(vmi: &VirtualMachineInstance) -> Vec<LocalObjectReference> {
    let mut secrets: Vec<LocalObjectReference> = Vec::new();
    for secret in served_images(vmi).into_iter().filter_map(|i| i.pull_secret) {
        if !secret.is_empty() && !secrets.iter().any(|s| s.name == secret) {
            secrets.push(LocalObjectReference { name: secret });
        }
    }
    secrets
}

fn served_images(vmi: &VirtualMachineInstance) -> Vec<ServedImage> {
    let mut images: Vec<ServedImage> = vmi
        .spec
        .volumes
        .iter()
        .enumerate()
        .filter_map(|(index, v)| {
            let disk = v.container_disk.as_ref()?;
            Some(ServedImage {
                name: format!("volume{}", v.name),
                file: format!("disk_{index}"),
                image: disk.image.clone(),
                pull_policy: disk.image_pull_policy.clone(),
                pull_secret: disk.image_pull_secret.clone(),
            })
        })
        .collect();
    if let Some(container) = vmi.kernel_boot_container() {
        images.push(ServedImage {
            name: "kernel-boot".to_owned(),
            file: "kernel-boot".to_owned(),
            image: container.image.clone(),
            pull_policy: container.image_pull_policy.clone(),
            pull_secret: container.image_pull_secret.clone(),
        });
    }
    images
}

/// The sidecars serving each containerDisk image to the launcher, as `disk_<n>`.
#[must_use]
pub fn disk_sidecars(vmi: &VirtualMachineInstance, config: &PodConfig) -> Vec<Container> {
    let uid = vmi.metadata.uid.clone().unwrap_or_default();
    let data_dir = format!("{EPHEMERAL_DISK_DIR}/container-disk-data/{uid}");
    served_images(vmi)
        .into_iter()
        .map(|served| {
            let copy_path = format!("{data_dir}/{}", served.file);
            Container {
                name: served.name,
                image: Some(served.image),
                image_pull_policy: Some(served.pull_policy.unwrap_or_else(|| config.image_pull_policy.clone())),
                command: Some(vec!["/usr/bin/container-disk".to_owned()]),
                args: Some(vec!["--copy-path".to_owned(), copy_path]),
                resources: Some(small_resources(vmi)),
                volume_mounts: Some(vec![
                    mount("container-disks", &data_dir),
                    mount("virt-bin-share-dir", "/usr/bin"),
                ]),
                termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
                security_context: super::security::helper_security_context(vmi),
                ..Container::default()
            }
        })
        .collect()
}

/// The init containers: one copies the containerDisk binary into the shared directory, then one
/// per served image pulls it before the VM starts.
#[must_use]
pub fn init_containers(vmi: &VirtualMachineInstance, config: &PodConfig) -> Vec<Container> {
    let images = served_images(vmi);
    if images.is_empty() {
        return Vec::new();
    }
    let mut containers = vec![Container {
        name: "container-disk-binary".to_owned(),
        image: Some(config.launcher_image.clone()),
        image_pull_policy: Some(config.image_pull_policy.clone()),
        command: Some(vec![
            "/usr/bin/cp".to_owned(),
            "--preserve=all".to_owned(),
            "/usr/bin/container-disk".to_owned(),
            format!("{BIN_SHARE_DIR}/container-disk"),
        ]),
        resources: Some(small_resources(vmi)),
        volume_mounts: Some(vec![mount("virt-bin-share-dir", BIN_SHARE_DIR)]),
        security_context: super::security::helper_security_context(vmi),
        ..Container::default()
    }];
    containers.extend(images.into_iter().map(|served| Container {
        name: format!("{}-init", served.name),
        image: Some(served.image),
        image_pull_policy: Some(served.pull_policy.unwrap_or_else(|| config.image_pull_policy.clone())),
        command: Some(vec!["/usr/bin/container-disk".to_owned()]),
        args: Some(vec!["--no-op".to_owned()]),
        resources: Some(small_resources(vmi)),
        volume_mounts: Some(vec![mount("virt-bin-share-dir", "/usr/bin")]),
        security_context: super::security::helper_security_context(vmi),
        ..Container::default()
    }));
    containers
}
