//! Dedicated CPUs (`spec.domain.cpu.dedicatedCpuPlacement`): each vCPU pinned to a host thread
//! of the pod's cpuset, the emulator threads on a CPU of their own when isolated, IOThreads pinned,
//! realtime vCPUs, and the guest NUMA cells passed through from the host. In upstream's order:
//! vCPUs, the dedicated hint, the emulator, IOThreads, realtime, then NUMA.

use kubevirt_api::v1::VirtualMachineInstance;

use super::placement::{CpuPool, HostCpus};
use super::{ConvertError, Topology, numa};
use crate::model::{CpuTune, Domain, EmulatorPin, IothreadPin, KvmFeatures, State, VcpuPin, VcpuSched};

const PLACEMENT_FIELD: &str = "spec.domain.cpu.dedicatedCpuPlacement";

/// Whether the VMI asks for dedicated CPUs.
#[must_use]
pub fn is_dedicated(vmi: &VirtualMachineInstance) -> bool {
    vmi.spec
        .domain
        .cpu
        .as_ref()
        .is_some_and(|c| c.dedicated_cpu_placement == Some(true))
}

/// Pins `domain` onto `host` when the VMI asks for dedicated CPUs.
pub fn apply(
    vmi: &VirtualMachineInstance,
    topology: &Topology,
    host: Option<&HostCpus>,
    domain: &mut Domain,
) -> Result<(), ConvertError> {
    let Some(cpu) = vmi.spec.domain.cpu.as_ref() else {
        return Ok(());
    };
    if !is_dedicated(vmi) {
        // The validating webhook refuses these; a manifest given to the launcher directly is
        // refused here, with the webhook's words, rather than run without them.
        let needs_dedicated = [
            (
                cpu.isolate_emulator_thread == Some(true),
                "spec.domain.cpu.isolateEmulatorThread",
                "IsolateEmulatorThread should be only set in combination with DedicatedCPUPlacement",
            ),
            (
                cpu.numa.as_ref().is_some_and(|n| n.guest_mapping_passthrough.is_some()),
                "spec.domain.cpu.numa.guestMappingPassthrough",
                "spec.domain.cpu.dedicatedCpuPlacement must be set to true when NUMA topology strategy is set in spec.domain.cpu.numa.guestMappingPassthrough",
            ),
            (
                cpu.realtime.is_some(),
                PLACEMENT_FIELD,
                "spec.domain.cpu.dedicatedCpuPlacement must be set to true when spec.domain.cpu.realtime is used",
            ),
        ];
        if let Some((_, field, message)) = needs_dedicated.into_iter().find(|(set, _, _)| *set) {
            return Err(ConvertError::invalid(field, message));
        }
        return Ok(());
    }
    let host = host.ok_or_else(|| {
        ConvertError::invalid(
            PLACEMENT_FIELD,
            "dedicated CPUs need the pod's cpuset and the host's CPU layout, which the launcher did not provide",
        )
    })?;
    let passthrough = cpu.numa.as_ref().is_some_and(|n| n.guest_mapping_passthrough.is_some());
    let mut pool = CpuPool::new(host, topology.threads, passthrough);
    let placement_error = |e: super::placement::FitError| ConvertError::invalid(PLACEMENT_FIELD, e.to_string());
    let threads = pool
        .fit_cores(topology.enabled_sockets.saturating_mul(topology.cores))
        .map_err(placement_error)?;
    let mut tune = CpuTune {
        vcpupin: (0u32..)
            .zip(&threads)
            .map(|(vcpu, thread)| VcpuPin {
                vcpu,
                cpuset: thread.to_string(),
            })
            .collect(),
        ..CpuTune::default()
    };
    if vmi.spec.architecture.as_deref().is_none_or(|a| a == "amd64") {
        let features = domain.features.get_or_insert_with(Default::default);
        features.kvm.get_or_insert_with(KvmFeatures::default).hint_dedicated = Some(State::on_off(true));
    }
    let emulator_cpus = vmi.emulator_thread_cpus(u64::from(topology.vcpus()));
    if emulator_cpus > 0 {
        let mut emulator = Vec::new();
        for n in 0..emulator_cpus {
            let thread = pool.fit_thread().map_err(|e| {
                let which = if n == 0 { "" } else { " second" };
                ConvertError::invalid(
                    "spec.domain.cpu.isolateEmulatorThread",
                    format!("no{which} CPU allocated for the emulation thread: {e}"),
                )
            })?;
            emulator.push(thread);
        }
        tune.emulatorpin = Some(EmulatorPin {
            cpuset: join(&emulator),
        });
    }
    tune.iothreadpin = iothread_pins(domain.iothreads.unwrap_or(0), &tune, &host.cpuset, topology.vcpus());
    if let Some(realtime) = cpu.realtime.as_ref() {
        domain.features.get_or_insert_with(Default::default).pmu = Some(State::on_off(false));
        tune.vcpusched.push(VcpuSched {
            vcpus: realtime_vcpus(realtime.mask.as_deref(), topology.vcpus())?,
            scheduler: "fifo".to_owned(),
            priority: Some(1),
        });
    }
    let pins = tune.vcpupin.clone();
    domain.cputune = Some(tune);
    if passthrough {
        numa::pass_through(vmi, host, &pins, cpu.realtime.is_some(), domain)?;
    }
    Ok(())
}

