//! A filesystem-mode claim's image, `disk.img` in the claim's directory, as upstream's
//! virt-handler makes it when it is missing (`pkg/host-disk`):
//! - its size is the claim's request when that is smaller than its capacity, else its capacity
//!   (as the VMI's `status.volumeStatus[].persistentVolumeClaimInfo` describes the claim), rounded
//!   down to a whole MiB;
//! - the volume keeps 128 KiB in reserve; when the rest is smaller than that size but within 10 %
//!   of it, the image takes the rest (upstream's `ToleratedSmallPV` event says so), and when it is
//!   smaller still, nothing is made and the sync fails with upstream's "not enough space" message.
//!
//! A block-mode claim (a device, not a directory), a claim the status does not describe yet and a
//! volume shared with the guest as a filesystem (`spec.domain.devices.filesystems`) get nothing.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use kubevirt_api::v1::{PersistentVolumeClaimInfo, VirtualMachineInstance, Volume};

use super::{HostDiskError, Image, ImageSize, volume_dir_in_pod};

/// What the volume keeps free (upstream's default `minimumReservePVCBytes`).
pub const RESERVE_BYTES: u64 = 128 * 1024;
/// How much smaller than asked an image may be (upstream's default
/// `pvcTolerateLessSpaceUpToPercent`).
pub const TOLERATION_PERCENT: i64 = 10;
/// The image's name in the claim's directory.
pub const IMAGE_NAME: &str = "disk.img";
const MIB: i64 = 1024 * 1024;

/// The image of `spec.volumes[index]` and the size it is made with, when the volume is a
/// filesystem claim's.
pub(super) fn claim_image(
    root: &Path,
    vmi: &VirtualMachineInstance,
    index: usize,
    volume: &Volume,
) -> Result<Option<(Image, ImageSize)>, HostDiskError> {
    let field = if volume.persistent_volume_claim.is_some() {
        format!("spec.volumes[{index}].persistentVolumeClaim")
    } else if volume.data_volume.is_some() {
        format!("spec.volumes[{index}].dataVolume")
    } else {
        return Ok(None);
    };
    let shared_as_filesystem = vmi
        .spec
        .domain
        .devices
        .filesystems
        .iter()
        .any(|f| f.name == volume.name);
    let info = vmi
        .status
        .as_ref()
        .and_then(|s| s.volume_status.iter().find(|v| v.name == volume.name))
        .and_then(|v| v.persistent_volume_claim_info.as_ref());
    let Some(info) = info.filter(|i| i.volume_mode.as_deref() != Some("Block") && !shared_as_filesystem) else {
        return Ok(None);
    };
    let size = image_size(info).map_err(|message| HostDiskError::Space {
        field: field.clone(),
        message: format!("volume {}: {message}", volume.name),
    })?;
    let dir = PathBuf::from(volume_dir_in_pod(&volume.name));
    let image = Image {
        field,
        node: dir.join(IMAGE_NAME).display().to_string(),
        dir,
        name: IMAGE_NAME.into(),
        root: root.to_owned(),
    };
    Ok(Some((image, ImageSize::Claim(size))))
}

