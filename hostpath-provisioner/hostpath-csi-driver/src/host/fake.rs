//! An in-memory node: directories, one filesystem's space, and mounts, with every change
//! recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{Host, Space};
use crate::mount_options::BindOptions;

/// What the fake node holds.
#[derive(Debug, Default)]
pub struct State {
    /// The directories.
    pub dirs: BTreeSet<PathBuf>,
    /// Mounts: target to (source, read-only).
    pub mounts: BTreeMap<PathBuf, (PathBuf, bool)>,
    /// The space every path's filesystem has.
    pub space: Space,
    /// Every change, in short.
    pub changes: Vec<String>,
}

/// The fake node.
#[derive(Debug, Default)]
pub struct FakeHost(Mutex<State>);

impl FakeHost {
    /// A node with `dirs` and `space`.
    #[must_use]
    pub fn with(dirs: &[&str], space: Space) -> Self {
        Self(Mutex::new(State {
            dirs: dirs.iter().map(PathBuf::from).collect(),
            space,
            ..State::default()
        }))
    }

    /// What it holds.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Host for FakeHost {
    fn make_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.changes.push(format!("mkdir {}", path.display()));
        for ancestor in path.ancestors() {
            state.dirs.insert(ancestor.to_owned());
        }
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.changes.push(format!("rm -r {}", path.display()));
        state.dirs.retain(|dir| !dir.starts_with(path));
        Ok(())
    }

    fn remove_empty_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        if state.mounts.contains_key(path) {
            return Err(io::Error::from(io::ErrorKind::DirectoryNotEmpty));
        }
        state.changes.push(format!("rmdir {}", path.display()));
        state.dirs.remove(path);
        Ok(())
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.state().dirs.contains(path)
    }

    fn space(&self, path: &Path) -> io::Result<Space> {
        let state = self.state();
        if state.dirs.contains(path) {
            Ok(state.space)
        } else {
            Err(io::Error::from(io::ErrorKind::NotFound))
        }
    }

    fn is_mount_point(&self, path: &Path) -> io::Result<bool> {
        Ok(self.state().mounts.contains_key(path))
    }

    fn bind_mount(&self, source: &Path, target: &Path, options: BindOptions) -> io::Result<()> {
        let mut state = self.state();
        if !state.dirs.contains(target) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        state.changes.push(format!(
            "mount --bind {} {}{}",
            source.display(),
            target.display(),
            if options.any() {
                format!(" {}", options.describe())
            } else {
                String::new()
            }
        ));
        state
            .mounts
            .insert(target.to_owned(), (source.to_owned(), options.read_only));
        Ok(())
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.changes.push(format!("umount {}", target.display()));
        state
            .mounts
            .remove(target)
            .map(|_| ())
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
    }
}
