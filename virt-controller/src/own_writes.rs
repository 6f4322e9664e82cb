//! The virt-controller side of [`control_loop::own_writes`]: launcher pods, cached as views.

use std::collections::BTreeMap;

pub use control_loop::own_writes::replaces_cached;

use crate::vmi_lifecycle::PodView;

/// Whether a pod this controller wrote (`written`) replaces the one of the same name in `pods`,
/// the cached pods of its VMI.
#[must_use]
pub fn replaces_cached_pod(pods: Option<&BTreeMap<String, PodView>>, written: &PodView) -> bool {
    pods.and_then(|pods| pods.get(&written.name))
        .is_none_or(|cached| replaces_cached(written.resource_version.as_deref(), cached.resource_version.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::replaces_cached_pod;
    use crate::vmi_lifecycle::PodView;

    fn view(resource_version: &str) -> PodView {
        PodView {
            name: "p".to_owned(),
            resource_version: Some(resource_version.to_owned()),
            is_temporary: false,
            ..PodView::default()
        }
    }

    #[test]
    fn a_written_pod_replaces_only_an_older_or_missing_one() {
        let cached = std::collections::BTreeMap::from([("p".to_owned(), view("12"))]);
        assert!(!replaces_cached_pod(Some(&cached), &view("11")));
        assert!(replaces_cached_pod(Some(&cached), &view("13")));
        assert!(replaces_cached_pod(None, &view("11")), "no pod of the VMI cached");
        let other = std::collections::BTreeMap::from([("q".to_owned(), view("99"))]);
        assert!(
            replaces_cached_pod(Some(&other), &view("11")),
            "only the same pod counts"
        );
    }
}
