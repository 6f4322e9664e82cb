//! Version negotiation: both sides list the API versions they speak and use the highest common one,
//! as upstream's `GetHighestCompatibleVersion`.

/// `kubevirt.cmd` versions this build serves and speaks.
pub const SUPPORTED_CMD_VERSIONS: [u32; 1] = [1];
/// `kubevirt.notify` versions this build serves and speaks.
pub const SUPPORTED_NOTIFY_VERSIONS: [u32; 1] = [1];

/// The highest version in both lists, if any.
#[must_use]
pub fn highest_common(ours: &[u32], theirs: &[u32]) -> Option<u32> {
    ours.iter().copied().filter(|v| theirs.contains(v)).max()
}

#[cfg(test)]
mod tests {
    use super::highest_common;

    #[test]
    fn the_highest_version_both_speak_wins() {
        assert_eq!(highest_common(&[1, 2, 3], &[2, 3, 4]), Some(3));
        assert_eq!(highest_common(&[1], &[1]), Some(1));
        assert_eq!(highest_common(&[1], &[2]), None);
        assert_eq!(highest_common(&[1], &[]), None);
    }
}
