//! Where things are inside a launcher: upstream's paths by default, so that a domain we render
//! reads like one upstream renders. Local mode moves the roots under its own runtime directory.

use std::path::Path;

/// Directories and sockets the domain refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathLayout {
    /// Per-pod private state (`/var/run/kubevirt-private`): serial and VNC sockets, volume mounts.
    pub private_dir: String,
    /// Ephemeral disks (`/var/run/kubevirt-ephemeral-disks`): overlays and cloud-init ISOs.
    pub ephemeral_disk_dir: String,
    /// Container disk images (`/var/run/kubevirt/container-disks`).
    pub container_disk_dir: String,
    /// Empty disks (`/var/run/libvirt/empty-disks`).
    pub empty_disk_dir: String,
    /// OVMF firmware (`/usr/share/OVMF`).
    pub ovmf_dir: String,
    /// NVRAM directory when running as root (`/var/lib/libvirt/qemu/nvram`).
    pub root_nvram_dir: String,
    /// The SCSI persistent-reservation helper socket.
    pub pr_helper_socket: String,
    /// hostDisk volumes are used at their own path (local mode) instead of the pod's mount.
    pub host_disks_in_place: bool,
}

impl Default for PathLayout {
    fn default() -> Self {
        Self {
            private_dir: "/var/run/kubevirt-private".to_owned(),
            ephemeral_disk_dir: "/var/run/kubevirt-ephemeral-disks".to_owned(),
            container_disk_dir: "/var/run/kubevirt/container-disks".to_owned(),
            empty_disk_dir: "/var/run/libvirt/empty-disks".to_owned(),
            ovmf_dir: "/usr/share/OVMF".to_owned(),
            root_nvram_dir: "/var/lib/libvirt/qemu/nvram".to_owned(),
            pr_helper_socket: "/var/run/kubevirt/daemons/pr/pr-helper.sock".to_owned(),
            host_disks_in_place: false,
        }
    }
}

impl PathLayout {
    /// `<private>/<uid>`: the VMI's sockets.
    #[must_use]
    pub fn vmi_private_dir(&self, uid: &str) -> String {
        format!("{}/{uid}", self.private_dir)
    }

    /// `<private>/<uid>/virt-serial0-log`: the serial console's log, which QEMU writes.
    #[must_use]
    pub fn serial_console_log(&self, uid: &str) -> String {
        format!("{}/virt-serial0-log", self.vmi_private_dir(uid))
    }

    /// `<private>/vmi-disks/<volume>`: where a PVC or hostDisk is mounted.
    #[must_use]
    pub fn vmi_disk_dir(&self, volume: &str) -> String {
        format!("{}/vmi-disks/{volume}", self.private_dir)
    }

    /// The image file of a filesystem-mode PVC or DataVolume.
    #[must_use]
    pub fn pvc_image(&self, volume: &str) -> String {
        format!("{}/disk.img", self.vmi_disk_dir(volume))
    }

    /// The qcow2 overlay over a containerDisk or ephemeral volume.
    #[must_use]
    pub fn overlay(&self, volume: &str) -> String {
        format!("{}/disk-data/{volume}/disk.qcow2", self.ephemeral_disk_dir)
    }

    /// A cloud-init ISO (`noCloud.iso` or `configdrive.iso`).
    #[must_use]
    pub fn cloud_init_iso(&self, namespace: &str, name: &str, file: &str) -> String {
        format!("{}/cloud-init-data/{namespace}/{name}/{file}", self.ephemeral_disk_dir)
    }

    /// A config ISO (`config-map-disks`, `secret-disks`, ...) under the private directory.
    #[must_use]
    pub fn private_iso(&self, dir: &str, volume: &str) -> String {
        format!("{}/{dir}/{volume}.iso", self.private_dir)
    }

    /// `<private>/secret/<volume>`: where the launcher pod mounts a Secret volume.
    #[must_use]
    pub fn secret_dir(&self, volume: &str) -> String {
        format!("{}/secret/{volume}", self.private_dir)
    }

    /// The image of the containerDisk at `spec.volumes[index]`.
    #[must_use]
    pub fn container_disk_image(&self, index: usize) -> String {
        format!("{}/disk_{index}.img", self.container_disk_dir)
    }

    /// An empty disk.
    #[must_use]
    pub fn empty_disk(&self, volume: &str) -> String {
        format!("{}/{volume}.qcow2", self.empty_disk_dir)
    }

    /// A kernel-boot artifact (kernel or initrd) taken from the kernel-boot image.
    #[must_use]
    pub fn kernel_boot_artifact(&self, path_in_image: &str) -> String {
        let base = Path::new(path_in_image)
            .file_name()
            .map_or_else(|| path_in_image.into(), |b| b.to_string_lossy());
        format!("{}/kernel-boot/{base}", self.container_disk_dir)
    }
}
