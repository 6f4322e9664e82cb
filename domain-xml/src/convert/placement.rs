//! The host CPUs a dedicated VMI may use, and how its vCPUs and emulator threads are fitted onto
//! them, as upstream's CPU pool fits them: whole host cores first, then the leftover threads of a
//! NUMA cell, then (unless the guest's NUMA cells must follow the host's) threads across cells.

use std::collections::{BTreeSet, VecDeque};

/// The CPUs the launcher may run on and the host's layout of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostCpus {
    /// The CPUs of the pod's cpuset, ascending.
    pub cpuset: Vec<u32>,
    /// The host's NUMA cells, in the order the host reports them.
    pub cells: Vec<HostCell>,
}

/// One host NUMA cell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostCell {
    /// The cell's id (`/sys/devices/system/node/node<id>`).
    pub id: u32,
    /// Its CPUs, in reported order.
    pub cpus: Vec<HostCpu>,
}

/// One host CPU (hardware thread).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostCpu {
    /// The CPU number.
    pub id: u32,
    /// The threads of its core, itself included, in reported order; empty when unknown.
    pub siblings: Vec<u32>,
}

/// Why vCPUs or threads do not fit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// Fewer exclusive threads than guest cores need.
    #[error("not enough exclusive threads provided, could not fit {0} core(s)")]
    NotEnoughThreads(u32),
    /// The threads are there, but a guest core would span two host cells.
    #[error("could not fit {0} core(s) without crossing numa cell boundaries for individual cores")]
    CrossesCells(u32),
    /// Every thread is taken.
    #[error("no remaining unassigned threads")]
    NoThreadLeft,
}

/// Parses a Linux CPU list (`0-3,8,10-11`) into ascending CPU numbers.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>, String> {
    /// More CPUs than any host has: a list beyond it is a mistake, not a host.
    const MAX_CPUS: u32 = 50_000;
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("invalid CPU list {text:?}: {s:?} is not a CPU number"))
        };
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if first > last || last >= MAX_CPUS {
            return Err(format!("invalid CPU list {text:?}: bad range {part:?}"));
        }
        cpus.extend(first..=last);
    }
    Ok(cpus.into_iter().collect())
}

/// Free threads of one host cell.
#[derive(Debug, Default)]
struct PoolCell {
    /// Cores with at least a guest core's worth of free threads.
    full: VecDeque<Vec<u32>>,
    /// Threads of cores with fewer.
    fragmented: VecDeque<u32>,
}

impl PoolCell {
    /// Takes the first `n` threads of the first full core; the core stays whole while it still
    /// has `threads_per_core` free threads, else its rest becomes leftovers.
    fn take_from_full(&mut self, n: usize, threads_per_core: usize) -> Option<Vec<u32>> {
        let core = self.full.front_mut()?;
        let taken: Vec<u32> = core.drain(..n.min(core.len())).collect();
        if core.len() < threads_per_core {
            let leftover = self.full.pop_front().unwrap_or_default();
            self.fragmented.extend(leftover);
        }
        Some(taken)
    }

    fn is_empty(&self) -> bool {
        self.full.is_empty() && self.fragmented.is_empty()
    }
}

/// The unassigned threads of the pod's cpuset, per host cell.
#[derive(Debug)]
pub struct CpuPool {
    cells: Vec<PoolCell>,
    threads_per_core: usize,
    strict: bool,
    available: usize,
}

