//! Arithmetic on Kubernetes resource quantities (`128Mi`, `1.5G`, `400m`, `1e3`).
//!
//! k8s-openapi keeps a quantity as the string the user wrote; the components need its value. A
//! quantity is read exactly, as a fraction, so `2222222200m` is 2222222.2 and rounds as upstream
//! rounds it in each place it is used.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Why a quantity cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not of the form `<number><suffix>`.
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}")]
    Malformed(String),
    /// Too large to represent.
    #[error("quantity {0:?} is too large")]
    Overflow(String),
}

/// A quantity's exact value, `numerator / denominator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedQuantity {
    numerator: i128,
    denominator: i128,
}

impl ParsedQuantity {
    /// Parses a quantity string.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let malformed = || QuantityError::Malformed(text.to_owned());
        let overflow = || QuantityError::Overflow(text.to_owned());
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(malformed());
        }
        let mut numerator: i128 = 0;
        for digit in whole.bytes().chain(fraction.bytes()) {
            numerator = numerator
                .checked_mul(10)
                .and_then(|n| n.checked_add(i128::from(digit - b'0')))
                .ok_or_else(overflow)?;
        }
        let mut exponent = -i32::try_from(fraction.len()).map_err(|_| overflow())?;
        let mut binary: i128 = 1;
        match suffix {
            "" => {}
            "Ki" => binary = 1 << 10,
            "Mi" => binary = 1 << 20,
            "Gi" => binary = 1 << 30,
            "Ti" => binary = 1 << 40,
            "Pi" => binary = 1 << 50,
            "Ei" => binary = 1 << 60,
            "n" => exponent -= 9,
            "u" => exponent -= 6,
            "m" => exponent -= 3,
            "k" => exponent += 3,
            "M" => exponent += 6,
            "G" => exponent += 9,
            "T" => exponent += 12,
            "P" => exponent += 15,
            "E" => exponent += 18,
            _ => {
                let digits = suffix.strip_prefix(['e', 'E']).ok_or_else(malformed)?;
                let value: i32 = digits.parse().map_err(|_| malformed())?;
                exponent = exponent.checked_add(value).ok_or_else(overflow)?;
            }
        }
        numerator = numerator.checked_mul(binary).ok_or_else(overflow)?;
        let mut denominator: i128 = 1;
        let scale = 10i128.checked_pow(exponent.unsigned_abs()).ok_or_else(overflow)?;
        if exponent >= 0 {
            numerator = numerator.checked_mul(scale).ok_or_else(overflow)?;
        } else {
            denominator = scale;
        }
        if negative {
            numerator = -numerator;
        }
        Ok(Self { numerator, denominator })
    }

    /// The value rounded down to an integer.
    #[must_use]
    pub fn floor(self) -> i128 {
        self.numerator.div_euclid(self.denominator)
    }

    /// The value rounded up to an integer.
    #[must_use]
    pub fn ceil(self) -> i128 {
        -(-self.numerator).div_euclid(self.denominator)
    }

    /// The value in thousandths, rounded up (CPU millicores).
    #[must_use]
    pub fn milli_ceil(self) -> i128 {
        -(-self.numerator.saturating_mul(1000)).div_euclid(self.denominator)
    }

    /// Whether the value is below zero.
    #[must_use]
    pub fn is_negative(self) -> bool {
        self.numerator < 0
    }
}

/// Parses a k8s-openapi quantity.
pub fn parse(quantity: &Quantity) -> Result<ParsedQuantity, QuantityError> {
    ParsedQuantity::parse(&quantity.0)
}

/// A memory quantity in bytes, truncated to an integer, as upstream's `QuantityToByte`.
pub fn to_bytes(quantity: &Quantity) -> Result<u64, QuantityError> {
    let value = parse(quantity)?.floor();
    u64::try_from(value.max(0)).map_err(|_| QuantityError::Overflow(quantity.0.clone()))
}

/// Whether a quantity is written with a binary suffix (`Ki`, `Mi`, ...).
#[must_use]
pub fn is_binary(quantity: &Quantity) -> bool {
    quantity.0.trim_end().ends_with('i')
}

/// A byte count in Kubernetes' canonical form: the largest suffix that divides it exactly, binary
/// (`Mi`) or decimal (`M`).
#[must_use]
pub fn format(value: i128, binary: bool) -> String {
    let (base, suffixes): (i128, &[&str]) = if binary {
        (1024, &["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
    } else {
        (1000, &["k", "M", "G", "T", "P", "E"])
    };
    let mut value = value;
    let mut suffix = "";
    for s in suffixes {
        if value == 0 || value % base != 0 {
            break;
        }
        value /= base;
        suffix = s;
    }
    format!("{value}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_take_the_largest_exact_suffix() {
        assert_eq!(format(1024 * 1024 * 1024, true), "1Gi");
        assert_eq!(format(715_827_882, true), "715827882");
        assert_eq!(format(1536 * 1024 * 1024, true), "1536Mi");
        assert_eq!(format(64_000_000, false), "64M");
        assert_eq!(format(0, false), "0");
    }

    fn bytes(text: &str) -> u64 {
        to_bytes(&Quantity(text.to_owned())).expect(text)
    }

    #[test]
    fn binary_and_decimal_suffixes_scale_as_kubernetes_does() {
        assert_eq!(bytes("8192Ki"), 8_388_608);
        assert_eq!(bytes("123Mi"), 128_974_848);
        assert_eq!(bytes("1Gi"), 1 << 30);
        assert_eq!(bytes("1024M"), 1_024_000_000);
        assert_eq!(bytes("1.5Gi"), 1_610_612_736);
        assert_eq!(bytes("1e3"), 1000);
        assert_eq!(bytes("2E"), 2_000_000_000_000_000_000);
    }

    #[test]
    fn fractional_memory_is_truncated_like_upstream() {
        assert_eq!(bytes("2222222200m"), 2_222_222);
    }

    #[test]
    fn cpu_quantities_round_up_to_whole_cpus() {
        let cpus = |t: &str| ParsedQuantity::parse(t).map(ParsedQuantity::ceil);
        assert_eq!(cpus("2200m"), Ok(3));
        assert_eq!(cpus("2.3"), Ok(3));
        assert_eq!(cpus("400m"), Ok(1));
        assert_eq!(cpus("2"), Ok(2));
        assert_eq!(ParsedQuantity::parse("500m").map(ParsedQuantity::milli_ceil), Ok(500));
    }

    #[test]
    fn malformed_quantities_are_errors_not_panics() {
        for text in ["", "Mi", "1.2.3", "12X", "1e", "--1", "1e99999999999"] {
            assert!(ParsedQuantity::parse(text).is_err(), "{text:?}");
        }
        assert!(ParsedQuantity::parse("99999999999999999999999999999999999999999Ei").is_err());
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(text in "\\PC{0,24}") {
            let _ = ParsedQuantity::parse(&text);
        }
    }
}
