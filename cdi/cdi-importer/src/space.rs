//! How much of a volume a disk image may take, as upstream's importer reckons it: a filesystem
//! volume keeps a share for its filesystem (the overhead), a block volume keeps nothing. Pure.

use cdi_api::cdi_config::{BadOverhead, overhead_thousandths};

const MIB: u64 = 1 << 20;

/// The space a disk may take of `available` bytes with `overhead` kept for the filesystem:
/// `available / (1 + overhead)`, rounded up to a byte, then down to a MiB (upstream's
/// `GetUsableSpace`).
///
/// # Errors
/// [`BadOverhead`].
pub fn usable_space(available: u64, overhead: &str) -> Result<u64, BadOverhead> {
    let share = u128::from(overhead_thousandths(overhead)?);
    let usable = (u128::from(available) * 1000).div_ceil(1000 + share);
    let usable = u64::try_from(usable).unwrap_or(u64::MAX);
    Ok(usable / MIB * MIB)
}

/// The size the image is grown to: the size asked for, but no more than the volume's usable
/// space; an image already as large or larger is left as it is (`None`).
#[must_use]
pub fn resize_target(virtual_size: u64, requested: u64, usable: u64) -> Option<u64> {
    let target = requested.min(usable);
    (virtual_size < target).then_some(target)
}

/// Why an image does not fit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "virtual image size {virtual_size} is larger than the reported available storage {available}. A larger PVC is required"
)]
pub struct TooLarge {
    /// The image's size.
    pub virtual_size: u64,
    /// The volume's.
    pub available: u64,
}

/// Checks that an image of `virtual_size` fits in `available` bytes, with upstream's message.
///
/// # Errors
/// [`TooLarge`].
pub fn check_fits(virtual_size: u64, available: u64) -> Result<(), TooLarge> {
    if virtual_size > available {
        return Err(TooLarge {
            virtual_size,
            available,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usable_space_keeps_the_overhead_and_whole_mebibytes() {
        assert_eq!(usable_space(10 * MIB, "0").expect("share"), 10 * MIB);
        // 1024 MiB / 1.06 = 966.04 MiB: 966 MiB.
        assert_eq!(usable_space(1 << 30, "0.06").expect("share"), 966 * MIB);
        assert_eq!(usable_space(2 * MIB, "1").expect("share"), MIB);
        assert_eq!(usable_space(MIB - 1, "0").expect("share"), 0);
        for bad in ["", "1.5", "0.0555", "-0.1", "x", ".5"] {
            assert!(usable_space(MIB, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_image_grows_to_the_size_asked_within_the_usable_space_and_never_shrinks() {
        assert_eq!(resize_target(MIB, 10 * MIB, 8 * MIB), Some(8 * MIB));
        assert_eq!(resize_target(MIB, 4 * MIB, 8 * MIB), Some(4 * MIB));
        assert_eq!(resize_target(4 * MIB, 4 * MIB, 8 * MIB), None);
        assert_eq!(resize_target(9 * MIB, 10 * MIB, 8 * MIB), None);
    }

    #[test]
    fn a_larger_image_than_the_volume_is_refused_with_upstreams_message() {
        assert!(check_fits(MIB, MIB).is_ok());
        assert_eq!(
            check_fits(2 * MIB, MIB).expect_err("too large").to_string(),
            "virtual image size 2097152 is larger than the reported available storage 1048576. A larger PVC is required"
        );
    }
}
