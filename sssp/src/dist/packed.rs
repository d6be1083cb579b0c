//! Batches between processes as packed fixed-size little-endian records:
//! one length-prefixed byte string on the wire, copied in and out with no
//! per-field encoding (a generic serde sequence would encode every field
//! of every record). Within a process batches move as vectors and never
//! come here.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::part::Relax;
use crate::graph::Arc;

/// A record with a fixed little-endian layout.
pub trait Record: Copy + Sized {
    /// Bytes per record.
    const SIZE: usize;
    /// Writes the record into `out` (`SIZE` bytes).
    fn put(&self, out: &mut [u8]);
    /// Reads a record from `b` (`SIZE` bytes).
    fn get(b: &[u8]) -> Self;
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl Record for Relax {
    const SIZE: usize = 16;
    fn put(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.v.to_le_bytes());
        out[4..8].copy_from_slice(&self.p.to_le_bytes());
        out[8..16].copy_from_slice(&self.d.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        Relax { v: u32_at(b, 0), p: u32_at(b, 4), d: f64::from_le_bytes(b[8..16].try_into().expect("8 bytes")) }
    }
}

impl Record for Arc {
    const SIZE: usize = 12;
    fn put(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.from.to_le_bytes());
        out[4..8].copy_from_slice(&self.to.to_le_bytes());
        out[8..12].copy_from_slice(&self.w.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        Arc { from: u32_at(b, 0), to: u32_at(b, 4), w: f32::from_bits(u32_at(b, 8)) }
    }
}

/// A batch packed for another process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed(pub Vec<u8>);

/// A packed batch whose length is not a whole number of records.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("a packed batch of {len} bytes is not a whole number of {size}-byte records")]
pub struct Torn {
    /// Bytes received.
    pub len: usize,
    /// Record size.
    pub size: usize,
}

impl Packed {
    /// Packs `batch`.
    pub fn pack<M: Record>(batch: &[M]) -> Packed {
        let mut bytes = vec![0u8; batch.len() * M::SIZE];
        for (m, out) in batch.iter().zip(bytes.chunks_exact_mut(M::SIZE)) {
            m.put(out);
        }
        Packed(bytes)
    }

    /// Unpacks the records.
    pub fn unpack<M: Record>(&self) -> Result<Vec<M>, Torn> {
        if !self.0.len().is_multiple_of(M::SIZE) {
            return Err(Torn { len: self.0.len(), size: M::SIZE });
        }
        Ok(self.0.chunks_exact(M::SIZE).map(M::get).collect())
    }
}

impl Serialize for Packed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Packed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = Packed;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a packed batch of records")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Packed, E> {
                Ok(Packed(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Packed, E> {
                Ok(Packed(v))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Packed, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(b) = seq.next_element()? {
                    v.push(b);
                }
                Ok(Packed(v))
            }
        }
        d.deserialize_byte_buf(Bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn records_round_trip_through_postcard() {
        let relax = vec![Relax { v: 7, d: 0.125, p: u32::MAX }, Relax { v: 0, d: f64::INFINITY, p: 3 }];
        let p = Packed::pack(&relax);
        assert_eq!(p.0.len(), 32);
        let wire = postcard::to_allocvec(&p).unwrap();
        // One length byte, then the records as they are.
        assert_eq!(wire.len(), 33);
        let back: Packed = postcard::from_bytes(&wire).unwrap();
        assert_eq!(back.unpack::<Relax>().unwrap(), relax);
        let arcs = vec![Arc { from: 1, to: 2, w: 0.5 }];
        assert_eq!(Packed::pack(&arcs).unpack::<Arc>().unwrap(), arcs);
        assert_eq!(Packed(vec![0; 13]).unpack::<Arc>(), Err(Torn { len: 13, size: 12 }));
    }

    proptest! {
        /// Any bytes from another process decode to records or to `Torn`,
        /// never to a panic, and valid ones re-pack to the same bytes.
        #[test]
        fn any_bytes_unpack_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let p = Packed(bytes.clone());
            match p.unpack::<Relax>() {
                Ok(r) => prop_assert_eq!(Packed::pack(&r).0, bytes.clone()),
                Err(t) => prop_assert_eq!(t.len % 16 != 0, true),
            }
            match p.unpack::<Arc>() {
                Ok(a) => prop_assert_eq!(Packed::pack(&a).0, bytes),
                Err(t) => prop_assert_eq!(t.len % 12 != 0, true),
            }
            let wire = postcard::to_allocvec(&p).unwrap();
            let _ = postcard::from_bytes::<Packed>(&wire[..wire.len() / 2]);
        }
    }
}
