//! What a controller keeps of the objects one watch shows it: a few facts per `namespace/name`,
//! told which keys changed, with a relist forgetting what it did not see again (a deletion the
//! watch missed). The claim and DataVolume stores are built on it.

use std::collections::{HashMap, HashSet};

use kube::Resource;
use kube::runtime::watcher::Event;

/// The `namespace/name` of a watched object.
#[must_use]
pub fn key_of<T: Resource>(object: &T) -> String {
    let meta = object.meta();
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The facts kept per object, and the relist under way.
#[derive(Debug)]
pub struct WatchedFacts<F> {
    facts: HashMap<String, F>,
    /// The keys seen since a (re)list began, while it lasts.
    listing: Option<HashSet<String>>,
}

impl<F> Default for WatchedFacts<F> {
    fn default() -> Self {
        Self {
            facts: HashMap::new(),
            listing: None,
        }
    }
}

impl<F: PartialEq> WatchedFacts<F> {
    /// Takes in one event, keeping `facts_of` each object; returns the keys whose facts appeared,
    /// changed or went.
    pub fn on_event<T: Resource>(&mut self, event: &Event<T>, facts_of: impl Fn(&T) -> F) -> Vec<String> {
        match event {
            Event::Init => {
                self.listing = Some(HashSet::new());
                Vec::new()
            }
            Event::InitApply(object) | Event::Apply(object) => {
                let key = key_of(object);
                if let Some(listing) = self.listing.as_mut() {
                    listing.insert(key.clone());
                }
                let facts = facts_of(object);
                if self.facts.get(&key) == Some(&facts) {
                    return Vec::new();
                }
                self.facts.insert(key.clone(), facts);
                vec![key]
            }
            Event::Delete(object) => {
                let key = key_of(object);
                self.facts.remove(&key).map(|_| key).into_iter().collect()
            }
            Event::InitDone => {
                let Some(seen) = self.listing.take() else {
                    return Vec::new();
                };
                let gone: Vec<String> = self.facts.keys().filter(|k| !seen.contains(*k)).cloned().collect();
                for key in &gone {
                    self.facts.remove(key);
                }
                gone
            }
        }
    }

    /// The facts of `namespace/name`, if it is there.
    #[must_use]
    pub fn get(&self, namespace: &str, name: &str) -> Option<&F> {
        self.facts.get(&format!("{namespace}/{name}"))
    }

    /// Every object's `namespace/name` and facts.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &F)> {
        self.facts.iter()
    }
}
