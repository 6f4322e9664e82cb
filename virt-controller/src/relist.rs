//! What a watch's relist leaves out. After a gap (a watch that expired) a watch lists everything
//! again (`Init`, one `InitApply` per object, `InitDone`) and sends no `Delete` for the objects
//! deleted meanwhile; a cache drops what the list did not name once the list is done.

use std::collections::HashSet;

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

#[cfg(test)]
mod tests {
    use super::Relist;

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
