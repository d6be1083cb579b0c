//! A `Trust` as data: serializing a trust hands over a new clone of it, so
//! trusts can travel inside `apply_with` arguments, results and
//! `spawn_with` arguments to another process.
//!
//! A trust holds the address of its property in the trustee's address
//! space, so turning bytes back into a trust must never accept an address
//! (or an id, or a type) that gossamer did not put there. A serialized trust
//! is therefore a *token*: trustee, address and the id of the clone in
//! transit, with a tag — SipHash-2-4 keyed by the program's secret key (made
//! at start-up, shared by the program's processes, never sent elsewhere) over
//! those fields, the property type's `TypeId` and the nonce of the message
//! the token travels in. A token is accepted only
//! * while gossamer decodes a message it received, in the fiber that
//!   decodes it (never from a user's own `postcard::from_bytes` or
//!   `serde_json`, nor from another fiber: that is an error; see
//!   `channel::transfer` for why contexts belong to one message),
//! * with a tag that checks out: a forged token, one from another program or
//!   runtime, or one read as `Trust<U>` when it was written as `Trust<T>`
//!   is an error,
//! * from the message it was made for, and once: a token copied into a
//!   later message, or deserialized twice from one message (as serde's
//!   untagged enums may try to), is an error.
//!
//! So every token becomes at most one trust, which owns the clone in
//! transit, and the property lives until that trust is gone, as for any
//! clone. A token that never becomes a trust only leaks its property.
//! Serializing a trust outside gossamer's own encoding is an error too.

use std::any::TypeId;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::ptr::NonNull;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use siphasher::sip::SipHasher24;

use super::property::PropertyCell;
use super::Trust;
use crate::channel::transfer::{self, Nonce};
use crate::runtime::context;

/// What a serialized trust carries.
#[derive(Serialize, Deserialize)]
struct Token {
    trustee: u32,
    cell: u64,
    id: u64,
    tag: u64,
}

/// The token's tag: a keyed MAC binding its fields to the program, the
/// message and the property's type.
fn tag<T: 'static>(key: [u64; 2], nonce: Nonce, trustee: u32, cell: u64, id: u64) -> u64 {
    let mut h = SipHasher24::new_with_keys(key[0], key[1]);
    nonce.hash(&mut h);
    trustee.hash(&mut h);
    cell.hash(&mut h);
    id.hash(&mut h);
    TypeId::of::<T>().hash(&mut h);
    h.finish()
}

/// A serialization error saying `why` (also recorded for gossamer's own
/// message, since some formats drop the text).
fn refuse<E: serde::ser::Error>(why: &'static str) -> E {
    transfer::note_refusal(why);
    E::custom(why)
}

/// As [`refuse`], for deserialization.
fn refuse_de<E: serde::de::Error>(why: &'static str) -> E {
    transfer::note_refusal(why);
    E::custom(why)
}

impl<T: Send + 'static> Serialize for Trust<T> {
    /// Clones the trust (toggling the clone's id in) and writes the clone
    /// out as a token bound to the message being encoded; whoever
    /// deserializes it from that message owns that clone.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            // Not gossamer's own format (postcard): a user's `serde_json`
            // call, even from inside a message being encoded.
            return Err(refuse::<S::Error>(transfer::Refusal::Outside.message()));
        }
        let w = context::current()
            .filter(|w| w.shared.id == self.runtime)
            .ok_or_else(|| refuse::<S::Error>("a Trust can only be serialized on a thread of its own runtime"))?;
        let nonce = transfer::encoding_nonce().map_err(|r| refuse::<S::Error>(r.message()))?;
        let clone = self.clone();
        let cell = clone.cell.as_ptr().expose_provenance() as u64;
        let token = Token {
            trustee: clone.trustee,
            cell,
            id: clone.id,
            tag: tag::<T>(w.shared.placement.key, nonce, clone.trustee, cell, clone.id),
        };
        std::mem::forget(clone);
        token.serialize(s)
    }
}