fn storage(
    list: Option<&std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Option<Result<i64, String>> {
    let quantity = list?.get("storage")?;
    Some(
        kubevirt_api::quantity::to_bytes(quantity)
            .map_err(|e| e.to_string())
            .and_then(|bytes| i64::try_from(bytes).map_err(|_| format!("{bytes} bytes is too large for a file"))),
    )
}

/// The claim's request when smaller than its capacity (or without one), else its capacity, down
/// to a whole MiB.
fn image_size(info: &PersistentVolumeClaimInfo) -> Result<i64, String> {
    let capacity = storage(info.capacity.as_ref()).transpose()?;
    let requested = storage(info.requests.as_ref()).transpose()?;
    let bytes = match (requested, capacity) {
        (Some(requested), Some(capacity)) if capacity > requested => requested,
        (Some(requested), None) => requested,
        (_, Some(capacity)) => capacity,
        (None, None) => {
            return Err(
                "unable to determine capacity of HostDisk from PVC that provides no storage capacity or requests"
                    .to_owned(),
            );
        }
    };
    let aligned = bytes / MIB * MIB;
    if aligned == 0 {
        return Err("the size is too low, must be at least 1MiB".to_owned());
    }
    Ok(aligned)
}

/// The bytes the volume of `dir` has for an image, less the reserve.
pub(super) fn available_bytes(dir: &OwnedFd) -> nix::Result<i64> {
    let stat = nix::sys::statvfs::fstatvfs(dir)?;
    let free = stat.blocks_available().saturating_mul(stat.fragment_size());
    Ok(i64::try_from(free.saturating_sub(RESERVE_BYTES)).unwrap_or(i64::MAX))
}

/// The size to make an image of `wanted` bytes on a volume with `available`, and the message
/// when it is made smaller; or upstream's message when it does not fit even so. `path` names
/// the image in the messages.
pub(super) fn fit(wanted: i64, available: i64, path: &str) -> Result<(i64, Option<String>), String> {
    if wanted <= available {
        return Ok((wanted, None));
    }
    let tolerated = i64::try_from(i128::from(wanted) * i128::from(100 - TOLERATION_PERCENT) / 100).unwrap_or(i64::MAX);
    if tolerated > available {
        return Err(format!(
            "unable to create {path}, not enough space, demanded size {wanted} B is bigger than available space \
             {available} B, also after taking {TOLERATION_PERCENT} % toleration into account"
        ));
    }
    Ok((
        available,
        Some(format!(
            "PV size too small: expected {wanted} B, found {available} B. Using it anyway, it is within \
             {TOLERATION_PERCENT} % toleration"
        )),
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    fn info(capacity: Option<&str>, requests: Option<&str>) -> PersistentVolumeClaimInfo {
        let list = |q: Option<&str>| q.map(|q| BTreeMap::from([("storage".to_owned(), Quantity(q.to_owned()))]));
        PersistentVolumeClaimInfo {
            capacity: list(capacity),
            requests: list(requests),
            ..PersistentVolumeClaimInfo::default()
        }
    }

    #[test]
    fn the_size_is_the_smaller_request_else_the_capacity_in_whole_mib() {
        let cases = [
            (Some("10Gi"), Some("5Gi"), Ok(5 * 1024 * MIB)),
            (Some("5Gi"), Some("10Gi"), Ok(5 * 1024 * MIB)),
            (Some("5Gi"), Some("5Gi"), Ok(5 * 1024 * MIB)),
            (None, Some("3Gi"), Ok(3 * 1024 * MIB)),
            (Some("2Gi"), None, Ok(2 * 1024 * MIB)),
            (None, Some("1500000000"), Ok(1430 * MIB)),
            (
                None,
                Some("1000k"),
                Err("the size is too low, must be at least 1MiB".to_owned()),
            ),
        ];
        for (capacity, requests, expected) in cases {
            assert_eq!(
                image_size(&info(capacity, requests)),
                expected,
                "{capacity:?} {requests:?}"
            );
        }
        let neither = image_size(&info(None, None)).expect_err("no size");
        assert!(
            neither.contains("provides no storage capacity or requests"),
            "{neither}"
        );
    }

    #[test]
    fn an_image_takes_what_is_there_within_ten_percent_and_no_less() {
        assert_eq!(fit(100 * MIB, 200 * MIB, "/d/disk.img"), Ok((100 * MIB, None)));
        assert_eq!(fit(100 * MIB, 100 * MIB, "/d/disk.img"), Ok((100 * MIB, None)));
        let (size, note) = fit(100 * MIB, 95 * MIB, "/d/disk.img").expect("within the toleration");
        assert_eq!(size, 95 * MIB);
        assert_eq!(
            note.as_deref(),
            Some(
                "PV size too small: expected 104857600 B, found 99614720 B. Using it anyway, it is within 10 % toleration"
            )
        );
        assert_eq!(fit(100 * MIB, 90 * MIB, "/d/disk.img").map(|(s, _)| s), Ok(90 * MIB));
        assert!(
            fit(i64::MAX, 1, "/d/disk.img").is_err(),
            "no overflow at the largest size"
        );
        let refused = fit(100 * MIB, 90 * MIB - 1, "/d/disk.img").expect_err("too small");
        assert_eq!(
            refused,
            "unable to create /d/disk.img, not enough space, demanded size 104857600 B is bigger than available \
             space 94371839 B, also after taking 10 % toleration into account"
        );
    }
}