impl CpuPool {
    /// A pool for guest cores of `threads_per_core` threads. `strict`: a guest core never spans
    /// host cells (guest NUMA passthrough).
    #[must_use]
    pub fn new(host: &HostCpus, threads_per_core: u32, strict: bool) -> Self {
        let threads = usize::try_from(threads_per_core.max(1)).unwrap_or(1);
        let allowed: BTreeSet<u32> = host.cpuset.iter().copied().collect();
        let mut visited = BTreeSet::new();
        let mut available = 0;
        let cells = host
            .cells
            .iter()
            .map(|cell| {
                let mut pool = PoolCell::default();
                for cpu in &cell.cpus {
                    if visited.contains(&cpu.id) {
                        continue;
                    }
                    let members = if cpu.siblings.is_empty() {
                        std::slice::from_ref(&cpu.id)
                    } else {
                        cpu.siblings.as_slice()
                    };
                    let mut core = Vec::new();
                    for id in members {
                        if visited.insert(*id) && allowed.contains(id) {
                            core.push(*id);
                        }
                    }
                    available += core.len();
                    if core.len() >= threads {
                        pool.full.push_back(core);
                    } else {
                        pool.fragmented.extend(core);
                    }
                }
                pool
            })
            .collect();
        Self {
            cells,
            threads_per_core: threads,
            strict,
            available,
        }
    }

    /// Threads for `cores` guest cores, a guest core's threads next to each other.
    pub fn fit_cores(&mut self, cores: u32) -> Result<Vec<u32>, FitError> {
        let threads = self.threads_per_core;
        let mut remaining = cores;
        let mut picked = Vec::new();
        // Whole host cores first, cell by cell.
        for cell in &mut self.cells {
            while remaining > 0 {
                let Some(taken) = cell.take_from_full(threads, threads) else {
                    break;
                };
                picked.extend(taken);
                remaining -= 1;
            }
        }
        // Then leftover threads, a guest core within one cell.
        for cell in &mut self.cells {
            while remaining > 0 && cell.fragmented.len() >= threads {
                picked.extend(cell.fragmented.drain(..threads));
                remaining -= 1;
            }
        }
        // Then, unless cells must be respected, leftover threads across cells.
        if remaining > 0 && !self.strict {
            let needed = usize::try_from(remaining).unwrap_or(usize::MAX).saturating_mul(threads);
            let spare: usize = self.cells.iter().map(|c| c.fragmented.len()).sum();
            if spare >= needed {
                let mut left = needed;
                for cell in &mut self.cells {
                    let n = left.min(cell.fragmented.len());
                    picked.extend(cell.fragmented.drain(..n));
                    left -= n;
                }
                remaining = 0;
            }
        }
        if remaining == 0 {
            return Ok(picked);
        }
        let wanted = usize::try_from(cores).unwrap_or(usize::MAX).saturating_mul(threads);
        if !self.strict || self.available < wanted {
            Err(FitError::NotEnoughThreads(remaining))
        } else {
            Err(FitError::CrossesCells(remaining))
        }
    }

