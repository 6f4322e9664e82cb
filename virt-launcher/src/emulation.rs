//! KVM or TCG: the flags every mode takes, and the one place that looks for `/dev/kvm`.

use std::path::Path;

use crate::domain::{ConvertError, DomainType};

/// The emulation flags of `render`, `run` and cluster mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmulationFlags {
    /// Upstream's `--allow-emulation`: TCG where `/dev/kvm` is absent.
    pub allow_emulation: bool,
    /// TCG even where `/dev/kvm` exists.
    pub force_emulation: bool,
}

impl EmulationFlags {
    /// The domain type on this machine ([`DomainType::decide`] with `/dev/kvm`'s presence).
    ///
    /// # Errors
    /// [`ConvertError`] when `/dev/kvm` is absent and emulation is not allowed.
    pub fn domain_type(self) -> Result<DomainType, ConvertError> {
        DomainType::decide(
            Path::new("/dev/kvm").exists(),
            self.allow_emulation,
            self.force_emulation,
        )
    }
}
