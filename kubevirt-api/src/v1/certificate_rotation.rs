//! `spec.certificateRotateStrategy` of the `KubeVirt` resource: how long KubeVirt's CA and the
//! components' certificates live, and how long before they expire they are made again.
//!
//! [`rotation`] reads it as upstream does: the deprecated `caRotateInterval`,
//! `certRotateInterval` and `caOverlapInterval` win over `ca` and `server` (they may not be given
//! together); the CA lives 168 hours and a certificate 24 unless told otherwise; and what is left
//! out of `renewBefore` is a fifth of the duration. It refuses, with upstream's messages, a
//! renewal that would come before the start and a certificate that would outlive its CA, and
//! (ours) a duration under a second or over a hundred years, or a renewal due as soon as it is
//! made, which would renew without end.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use operator_kit::duration;

/// Seconds in an hour.
const HOUR: i64 = 3600;
/// Upstream's CA lifetime: 7 days.
pub const DEFAULT_CA_SECONDS: i64 = 168 * HOUR;
/// Upstream's certificate lifetime: 24 hours.
pub const DEFAULT_SERVER_SECONDS: i64 = 24 * HOUR;
/// The longest lifetime kept: a hundred years (a certificate's end must be a date X.509 and
/// the clock can write).
pub const MAX_SECONDS: i64 = 100 * 365 * 24 * HOUR;

/// `spec.certificateRotateStrategy`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRotateStrategy {
    /// Lifetimes of the self-signed CA and the certificates it signs.
    pub self_signed: Option<SelfSignConfiguration>,
}

/// `spec.certificateRotateStrategy.selfSigned`. Durations are Go's (`48h`, `1h30m`, `90s`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelfSignConfiguration {
    /// Deprecated: the CA's duration (use `ca.duration`).
    pub ca_rotate_interval: Option<String>,
    /// Deprecated: the certificates' duration (use `server.duration`).
    pub cert_rotate_interval: Option<String>,
    /// Deprecated: the CA's renewBefore (use `ca.renewBefore`).
    pub ca_overlap_interval: Option<String>,
    /// The CA; CAs stay in the bundle while they are valid.
    pub ca: Option<CertConfig>,
    /// The certificates the CA signs; they are replaced and dropped.
    pub server: Option<CertConfig>,
}

/// One kind of certificate's lifetime.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertConfig {
    /// How long it lives.
    pub duration: Option<String>,
    /// How long before it expires it is made again.
    pub renew_before: Option<String>,
}

/// A lifetime in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// How long a certificate lives.
    pub duration: i64,
    /// How long before its end it is made again.
    pub renew_before: i64,
}

impl Renewal {
    fn with_default_renewal(duration: i64) -> Self {
        Self {
            duration,
            renew_before: duration / 5,
        }
    }
}

/// The lifetimes of the CA and of the certificates it signs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// The CA's.
    pub ca: Renewal,
    /// Every other certificate's (servers' and clients').
    pub server: Renewal,
}

impl Default for Rotation {
    /// Upstream's: the CA 168 hours, certificates 24, each made again when a fifth is left.
    fn default() -> Self {
        Self {
            ca: Renewal::with_default_renewal(DEFAULT_CA_SECONDS),
            server: Renewal::with_default_renewal(DEFAULT_SERVER_SECONDS),
        }
    }
}

/// Why `selfSigned` gives no lifetimes: every reason, each naming its field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct RotationError(pub Vec<String>);

const FIELD: &str = "spec.certificateRotateStrategy.selfSigned";

/// Reads the duration `value` of `FIELD.<name>`; a bad one is noted in `errors`.
fn read(name: &str, value: Option<&String>, errors: &mut Vec<String>) -> Option<i64> {
    let value = value?;
    match duration::seconds(&format!("{FIELD}.{name}"), value) {
        Ok(seconds) => Some(seconds),
        Err(e) => {
            errors.push(e.to_string());
            None
        }
    }
}

/// The lifetimes `config` asks for (upstream's defaults for what it leaves out).
///
/// # Errors
/// [`RotationError`] with every reason it is refused.
pub fn rotation(config: Option<&SelfSignConfiguration>) -> Result<Rotation, RotationError> {
    let Some(config) = config else {
        return Ok(Rotation::default());
    };
    let mut errors = Vec::new();
    let deprecated = config.ca_rotate_interval.is_some()
        || config.cert_rotate_interval.is_some()
        || config.ca_overlap_interval.is_some();
    if deprecated && (config.ca.is_some() || config.server.is_some()) {
        errors.push(
            "caRotateInterval, certRotateInterval and caOverlapInterval are deprecated and conflict with CertConfig defined rotation parameters"
                .to_owned(),
        );
    }
    let ca = config.ca.as_ref();
    let server = config.server.as_ref();
    let ca_duration = read("caRotateInterval", config.ca_rotate_interval.as_ref(), &mut errors)
        .or_else(|| read("ca.duration", ca.and_then(|c| c.duration.as_ref()), &mut errors));
    let ca_renew_before = read("caOverlapInterval", config.ca_overlap_interval.as_ref(), &mut errors)
        .or_else(|| read("ca.renewBefore", ca.and_then(|c| c.renew_before.as_ref()), &mut errors));
    let server_duration = read("certRotateInterval", config.cert_rotate_interval.as_ref(), &mut errors)
        .or_else(|| read("server.duration", server.and_then(|c| c.duration.as_ref()), &mut errors));
    let server_renew_before = read(
        "server.renewBefore",
        server.and_then(|c| c.renew_before.as_ref()),
        &mut errors,
    );
    let renewal = |duration: Option<i64>, renew_before: Option<i64>, default: i64| {
        let defaults = Renewal::with_default_renewal(duration.unwrap_or(default));
        Renewal {
            renew_before: renew_before.unwrap_or(defaults.renew_before),
            ..defaults
        }
    };
    let rotation = Rotation {
        ca: renewal(ca_duration, ca_renew_before, DEFAULT_CA_SECONDS),
        server: renewal(server_duration, server_renew_before, DEFAULT_SERVER_SECONDS),
    };
    check(&rotation, &mut errors);
    if errors.is_empty() {
        Ok(rotation)
    } else {
        Err(RotationError(errors))
    }
}

/// Upstream's checks of the lifetimes, then ours.
fn check(rotation: &Rotation, errors: &mut Vec<String>) {
    let Rotation { ca, server } = rotation;
    if ca.duration < ca.renew_before {
        errors.push("CA RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.ca.duration < spec.certificateRotationStrategy.selfSigned.ca.renewBefore)".to_owned());
    }
    if server.duration < server.renew_before {
        errors.push("Cert RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.server.duration < spec.certificateRotationStrategy.selfSigned.server.renewBefore)".to_owned());
    }
    if server.duration > ca.duration {
        errors.push("Certificate duration cannot exceed CA (spec.certificateRotationStrategy.selfSigned.server.duration > spec.certificateRotationStrategy.selfSigned.ca.duration)".to_owned());
    }
    for (name, renewal) in [("ca", ca), ("server", server)] {
        if renewal.duration <= 0 {
            errors.push(format!("{FIELD}.{name}.duration: must be at least a second"));
        } else if renewal.duration > MAX_SECONDS {
            errors.push(format!("{FIELD}.{name}.duration: must be at most 100 years"));
        } else if renewal.renew_before == renewal.duration {
            errors.push(format!(
                "{FIELD}.{name}.renewBefore: must be shorter than the duration, or every certificate is due as soon as it is made"
            ));
        }
    }
}

#[cfg(test)]
#[path = "certificate_rotation_tests.rs"]
mod tests;
