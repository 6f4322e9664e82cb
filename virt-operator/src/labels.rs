//! The labels every object virt-operator makes carries, upstream's: what its watches and the
//! deletion of the common instance types select on; and the digest its identities are made of.

use std::collections::BTreeMap;

/// The label every object the operator makes carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "virt-operator");
/// The component label upstream's operator puts beside [`MANAGED_BY`] (its `productComponent`,
/// `kubevirt` when unset).
pub const COMPONENT: (&str, &str) = ("app.kubernetes.io/component", "kubevirt");

/// The labels of every object the operator makes.
#[must_use]
pub fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned()),
        (COMPONENT.0.to_owned(), COMPONENT.1.to_owned()),
    ])
}

/// A digest of `text`, as lowercase hex (the install's ID, the customizations' identifier).
#[must_use]
pub fn digest(text: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, b| {
            use std::fmt::Write as _;
            let _ = write!(hex, "{b:02x}");
            hex
        })
}
