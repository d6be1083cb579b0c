//! A `Trust` as data: serializing a trust hands over a new clone of it, so
//! trusts can travel as `apply_with` arguments, results, and (between
//! processes) wherever serialized data goes.

use std::marker::PhantomData;
use std::ptr::NonNull;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::property::PropertyCell;
use super::Trust;
use crate::runtime::context;

/// What a serialized trust carries: its trustee, the property's address in
/// the trustee's address space, and the id of the clone in transit.
#[derive(Serialize, Deserialize)]
struct Token {
    trustee: u32,
    cell: u64,
    id: u64,
}

impl<T: Send + 'static> Serialize for Trust<T> {
    /// Clones the trust (toggling the clone's id in) and writes the clone
    /// out; whoever deserializes it owns that clone.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let clone = self.clone();
        let token =
            Token { trustee: clone.trustee, cell: clone.cell.as_ptr().expose_provenance() as u64, id: clone.id };
        std::mem::forget(clone);
        token.serialize(s)
    }
}

impl<'de, T: Send + 'static> Deserialize<'de> for Trust<T> {
    /// Takes ownership of the clone a serialized trust carries. Must run on
    /// a worker thread of the runtime that owns the property.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let token = Token::deserialize(d)?;
        let w = context::current()
            .ok_or_else(|| serde::de::Error::custom("a Trust can only be deserialized on a thread of the runtime"))?;
        let cell = NonNull::new(std::ptr::with_exposed_provenance_mut::<PropertyCell<T>>(token.cell as usize))
            .ok_or_else(|| serde::de::Error::custom("null property address in a serialized Trust"))?;
        Ok(Trust { cell, trustee: token.trustee, runtime: w.shared.id, id: token.id, _owns: PhantomData })
    }
}
