//! Applying only what changed: an operator renders every object on every pass, but an apply of an
//! object the API server already holds as wanted is a request through admission for nothing. So
//! the live object is read first, and applied only when it does not hold the desired one.
//!
//! "Holds" is server-side apply's view of an object: every field the desired object sets is in
//! the live one with the same value (numbers compared as numbers: a schema's `0.0` comes back as
//! `0`); fields only the live object has (defaults the API server filled in, status, what other
//! managers own) do not count. Lists compare item by item and must be as long; a desired `null`
//! is a field not set. A field the operator stops wanting would still be held, so every applied
//! object carries [`DIGEST_ANNOTATION`], a digest of what was wanted: a change of any kind,
//! removals too, changes it, and the apply that follows lets go of the removed fields.
//!
//! An item added by another manager, or a value the API server writes differently (a quantity
//! such as `0.5` stored as `500m`, an empty map it drops), makes an apply that changes nothing, as
//! every pass made before.

use std::fmt::Write as _;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{Desired, Objects, ObjectsError};

/// The annotation with the digest of the object as the operator last wanted it.
pub const DIGEST_ANNOTATION: &str = "kubevirt-rs.io/desired-digest";

/// Whether `live` has every field of `desired`, with the same value.
#[must_use]
pub fn holds(live: &Value, desired: &Value) -> bool {
    if desired.is_null() {
        return true;
    }
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => desired
            .iter()
            .all(|(key, want)| live.get(key).map_or(want.is_null(), |have| holds(have, want))),
        (Value::Array(live), Value::Array(desired)) => {
            live.len() == desired.len() && live.iter().zip(desired).all(|(have, want)| holds(have, want))
        }
        (Value::Number(have), Value::Number(want)) => have == want || have.as_f64() == want.as_f64(),
        (live, desired) => live == desired,
    }
}

/// `desired` with [`DIGEST_ANNOTATION`] set to a digest of it.
///
/// # Errors
/// [`ObjectsError::Convert`] when it does not serialize.
pub fn with_digest(desired: &Desired) -> Result<Desired, ObjectsError> {
    let text = serde_json::to_string(&desired.object).map_err(|source| ObjectsError::Convert {
        what: desired.describe(),
        source,
    })?;
    let digest = Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        });
    let mut stamped = desired.clone();
    stamped
        .object
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(DIGEST_ANNOTATION.to_owned(), digest);
    Ok(stamped)
}

/// Applies `desired` (with [`DIGEST_ANNOTATION`]) unless the live object holds it already;
/// whether it applied.
///
/// # Errors
/// [`ObjectsError`] when the read or the apply fails.
pub async fn apply_if_changed<O: Objects>(objects: &O, desired: &Desired) -> Result<bool, ObjectsError> {
    let stamped = with_digest(desired)?;
    let live = objects
        .get(&desired.resource, desired.namespace.as_deref(), &desired.name)
        .await?;
    if let Some(live) = live {
        let as_json = |object| {
            serde_json::to_value(object).map_err(|source| ObjectsError::Convert {
                what: desired.describe(),
                source,
            })
        };
        if holds(&as_json(&live)?, &as_json(&stamped.object)?) {
            return Ok(false);
        }
    }
    objects.apply(&stamped).await?;
    Ok(true)
}

/// [`apply_if_changed`] for each of `wanted`, in order; the first failure stops. How many were
/// applied.
///
/// # Errors
/// The first [`ObjectsError`].
pub async fn apply_all_changed<O: Objects>(objects: &O, wanted: &[Desired]) -> Result<usize, ObjectsError> {
    let mut applied = 0;
    for desired in wanted {
        if apply_if_changed(objects, desired).await? {
            applied += 1;
        }
    }
    Ok(applied)
}

#[cfg(test)]
#[path = "unchanged_tests.rs"]
mod tests;