fn join(cpus: &[u32]) -> String {
    cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// IOThread pins: with an isolated emulator, IOThread 1 shares its CPUs; else the IOThreads are
/// spread over the first vCPU-count CPUs of the pod's cpuset (one each when there are as many
/// IOThreads as vCPUs or more, else in balanced contiguous groups).
fn iothread_pins(iothreads: u32, tune: &CpuTune, cpuset: &[u32], vcpus: u32) -> Vec<IothreadPin> {
    if iothreads == 0 || cpuset.is_empty() {
        return Vec::new();
    }
    if let Some(emulator) = &tune.emulatorpin {
        return vec![IothreadPin {
            iothread: 1,
            cpuset: emulator.cpuset.clone(),
        }];
    }
    let usable = usize::try_from(vcpus).unwrap_or(usize::MAX).min(cpuset.len()).max(1);
    let count = usize::try_from(iothreads).unwrap_or(usize::MAX);
    if count >= usable {
        return (1..=iothreads)
            .zip(1usize..)
            .map(|(iothread, t)| IothreadPin {
                iothread,
                cpuset: cpuset[t % usable].to_string(),
            })
            .collect();
    }
    let (base, extra) = (usable / count, usable % count);
    let mut start = 0;
    (1..=iothreads)
        .zip(0usize..)
        .map(|(iothread, i)| {
            let size = base + usize::from(i < extra);
            let group = join(&cpuset[start..start + size]);
            start += size;
            IothreadPin {
                iothread,
                cpuset: group,
            }
        })
        .collect()
}

/// The realtime vCPUs as libvirt's bitmap: `mask` checked against the vCPU count, or all vCPUs.
fn realtime_vcpus(mask: Option<&str>, vcpus: u32) -> Result<String, ConvertError> {
    let all = if vcpus > 1 {
        format!("0-{}", vcpus - 1)
    } else {
        "0".to_owned()
    };
    let Some(mask) = mask.map(str::trim).filter(|m| !m.is_empty()) else {
        return Ok(all);
    };
    let field = "spec.domain.cpu.realtime.mask";
    let selected = parse_vcpu_mask(mask, vcpus).map_err(|e| ConvertError::invalid(field, e))?;
    if selected.is_empty() {
        return Err(ConvertError::invalid(
            field,
            format!("invalid mask value '{mask}' in '{mask}': it selects no vCPU"),
        ));
    }
    Ok(join(&selected.into_iter().collect::<Vec<_>>()))
}

/// The vCPUs (of `vcpus`) a realtime mask selects: comma-separated `a-b`, `n` and `^n` (excluded
/// wherever it appears), with upstream's messages; an index beyond the vCPUs is refused before
/// any range is expanded.
fn parse_vcpu_mask(mask: &str, vcpus: u32) -> Result<std::collections::BTreeSet<u32>, String> {
    let mut included = std::collections::BTreeSet::new();
    let mut excluded = std::collections::BTreeSet::new();
    for part in mask.split(',').map(str::trim) {
        let index = |s: &str, what: &str| {
            let id = s
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("invalid mask value '{part}' in '{mask}'{what}"))?;
            if id >= vcpus {
                return Err(format!("invalid vcpu index `{id}`: the VMI has {vcpus} vCPUs"));
            }
            Ok(id)
        };
        if let Some(negated) = part.strip_prefix('^') {
            excluded.insert(index(negated, "")?);
        } else if let Some((start, end)) = part.split_once('-') {
            let (start, end) = (index(start, "")?, index(end, "")?);
            if start > end {
                return Err(format!("invalid mask range `{start}-{end}`"));
            }
            included.extend(start..=end);
        } else {
            included.insert(index(part, "")?);
        }
    }
    Ok(included.difference(&excluded).copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_masks_select_vcpus_with_exclusions_winning() {
        let set = |m: &str| parse_vcpu_mask(m, 8).map(|s| s.into_iter().collect::<Vec<_>>());
        assert_eq!(set("0-3,^1"), Ok(vec![0, 2, 3]));
        assert_eq!(set("^1,0-3"), Ok(vec![0, 2, 3]));
        assert_eq!(set(" 2 , 0 "), Ok(vec![0, 2]));
        assert_eq!(set("3-1"), Err("invalid mask range `3-1`".to_owned()));
        assert!(set("a").is_err());
        assert_eq!(
            set("0-4294967295"),
            Err("invalid vcpu index `4294967295`: the VMI has 8 vCPUs".to_owned()),
            "refused before the range is expanded"
        );
        assert_eq!(realtime_vcpus(None, 4), Ok("0-3".to_owned()));
        assert_eq!(realtime_vcpus(Some(""), 1), Ok("0".to_owned()));
        assert_eq!(realtime_vcpus(Some("0-3,^1"), 4), Ok("0,2,3".to_owned()));
        assert!(realtime_vcpus(Some("0-4"), 4).is_err());
        assert!(realtime_vcpus(Some("^0"), 1).is_err());
    }

    #[test]
    fn iothreads_share_the_emulator_or_spread_over_the_cpuset() {
        let cpuset: Vec<u32> = (0..8).collect();
        let groups = |tune: &CpuTune, n: u32, vcpus: u32| -> Vec<String> {
            iothread_pins(n, tune, &cpuset, vcpus)
                .into_iter()
                .map(|p| format!("{}:{}", p.iothread, p.cpuset))
                .collect()
        };
        let plain = CpuTune::default();
        assert_eq!(groups(&plain, 3, 8), ["1:0,1,2", "2:3,4,5", "3:6,7"]);
        assert_eq!(groups(&plain, 2, 2), ["1:1", "2:0"]);
        assert_eq!(groups(&plain, 0, 2), Vec::<String>::new());
        let isolated = CpuTune {
            emulatorpin: Some(EmulatorPin {
                cpuset: "12,13".to_owned(),
            }),
            ..CpuTune::default()
        };
        assert_eq!(groups(&isolated, 2, 4), ["1:12,13"]);
    }
}
