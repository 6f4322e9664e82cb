//! Objects kept as their JSON: a cached VMI costs about a kilobyte instead of the several its
//! decoded form takes, which is what lets one controller hold tens of thousands. Decoded on use.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// One object, serialized.
#[derive(Debug)]
pub struct Compact<T> {
    json: Arc<[u8]>,
    kind: PhantomData<fn() -> T>,
}

impl<T> Clone for Compact<T> {
    fn clone(&self) -> Self {
        Self {
            json: self.json.clone(),
            kind: PhantomData,
        }
    }
}

impl<T: Serialize + DeserializeOwned> Compact<T> {
    /// Keeps `object`. (API types always serialize; one that did not would read back as `None`.)
    pub fn new(object: &T) -> Self {
        Self {
            json: serde_json::to_vec(object).unwrap_or_default().into(),
            kind: PhantomData,
        }
    }

    /// Its size as kept, in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.json.len()
    }

    /// Nothing is kept (the object did not serialize).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.json.is_empty()
    }

    /// The object, decoded.
    #[must_use]
    pub fn get(&self) -> Option<T> {
        serde_json::from_slice(&self.json).ok()
    }
}

#[cfg(test)]
mod tests {
    use kubevirt_api::v1::VirtualMachineInstance;

    use super::*;

    #[test]
    fn an_object_comes_back_as_it_was_kept() {
        let mut vmi = VirtualMachineInstance::default();
        vmi.metadata.name = Some("vm".to_owned());
        let kept = Compact::new(&vmi);
        assert_eq!(kept.clone().get(), Some(vmi));
    }
}
