//! The claims carrying each value of one label, per namespace: what the state-claim lookups ask
//! for on every reconcile of a VMI with persistent state, found without a scan of every claim the
//! watch holds.

use std::collections::{BTreeSet, HashMap};

/// `namespace/value` → the names of the claims labelled with it, and the reverse.
#[derive(Debug, Default)]
pub(super) struct LabelIndex {
    by_value: HashMap<String, BTreeSet<String>>,
    /// `namespace/name` → the `namespace/value` it is filed under.
    of_claim: HashMap<String, String>,
}

impl LabelIndex {
    /// Files the claim `key` (`namespace/name`) under `value`, or under nothing when it has none
    /// or is gone.
    pub(super) fn set(&mut self, key: &str, value: Option<&str>) {
        let Some((namespace, name)) = key.split_once('/') else {
            return;
        };
        if let Some(old) = self.of_claim.remove(key)
            && let Some(names) = self.by_value.get_mut(&old)
        {
            names.remove(name);
            if names.is_empty() {
                self.by_value.remove(&old);
            }
        }
        if let Some(value) = value {
            let filed = format!("{namespace}/{value}");
            self.by_value.entry(filed.clone()).or_default().insert(name.to_owned());
            self.of_claim.insert(key.to_owned(), filed);
        }
    }

    /// The names of the claims in `namespace` labelled `value`, in order.
    pub(super) fn names(&self, namespace: &str, value: &str) -> impl Iterator<Item = &str> {
        self.by_value
            .get(&format!("{namespace}/{value}"))
            .into_iter()
            .flatten()
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names<'a>(index: &'a LabelIndex, namespace: &str, value: &str) -> Vec<&'a str> {
        index.names(namespace, value).collect()
    }

    #[test]
    fn claims_are_found_by_namespace_and_value_in_name_order() {
        let mut index = LabelIndex::default();
        index.set("ns/b", Some("vm"));
        index.set("ns/a", Some("vm"));
        index.set("other/c", Some("vm"));
        index.set("ns/d", Some("another"));
        index.set("ns/e", None);
        assert_eq!(names(&index, "ns", "vm"), ["a", "b"]);
        assert_eq!(names(&index, "other", "vm"), ["c"]);
        assert_eq!(names(&index, "ns", "another"), ["d"]);
        assert!(names(&index, "ns", "nothing").is_empty());
    }

    #[test]
    fn a_claim_relabelled_or_gone_moves_or_leaves_and_empty_entries_go() {
        let mut index = LabelIndex::default();
        index.set("ns/a", Some("vm"));
        index.set("ns/a", Some("vm2"));
        assert!(names(&index, "ns", "vm").is_empty());
        assert_eq!(names(&index, "ns", "vm2"), ["a"]);
        index.set("ns/a", None);
        assert!(names(&index, "ns", "vm2").is_empty());
        assert!(
            index.by_value.is_empty() && index.of_claim.is_empty(),
            "nothing is left behind"
        );
        index.set("no-slash", Some("vm"));
        assert!(
            index.of_claim.is_empty(),
            "a key that is not namespace/name is not filed"
        );
    }
}
