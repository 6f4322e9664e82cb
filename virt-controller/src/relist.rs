//! What a watch's relist leaves out. After a gap (a watch that expired) a watch lists everything
//! again (`Init`, one `InitApply` per object, `InitDone`) and sends no `Delete` for the objects
//! deleted meanwhile; a cache drops what the list did not name once the list is done.

use std::collections::{BTreeMap, HashMap, HashSet};

/// The keys one list named, while it runs.
#[derive(Debug, Default)]
pub struct Relist {
    seen: Option<HashSet<String>>,
}

impl Relist {
    /// A list starts (`Init`).
    pub fn start(&mut self) {
        self.seen = Some(HashSet::new());
    }

    /// The list named `key` (`InitApply`).
    pub fn saw(&mut self, key: &str) {
        if let Some(seen) = self.seen.as_mut() {
            seen.insert(key.to_owned());
        }
    }

    /// The list is done (`InitDone`): the keys it named, to keep; `None` when no list ran.
    pub fn finish(&mut self) -> Option<HashSet<String>> {
        self.seen.take()
    }
}

impl Relist {
    /// The list is done: removes from `map` what it did not name and returns those keys (none
    /// when no list ran).
    pub(crate) fn finish_sweep<V>(&mut self, map: &mut HashMap<String, V>) -> Vec<String> {
        self.finish().map_or_else(Vec::new, |listed| sweep(&listed, map))
    }

    /// [`Self::finish_sweep`] for pods kept by owner then name ([`sweep_nested`]).
    pub(crate) fn finish_sweep_nested<V>(&mut self, map: &mut HashMap<String, BTreeMap<String, V>>) -> Vec<String> {
        self.finish().map_or_else(Vec::new, |listed| sweep_nested(&listed, map))
    }
}

/// The keys of `map` a list did not name, removed; returns them (their objects were deleted).
fn sweep<V>(listed: &HashSet<String>, map: &mut HashMap<String, V>) -> Vec<String> {
    let gone: Vec<String> = map.keys().filter(|k| !listed.contains(*k)).cloned().collect();
    for key in &gone {
        map.remove(key);
    }
    gone
}

/// [`sweep`] for pods kept by their owner's key, then by name: a pod's listed key is
/// `<owner key>/<name>`. Returns the owners that lost a pod.
fn sweep_nested<V>(listed: &HashSet<String>, map: &mut HashMap<String, BTreeMap<String, V>>) -> Vec<String> {
    let mut owners = Vec::new();
    for (owner, items) in map.iter_mut() {
        let before = items.len();
        items.retain(|name, _| listed.contains(&format!("{owner}/{name}")));
        if items.len() != before {
            owners.push(owner.clone());
        }
    }
    map.retain(|_, items| !items.is_empty());
    owners
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap, HashSet};

    use super::{Relist, sweep, sweep_nested};

    #[test]
    fn what_a_list_left_out_is_swept_and_named() {
        let listed: HashSet<String> = ["a".to_owned(), "o/p1".to_owned()].into();
        let mut flat: HashMap<String, u8> = [("a".to_owned(), 1), ("b".to_owned(), 2)].into();
        assert_eq!(sweep(&listed, &mut flat), ["b"]);
        assert_eq!(flat.len(), 1);
        let mut nested: HashMap<String, BTreeMap<String, u8>> = [
            ("o".to_owned(), [("p1".to_owned(), 1), ("p2".to_owned(), 2)].into()),
            ("x".to_owned(), [("q".to_owned(), 3)].into()),
        ]
        .into();
        let mut owners = sweep_nested(&listed, &mut nested);
        owners.sort();
        assert_eq!(owners, ["o", "x"]);
        assert_eq!(nested.len(), 1);
        assert_eq!(nested["o"].len(), 1);
    }

    #[test]
    fn a_list_keeps_what_it_named() {
        let mut relist = Relist::default();
        relist.saw("ignored before a list");
        assert_eq!(relist.finish(), None);
        relist.start();
        relist.saw("a");
        relist.saw("b");
        let kept = relist.finish().expect("a list ran");
        assert!(kept.contains("a") && kept.contains("b") && kept.len() == 2);
        assert_eq!(relist.finish(), None, "only once");
    }
}
