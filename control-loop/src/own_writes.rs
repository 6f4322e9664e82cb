//! What a write of a controller returned goes into its caches, so its next pass does not act on
//! the state from before the write. By then the watch may have shown a newer state already (the
//! scheduler marks a new pod unschedulable within milliseconds of its creation, another
//! component writes a VMI's status), and a write's answer must never replace that: nothing would
//! bring the newer state back until the object changes again. Resource versions are compared as
//! integers, as client-go's `NewIntegerResourceVersionMutationCache` does, since the API server's
//! are etcd revisions.

/// Whether an object a write returned at resource version `written` replaces the cached one at
/// `cached`: it does unless both are numbers and the cached one is as new or newer. Nothing
/// cached is always replaced.
#[must_use]
pub fn replaces_cached(written: Option<&str>, cached: Option<&str>) -> bool {
    let number = |version: Option<&str>| version.and_then(|v| v.parse::<u64>().ok());
    match (number(written), number(cached)) {
        (Some(written), Some(cached)) => written > cached,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::replaces_cached;

    #[test]
    fn a_write_replaces_only_an_older_cached_version() {
        assert!(replaces_cached(Some("12"), Some("11")));
        assert!(!replaces_cached(Some("12"), Some("12")));
        assert!(
            !replaces_cached(Some("12"), Some("13")),
            "the watch showed a newer state"
        );
        assert!(replaces_cached(Some("12"), None), "nothing cached");
        assert!(
            !replaces_cached(Some("9"), Some("10")),
            "numbers, not strings, are compared"
        );
        // Versions that are not numbers cannot be ordered: the write's answer is kept.
        assert!(replaces_cached(Some("x"), Some("13")));
        assert!(replaces_cached(None, Some("13")));
    }
}