impl<'de, T: Send + 'static> Deserialize<'de> for Trust<T> {
    /// Takes ownership of the clone a token carries, after checking it (see
    /// the module documentation). Runs on a worker thread of the program.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return Err(refuse_de::<D::Error>(transfer::Refusal::Outside.message()));
        }
        let token = Token::deserialize(d)?;
        let w = context::current()
            .ok_or_else(|| refuse_de::<D::Error>("a Trust can only be deserialized on a thread of the runtime"))?;
        let nonce = transfer::decoding_nonce().map_err(|r| refuse_de::<D::Error>(r.message()))?;
        if tag::<T>(w.shared.placement.key, nonce, token.trustee, token.cell, token.id) != token.tag {
            return Err(refuse_de::<D::Error>(
                "a Trust token that this program did not send in this message (forged, copied from another message, \
                 from another program or runtime, or read as a different property type)",
            ));
        }
        if token.trustee as usize >= w.shared.n {
            return Err(refuse_de::<D::Error>("a Trust token names a thread the program does not have"));
        }
        transfer::take_token(token.id).map_err(|r| refuse_de::<D::Error>(r.message()))?;
        let cell = NonNull::new(std::ptr::with_exposed_provenance_mut::<PropertyCell<T>>(token.cell as usize))
            .ok_or_else(|| refuse_de::<D::Error>("null property address in a serialized Trust"))?;
        Ok(Trust { cell, trustee: token.trustee, runtime: w.shared.id, id: token.id, _owns: PhantomData })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::channel::remote::{try_deserialize, with_serialized};

    fn runtime() -> crate::Runtime {
        crate::Runtime::builder().workers(2).build().unwrap()
    }

    /// The framed bytes gossamer would send for `v`.
    fn sent<V: Serialize + 'static>(v: &V) -> Vec<u8> {
        with_serialized(v, <[u8]>::to_vec)
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime with fibers")]
    fn a_trust_crosses_inside_gossamer_messages_and_owns_its_clone() {
        runtime().block_on(|| {
            let t = crate::local_trustee().entrust(5u64);
            let bytes = sent(&(t.clone(), 1u8));
            let (back, one): (Trust<u64>, u8) = try_deserialize(&bytes).unwrap();
            assert_eq!((back.apply(|v| *v), one), (5, 1));
            drop(t);
            assert_eq!(back.apply(|v| *v + 1), 6, "the received clone keeps the property alive");
        });
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime with fibers")]
    fn other_serializers_cannot_write_or_read_a_trust() {
        runtime().block_on(|| {
            let t = crate::local_trustee().entrust(5u64);
            assert!(postcard::to_stdvec(&t).is_err());
            assert!(crate::channel::transfer::take_refusal().unwrap().contains("only by gossamer itself"));
            let e = serde_json::to_string(&t).unwrap_err().to_string();
            assert!(e.contains("only by gossamer itself"), "{e}");
            let framed = sent(&t);
            let body = &framed[..framed.len() - 17];
            let e = postcard::from_bytes::<Trust<u64>>(body).unwrap_err();
            assert!(matches!(e, postcard::Error::SerdeDeCustom), "{e:?}");
        });
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime with fibers")]
    fn a_token_is_refused_twice_in_one_message_and_in_another_message() {
        runtime().block_on(|| {
            let t = crate::local_trustee().entrust(5u64);
            let framed = sent(&t);
            let (token, trailer) = framed.split_at(framed.len() - 17);
            // The same token twice in its own message.
            let twice: Vec<u8> = [token, token, trailer].concat();
            let e = try_deserialize::<(Trust<u64>, Trust<u64>)>(&twice).unwrap_err();
            assert!(e.contains("deserialized twice"), "{e}");
            // The token copied into another message (which carries a trust
            // of its own, so it has a nonce).
            let other = sent(&t.clone());
            let (_, other_trailer) = other.split_at(other.len() - 17);
            let replayed: Vec<u8> = [token, other_trailer].concat();
            let e = try_deserialize::<Trust<u64>>(&replayed).unwrap_err();
            assert!(e.contains("did not send in this message"), "{e}");
            // In a message that carried no trust at all.
            let bare: Vec<u8> = [token, &[0u8][..]].concat();
            let e = try_deserialize::<Trust<u64>>(&bare).unwrap_err();
            assert!(e.contains("forged"), "{e}");
            // The genuine message still works, once.
            let ok: Trust<u64> = try_deserialize(&framed).unwrap();
            assert_eq!(ok.apply(|v| *v), 5);
        });
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime with fibers")]
    fn a_token_read_as_another_type_or_altered_is_refused() {
        runtime().block_on(|| {
            let t = crate::local_trustee().entrust(5u64);
            let framed = sent(&t);
            let e = try_deserialize::<Trust<String>>(&framed).unwrap_err();
            assert!(e.contains("different property type"), "{e}");
            // Flip one bit of the address inside the token.
            let mut forged = framed.clone();
            forged[2] ^= 0x10;
            assert!(try_deserialize::<Trust<u64>>(&forged).is_err());
        });
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs two runtimes with fibers")]
    fn a_token_from_another_runtime_is_refused() {
        let framed = runtime().block_on(|| {
            let t = crate::local_trustee().entrust(5u64);
            let bytes = sent(&t);
            std::mem::forget(t);
            bytes
        });
        runtime().block_on(move || {
            let e = try_deserialize::<Trust<u64>>(&framed).unwrap_err();
            assert!(e.contains("from another program or runtime"), "{e}");
        });
    }
}
