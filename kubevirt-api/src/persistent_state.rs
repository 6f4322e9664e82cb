//! VM state storage ("backend storage"): a small claim per VM that keeps what must outlive one
//! VMI, a persistent TPM's state and persistent EFI variables.
//!
//! virt-controller makes the claim (`persistent-state-for-<vmi>-<suffix>`, labelled
//! `persistent-state-for=<vmi>`, 10Mi, `Filesystem`) before the launcher pod, owned by the VM so
//! that it lives as long as the VM, and the pod mounts its subdirectories where libvirt keeps those
//! files. The paths and names are upstream's.

use crate::v1::VirtualMachineInstanceSpec;

/// The label (and name prefix) of a VMI's state claim; the label's value is the VMI's name.
pub const CLAIM_LABEL: &str = "persistent-state-for";
/// The label of a migration target's state claim until the migration hands it over; the value is
/// the migration's name.
pub const MIGRATION_NAME_LABEL: &str = "kubevirt.io/migrationName";
/// The claim's size.
pub const CLAIM_SIZE: &str = "10Mi";
/// The claim's entry in `status.volumeStatus`.
pub const STATUS_VOLUME_NAME: &str = "persistent-state-for-this-vm";
/// The launcher pod's volume of the claim.
pub const POD_VOLUME_NAME: &str = "vm-state";
/// The label that asks CDI's claim rendering webhook to apply the class's storage profile.
pub const APPLY_STORAGE_PROFILE_LABEL: &str = "cdi.kubevirt.io/applyStorageProfile";
/// A StorageClass annotation: the default class for VM state (before the cluster's default).
pub const DEFAULT_VIRT_CLASS_ANNOTATION: &str = "storageclass.kubevirt.io/is-default-virt-class";
/// A StorageClass annotation: the cluster's default class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The name an older release gave the claim (found when no claim carries the label).
#[must_use]
pub fn legacy_claim_name(vmi_name: &str) -> String {
    format!("{CLAIM_LABEL}-{vmi_name}")
}

/// The prefix of a new claim's `generateName`.
#[must_use]
pub fn claim_generate_name(vmi_name: &str) -> String {
    format!("{CLAIM_LABEL}-{vmi_name}-")
}

/// Whether the spec has a TPM that keeps its state.
#[must_use]
pub fn has_persistent_tpm(spec: &VirtualMachineInstanceSpec) -> bool {
    // A disabled TPM is no device at all, whatever its other fields say.
    spec.domain
        .devices
        .tpm
        .as_ref()
        .is_some_and(|t| t.enabled != Some(false) && t.persistent == Some(true))
}

/// Whether the spec's EFI firmware keeps its variables.
#[must_use]
pub fn has_persistent_efi(spec: &VirtualMachineInstanceSpec) -> bool {
    spec.domain
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref())
        .and_then(|b| b.efi.as_ref())
        .is_some_and(|e| e.persistent == Some(true))
}

/// Whether a VMI of this spec needs VM state storage.
#[must_use]
pub fn needed(spec: &VirtualMachineInstanceSpec) -> bool {
    has_persistent_tpm(spec) || has_persistent_efi(spec)
}

/// Where the launcher's private directory is (`XDG_CONFIG_HOME` of a non-root launcher).
const PRIVATE_DIR: &str = "/var/run/kubevirt-private";

/// Where one kind of state lives in the launcher pod, and the claim's subdirectory for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateMount {
    /// The mount path in the compute container.
    pub path: String,
    /// The claim's subdirectory.
    pub sub_path: &'static str,
}

/// The mounts of the state claim in the compute container of a VMI whose spec is `spec`, for a
/// root or non-root launcher: the migration marker's directory always, the TPM's state and its
/// local CA for a persistent TPM, the NVRAM directory for persistent EFI. (libvirt keeps a
/// session daemon's TPM state and NVRAM under `$XDG_CONFIG_HOME/libvirt/qemu`, a system daemon's
/// under `/var/lib`.)
#[must_use]
pub fn mounts(spec: &VirtualMachineInstanceSpec, non_root: bool) -> Vec<StateMount> {
    let mut mounts = vec![StateMount {
        path: "/run/kubevirt-private/backend-storage-meta".to_owned(),
        sub_path: "meta",
    }];
    let at = |root: &str, non_root_path: &str| {
        if non_root {
            format!("{PRIVATE_DIR}/{non_root_path}")
        } else {
            root.to_owned()
        }
    };
    if has_persistent_tpm(spec) {
        mounts.push(StateMount {
            path: at("/var/lib/libvirt/swtpm", "libvirt/qemu/swtpm"),
            sub_path: "swtpm",
        });
        mounts.push(StateMount {
            path: at("/var/lib/swtpm-localca", "var/lib/swtpm-localca"),
            sub_path: "swtpm-localca",
        });
    }
    if has_persistent_efi(spec) {
        mounts.push(StateMount {
            path: at("/var/lib/libvirt/qemu/nvram", "libvirt/qemu/nvram"),
            sub_path: "nvram",
        });
    }
    mounts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> VirtualMachineInstanceSpec {
        serde_json::from_value(json).expect("spec")
    }

    #[test]
    fn a_persistent_tpm_or_efi_needs_state_storage_and_a_disabled_tpm_does_not() {
        let cases = [
            (serde_json::json!({"domain": {"devices": {}}}), false),
            (serde_json::json!({"domain": {"devices": {"tpm": {}}}}), false),
            (
                serde_json::json!({"domain": {"devices": {"tpm": {"persistent": true}}}}),
                true,
            ),
            (
                serde_json::json!({"domain": {"devices": {"tpm": {"enabled": false, "persistent": true}}}}),
                false,
            ),
            (
                serde_json::json!({"domain": {"devices": {}, "firmware": {"bootloader": {"efi": {"persistent": true}}}}}),
                true,
            ),
            (
                serde_json::json!({"domain": {"devices": {}, "firmware": {"bootloader": {"efi": {"persistent": false}}}}}),
                false,
            ),
        ];
        for (json, expected) in cases {
            assert_eq!(needed(&spec(json.clone())), expected, "{json}");
        }
    }

    #[test]
    fn the_mounts_follow_the_launchers_user_and_what_persists() {
        let both = spec(serde_json::json!({"domain": {"devices": {"tpm": {"persistent": true}},
            "firmware": {"bootloader": {"efi": {"persistent": true}}}}}));
        let paths = |non_root| {
            mounts(&both, non_root)
                .into_iter()
                .map(|m| format!("{}={}", m.sub_path, m.path))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            paths(true),
            [
                "meta=/run/kubevirt-private/backend-storage-meta",
                "swtpm=/var/run/kubevirt-private/libvirt/qemu/swtpm",
                "swtpm-localca=/var/run/kubevirt-private/var/lib/swtpm-localca",
                "nvram=/var/run/kubevirt-private/libvirt/qemu/nvram",
            ]
        );
        assert_eq!(
            paths(false),
            [
                "meta=/run/kubevirt-private/backend-storage-meta",
                "swtpm=/var/lib/libvirt/swtpm",
                "swtpm-localca=/var/lib/swtpm-localca",
                "nvram=/var/lib/libvirt/qemu/nvram",
            ]
        );
        let efi_only = spec(serde_json::json!({"domain": {"devices": {},
            "firmware": {"bootloader": {"efi": {"persistent": true}}}}}));
        assert_eq!(mounts(&efi_only, true).len(), 2);
    }
}