    /// One more thread: a leftover first, else the first thread of a whole core.
    pub fn fit_thread(&mut self) -> Result<u32, FitError> {
        let threads = self.threads_per_core;
        let cell = self
            .cells
            .iter_mut()
            .find(|c| !c.is_empty())
            .ok_or(FitError::NoThreadLeft)?;
        if let Some(thread) = cell.fragmented.pop_front() {
            return Ok(thread);
        }
        cell.take_from_full(1, threads)
            .and_then(|taken| taken.first().copied())
            .ok_or(FitError::NoThreadLeft)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paired_cell(id: u32, pairs: &[(u32, u32)]) -> HostCell {
        HostCell {
            id,
            cpus: pairs
                .iter()
                .flat_map(|&(a, b)| {
                    [
                        HostCpu {
                            id: a,
                            siblings: vec![a, b],
                        },
                        HostCpu {
                            id: b,
                            siblings: vec![a, b],
                        },
                    ]
                })
                .collect(),
        }
    }

    fn six_pairs() -> Vec<HostCell> {
        vec![paired_cell(0, &[(1, 7), (0, 6), (2, 8), (3, 9), (4, 10), (5, 11)])]
    }

    #[test]
    fn cpu_lists_parse_like_the_kernel_prints_them() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Ok(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("5"), Ok(vec![5]));
        assert_eq!(parse_cpu_list(""), Ok(vec![]));
        for bad in ["a", "3-1", "1-", "0-60000"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn guest_cores_follow_the_host_order_whatever_the_cpuset_order() {
        let mut host = HostCpus {
            cpuset: (0..12).collect(),
            cells: six_pairs(),
        };
        let expected = vec![1, 7, 0, 6, 2, 8, 3, 9, 4, 10, 5, 11];
        assert_eq!(CpuPool::new(&host, 2, false).fit_cores(6), Ok(expected.clone()));
        host.cpuset = vec![11, 3, 5, 0, 1, 2, 4, 6, 7, 8, 9, 10];
        assert_eq!(CpuPool::new(&host, 2, false).fit_cores(6), Ok(expected));
    }

    #[test]
    fn a_missing_thread_leaves_a_core_unfitted() {
        let host = HostCpus {
            cpuset: (0..11).collect(),
            cells: six_pairs(),
        };
        assert_eq!(
            CpuPool::new(&host, 1, false).fit_cores(12),
            Err(FitError::NotEnoughThreads(1))
        );
        assert_eq!(
            FitError::NotEnoughThreads(1).to_string(),
            "not enough exclusive threads provided, could not fit 1 core(s)"
        );
    }

    fn three_thread_cores() -> HostCpus {
        let core = |cell: u32, ids: [u32; 3]| HostCell {
            id: cell,
            cpus: ids
                .iter()
                .map(|&id| HostCpu {
                    id,
                    siblings: ids.to_vec(),
                })
                .collect(),
        };
        HostCpus {
            cpuset: (0..12).collect(),
            cells: vec![core(0, [1, 7, 0]), core(1, [6, 2, 8])],
        }
    }

    #[test]
    fn a_strict_pool_never_splits_a_guest_core_across_cells() {
        let host = three_thread_cores();
        let error = CpuPool::new(&host, 2, true).fit_cores(3).expect_err("no fit");
        assert_eq!(error, FitError::CrossesCells(1));
        assert_eq!(
            error.to_string(),
            "could not fit 1 core(s) without crossing numa cell boundaries for individual cores"
        );
        assert_eq!(CpuPool::new(&host, 2, false).fit_cores(3), Ok(vec![1, 7, 6, 2, 0, 8]));
    }

    #[test]
    fn single_threads_come_from_leftovers_first() {
        let host = HostCpus {
            cpuset: (0..12).collect(),
            cells: six_pairs(),
        };
        let mut pool = CpuPool::new(&host, 1, false);
        let picked: Vec<u32> = (0..6).map(|_| pool.fit_thread().expect("thread")).collect();
        assert_eq!(picked, vec![1, 7, 0, 6, 2, 8]);

        let host = HostCpus {
            cpuset: (2..12).collect(),
            cells: six_pairs(),
        };
        let mut pool = CpuPool::new(&host, 2, false);
        let picked: Vec<u32> = (0..6).map(|_| pool.fit_thread().expect("thread")).collect();
        assert_eq!(picked, vec![7, 6, 2, 8, 3, 9]);
        for _ in 0..4 {
            pool.fit_thread().expect("thread");
        }
        assert_eq!(pool.fit_thread(), Err(FitError::NoThreadLeft));
    }

    #[test]
    fn cpus_without_siblings_are_cores_of_their_own() {
        let host = HostCpus {
            cpuset: vec![1],
            cells: vec![HostCell {
                id: 0,
                cpus: vec![
                    HostCpu {
                        id: 0,
                        siblings: vec![],
                    },
                    HostCpu {
                        id: 1,
                        siblings: vec![],
                    },
                ],
            }],
        };
        let mut pool = CpuPool::new(&host, 1, false);
        assert_eq!(pool.fit_cores(1), Ok(vec![1]));
        assert_eq!(pool.fit_thread(), Err(FitError::NoThreadLeft));
    }
}
