//! How an instance type's vCPUs are laid out as sockets, cores and threads: the preference's
//! `preferredCPUTopology` and `spreadOptions`.

use super::VirtualMachinePreferenceSpec;

/// `preferredCPUTopology`, with upstream's deprecated spellings mapped to the current ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreferredTopology {
    /// All vCPUs as sockets (the default).
    Sockets,
    /// All vCPUs as cores of one socket.
    Cores,
    /// All vCPUs as threads of one core.
    Threads,
    /// Spread over sockets, cores and threads (`spreadOptions`).
    Spread,
    /// No preference; laid out as sockets.
    Any,
}

impl PreferredTopology {
    /// The preference's topology; sockets when it names none.
    #[must_use]
    pub fn of(preference: Option<&VirtualMachinePreferenceSpec>) -> Self {
        match preference
            .and_then(|p| p.cpu.as_ref())
            .and_then(|c| c.preferred_cpu_topology.as_deref())
        {
            Some("cores" | "preferCores") => Self::Cores,
            Some("threads" | "preferThreads") => Self::Threads,
            Some("spread" | "preferSpread") => Self::Spread,
            Some("any" | "preferAny") => Self::Any,
            _ => Self::Sockets,
        }
    }
}

/// `spreadOptions.across`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpreadAcross {
    /// Sockets and cores (the default).
    SocketsCores,
    /// Cores and threads.
    CoresThreads,
    /// Sockets, cores and threads.
    SocketsCoresThreads,
}

impl SpreadAcross {
    /// The name upstream uses in messages.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SocketsCores => "SocketsCores",
            Self::CoresThreads => "CoresThreads",
            Self::SocketsCoresThreads => "SocketsCoresThreads",
        }
    }
}

/// The spread layout: across what, and the ratio (`spreadOptions.ratio`, else the deprecated
/// `preferSpreadSocketToCoreRatio`, else 2).
#[must_use]
pub fn spread(preference: Option<&VirtualMachinePreferenceSpec>) -> (SpreadAcross, u32) {
    let options = preference
        .and_then(|p| p.cpu.as_ref())
        .and_then(|c| c.spread_options.as_ref());
    let ratio = options
        .and_then(|o| o.ratio)
        .or_else(|| {
            preference
                .map(|p| p.prefer_spread_socket_to_core_ratio)
                .filter(|r| *r != 0)
        })
        .unwrap_or(2);
    let across = match options.and_then(|o| o.across.as_deref()) {
        Some("CoresThreads") => SpreadAcross::CoresThreads,
        Some("SocketsCoresThreads") => SpreadAcross::SocketsCoresThreads,
        _ => SpreadAcross::SocketsCores,
    };
    (across, ratio)
}

/// Sockets, cores and threads for `guest` vCPUs.
#[must_use]
pub fn layout(guest: u32, preference: Option<&VirtualMachinePreferenceSpec>) -> (u32, u32, u32) {
    if guest <= 1 {
        return (1, 1, 1);
    }
    match PreferredTopology::of(preference) {
        PreferredTopology::Sockets | PreferredTopology::Any => (guest, 1, 1),
        PreferredTopology::Cores => (1, guest, 1),
        PreferredTopology::Threads => (1, 1, guest),
        PreferredTopology::Spread => {
            let (across, ratio) = spread(preference);
            let ratio = ratio.max(1);
            match across {
                SpreadAcross::SocketsCores => (guest / ratio, ratio, 1),
                SpreadAcross::CoresThreads => (1, guest / ratio, ratio),
                SpreadAcross::SocketsCoresThreads => (guest / 2 / ratio, ratio, 2),
            }
        }
    }
}

/// Upstream's admission message when `guest` vCPUs cannot be spread as the preference asks.
#[must_use]
pub fn spread_error(guest: u32, preference: Option<&VirtualMachinePreferenceSpec>) -> Option<String> {
    if PreferredTopology::of(preference) != PreferredTopology::Spread {
        return None;
    }
    let (across, ratio) = spread(preference);
    let ratio = ratio.max(1);
    match across {
        SpreadAcross::SocketsCores if !guest.is_multiple_of(ratio) => Some(format!(
            "{guest} vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio} provided by the preference"
        )),
        SpreadAcross::CoresThreads if !guest.is_multiple_of(ratio) => Some(format!(
            "{guest} vCPUs provided by the instance type are not divisible by the number of threads per core {ratio}"
        )),
        SpreadAcross::SocketsCoresThreads if !guest.is_multiple_of(2) || !(guest / 2).is_multiple_of(ratio) => {
            Some(format!(
                "{guest} vCPUs provided by the instance type are not divisible by the number of threads per core 2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of {ratio}"
            ))
        }
        _ => None,
    }
}
