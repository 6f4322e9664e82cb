//! Conversion errors, each naming the VMI field it is about.

/// Why a VMI cannot be rendered into a domain.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// A field has a value that is wrong or contradicts another field.
    #[error("{field}: {message}")]
    Invalid {
        /// Field path, e.g. `spec.domain.devices.disks[2].disk.pciAddress`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A field asks for something this launcher does not implement yet.
    #[error("{field}: {feature} is not supported by kubevirt-rs")]
    Unsupported {
        /// Field path.
        field: String,
        /// What is not supported.
        feature: String,
    },
    /// KVM is needed but `/dev/kvm` is absent and emulation is not allowed.
    #[error("kvm not present: /dev/kvm is missing and software emulation is not allowed (use --allow-emulation)")]
    KvmNotPresent,
}

impl ConvertError {
    /// An [`ConvertError::Invalid`] error.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// An [`ConvertError::Unsupported`] error.
    pub fn unsupported(field: impl Into<String>, feature: impl Into<String>) -> Self {
        Self::Unsupported {
            field: field.into(),
            feature: feature.into(),
        }
    }

    /// The field path the error is about, if any.
    #[must_use]
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid { field, .. } | Self::Unsupported { field, .. } => Some(field),
            Self::KvmNotPresent => None,
        }
    }
}

/// Path of `spec.domain.devices.disks[i]`.
#[must_use]
pub fn disk_field(index: usize) -> String {
    format!("spec.domain.devices.disks[{index}]")
}

/// Path of `spec.domain.devices.interfaces[i]`.
#[must_use]
pub fn interface_field(index: usize) -> String {
    format!("spec.domain.devices.interfaces[{index}]")
}
