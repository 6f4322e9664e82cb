//! virt-handler watches two sets of VMIs: those on its node (`kubevirt.io/nodeName`) and those
//! migrating to it (`kubevirt.io/migrationTargetNodeName`). [`Merger`] turns the two watches into
//! one: a VMI is there while either watch has it, and gone only when both have let it go, so a
//! VMI whose label moves from one set to the other is never seen deleted in between. Each watch's
//! relist is resolved here; the merged stream carries only applies and deletions.

use std::collections::{HashMap, HashSet};

use kube::runtime::watcher::Event;
use kubevirt_api::v1::VirtualMachineInstance;

/// Which watch an event came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The VMIs on this node.
    Node,
    /// The VMIs migrating to this node.
    MigrationTarget,
}

impl Source {
    fn index(self) -> usize {
        match self {
            Self::Node => 0,
            Self::MigrationTarget => 1,
        }
    }
}

#[derive(Debug)]
struct Member {
    vmi: VirtualMachineInstance,
    in_watch: [bool; 2],
}

/// Merges the two watches' events.
#[derive(Debug, Default)]
pub struct Merger {
    members: HashMap<String, Member>,
    relisting: [Option<HashSet<String>>; 2],
}

impl Merger {
    /// Takes in one watch's event; returns the merged events.
    pub fn on(&mut self, source: Source, event: Event<VirtualMachineInstance>) -> Vec<Event<VirtualMachineInstance>> {
        let at = source.index();
        match event {
            Event::Init => {
                self.relisting[at] = Some(HashSet::new());
                Vec::new()
            }
            Event::InitApply(vmi) => {
                if let Some(seen) = self.relisting[at].as_mut() {
                    seen.insert(vmi.key());
                }
                vec![self.apply(at, vmi)]
            }
            Event::Apply(vmi) => vec![self.apply(at, vmi)],
            Event::Delete(vmi) => self.leave(at, &vmi.key()).into_iter().collect(),
            Event::InitDone => {
                let seen = self.relisting[at].take().unwrap_or_default();
                let vanished: Vec<String> = self
                    .members
                    .iter()
                    .filter(|(key, member)| member.in_watch[at] && !seen.contains(*key))
                    .map(|(key, _)| key.clone())
                    .collect();
                vanished.iter().filter_map(|key| self.leave(at, key)).collect()
            }
        }
    }

    /// The VMI is in one watch; the newer of its two versions goes on (the watches are not
    /// ordered with each other, so one may deliver an older version after the other's newer).
    fn apply(&mut self, at: usize, vmi: VirtualMachineInstance) -> Event<VirtualMachineInstance> {
        let member = self.members.entry(vmi.key()).or_insert_with(|| Member {
            vmi: vmi.clone(),
            in_watch: [false; 2],
        });
        member.in_watch[at] = true;
        if version(&vmi) >= version(&member.vmi) {
            member.vmi = vmi;
        }
        Event::Apply(member.vmi.clone())
    }

    /// The VMI left one watch; a deletion when it is in neither now.
    fn leave(&mut self, at: usize, key: &str) -> Option<Event<VirtualMachineInstance>> {
        let member = self.members.get_mut(key)?;
        member.in_watch[at] = false;
        if member.in_watch.iter().any(|w| *w) {
            return None;
        }
        self.members.remove(key).map(|m| Event::Delete(m.vmi))
    }
}

/// A resourceVersion as a number (the API server's are, though clients must not rely on it for
/// more than ordering one object's versions); 0 when absent or not a number.
fn version(vmi: &VirtualMachineInstance) -> u64 {
    vmi.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(name: &str) -> VirtualMachineInstance {
        let mut vmi = VirtualMachineInstance::default();
        vmi.metadata.name = Some(name.to_owned());
        vmi.metadata.namespace = Some("default".to_owned());
        vmi
    }

    fn names(events: &[Event<VirtualMachineInstance>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Apply(v) => format!("apply {}", v.key()),
                Event::Delete(v) => format!("delete {}", v.key()),
                _ => "other".to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_vmi_moving_between_the_watches_is_never_deleted() {
        let mut merger = Merger::default();
        assert_eq!(
            names(&merger.on(Source::MigrationTarget, Event::Apply(vmi("a")))),
            ["apply default/a"]
        );
        assert_eq!(
            names(&merger.on(Source::Node, Event::Apply(vmi("a")))),
            ["apply default/a"]
        );
        assert!(merger.on(Source::MigrationTarget, Event::Delete(vmi("a"))).is_empty());
        assert_eq!(
            names(&merger.on(Source::Node, Event::Delete(vmi("a")))),
            ["delete default/a"]
        );
    }

    #[test]
    fn an_older_version_from_the_other_watch_does_not_win() {
        let mut merger = Merger::default();
        let mut newer = vmi("a");
        newer.metadata.resource_version = Some("12".to_owned());
        let mut older = vmi("a");
        older.metadata.resource_version = Some("10".to_owned());
        merger.on(Source::Node, Event::Apply(newer));
        let events = merger.on(Source::MigrationTarget, Event::Apply(older));
        let [Event::Apply(kept)] = events.as_slice() else {
            panic!("one apply");
        };
        assert_eq!(kept.metadata.resource_version.as_deref(), Some("12"));
    }

    #[test]
    fn a_relist_drops_only_what_that_watch_no_longer_has() {
        let mut merger = Merger::default();
        merger.on(Source::Node, Event::Apply(vmi("a")));
        merger.on(Source::Node, Event::Apply(vmi("b")));
        merger.on(Source::MigrationTarget, Event::Apply(vmi("b")));
        assert!(merger.on(Source::Node, Event::Init).is_empty());
        merger.on(Source::Node, Event::InitApply(vmi("c")));
        // a is gone from both; b is still a migration target here.
        assert_eq!(names(&merger.on(Source::Node, Event::InitDone)), ["delete default/a"]);
        assert!(merger.on(Source::MigrationTarget, Event::Init).is_empty());
        assert_eq!(
            names(&merger.on(Source::MigrationTarget, Event::InitDone)),
            ["delete default/b"]
        );
    }
}
