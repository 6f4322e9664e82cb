//! Go durations (`48h`, `1h30m`, `90s`, `1.5h`), as operator CRs give them (`metav1.Duration`:
//! the CDI CR's `certConfig`, the KubeVirt CR's `certificateRotateStrategy`), read to whole
//! seconds.

/// Why a duration was not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {value:?} is not a duration such as 48h, 1h30m or 90s")]
pub struct DurationError {
    /// The field it came from.
    pub field: String,
    /// What it said.
    pub value: String,
}

/// Seconds per unit; the units below a second count their fraction of one.
fn unit_seconds(unit: &str) -> Option<f64> {
    Some(match unit {
        "h" => 3600.0,
        "m" => 60.0,
        "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" | "μs" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    })
}

/// `value` (from `field`) in whole seconds, rounded down; negative durations are refused, as no
/// certificate lives a negative time.
///
/// # Errors
/// [`DurationError`] when it is not a Go duration, or is negative.
pub fn seconds(field: &str, value: &str) -> Result<i64, DurationError> {
    let error = || DurationError {
        field: field.to_owned(),
        value: value.to_owned(),
    };
    let body = value.strip_prefix('+').unwrap_or(value);
    if body == "0" {
        return Ok(0);
    }
    if body.is_empty() {
        return Err(error());
    }
    let mut total = 0.0_f64;
    let mut rest = body;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(error)?;
        let (number, after) = rest.split_at(number_end);
        let number: f64 = number.parse().map_err(|_| error())?;
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        total += number * unit_seconds(unit).ok_or_else(error)?;
        rest = after;
    }
    if !total.is_finite() || total > 1e12 {
        return Err(error());
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "finite, at most 1e12, rounded down on purpose"
    )]
    Ok(total.floor() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_to_whole_seconds() {
        for (text, want) in [
            ("48h", 172_800),
            ("48h0m0s", 172_800),
            ("1h30m", 5_400),
            ("90s", 90),
            ("1.5h", 5_400),
            ("0", 0),
            ("2500ms", 2),
            ("+10m", 600),
        ] {
            assert_eq!(seconds("f", text), Ok(want), "{text}");
        }
    }

    #[test]
    fn anything_else_is_refused_naming_the_field() {
        for text in ["", "48", "h", "-1h", "1d", "1h 30m", "1..5h", "ten"] {
            let error = seconds("spec.certConfig.ca.duration", text).expect_err(text);
            assert!(
                error.to_string().starts_with("spec.certConfig.ca.duration: "),
                "{error}"
            );
        }
    }
}
