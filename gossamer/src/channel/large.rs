//! Values larger than a pair's bulk area, between processes and hosts.
//!
//! **Arguments** (client to trustee) are cut into chunks that each fit the
//! bulk area. Each chunk travels as a runtime request of its own
//! ([`append_shim`]) that appends it to the trustee's assembly buffer for
//! that client; the request that uses the argument follows them and names
//! the assembled bytes instead of carrying a tail. Requests from one client
//! to one trustee run in the order they were queued, and the chunks and
//! their request are queued together, so no other request's chunks
//! interleave.
//!
//! **Results** (trustee to client) that do not fit what is left of the bulk
//! area are kept in the trustee's outbox; the response says where
//! ([`LargeResult`]), and the waiting fiber pulls the bytes chunk by chunk
//! ([`pull_shim`]) before deserializing them. A `then` callback whose result
//! is pulled this way runs once the pull is done — after callbacks of later
//! small results, unlike every other callback.
//!
//! Both buffers live on the trustee's thread (thread-locals of the worker
//! threads, where all shims run).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::thread;

use super::record::{tail_bytes, take_env, Responder};
use super::slot::Word;

/// Bit of a tail's length word: the bytes are the assembly buffer of the
/// client, filled by the chunks that preceded this request.
pub(crate) const TAIL_ASSEMBLED: u64 = 1 << 62;

/// Bytes of one chunk when the bulk area has `bulk` bytes: room is left for
/// the serialized length and framing of a pulled chunk.
pub(crate) fn chunk_bytes(bulk: usize) -> usize {
    (bulk / 2).max(1)
}

thread_local! {
    /// Per client: the argument being assembled.
    static ASSEMBLY: RefCell<HashMap<usize, Vec<u8>>> = RefCell::new(HashMap::new());
    /// Results waiting to be pulled, by id.
    static OUTBOX: RefCell<HashMap<u64, Vec<u8>>> = RefCell::new(HashMap::new());
    static NEXT_ID: Cell<u64> = const { Cell::new(1) };
}

/// A result too large for the response: where to pull it from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LargeResult {
    /// The trustee that holds it.
    pub(crate) trustee: usize,
    /// Its id in the trustee's outbox.
    pub(crate) id: u64,
    /// Its length in bytes.
    pub(crate) len: usize,
}

/// Appends a chunk to the assembly buffer of the requesting client (runs
/// on the trustee). The environment is `(offset, total)`; the tail is the
/// chunk.
///
/// # Safety
/// As for any shim: `env` holds what `Worker::enqueue_chunked` encoded.
///
/// The offset and total come from the client's process: a chunk that is
/// not the next one, that goes past the total, or whose total cannot be
/// reserved is refused (an error to the client), and the assembly dropped.
pub(crate) unsafe fn append_shim(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded with this shim: an `(u64, u64)` environment and a
    // tail, both read only inside the record.
    let decoded = unsafe {
        take_env::<(u64, u64)>(env as *const Word, out)
            .and_then(|e| tail_bytes((env as *const Word).add(2), out).map(|b| (e, b)))
    };
    let ((offset, total), tail) = match decoded {
        Ok(d) => d,
        Err(m) => return out.put_any::<()>(Err(Box::new(m))),
    };
    let Some(client) = out.remote().map(|f| f.client) else {
        return out.put_any::<()>(Err(Box::new("gossamer: a chunk from this process".to_string())));
    };
    let bytes = tail.bytes();
    let r = ASSEMBLY.with(|a| {
        let mut a = a.borrow_mut();
        let buf = a.entry(client).or_default();
        if offset == 0 {
            buf.clear();
            let total = usize::try_from(total).map_err(|_| "its total is out of range")?;
            buf.try_reserve_exact(total).map_err(|_| "its total cannot be reserved")?;
        }
        if buf.len() as u64 != offset {
            return Err("it is not the next chunk");
        }
        if offset + bytes.len() as u64 > total {
            return Err("it runs past the argument's total");
        }
        buf.extend_from_slice(bytes);
        Ok(())
    });
    match r {
        Ok(()) => out.put_any::<()>(Ok(())),
        Err(why) => {
            ASSEMBLY.with(|a| a.borrow_mut().remove(&client));
            let m =
                format!("gossamer: a chunk of an argument from thread {client} (another process) was refused: {why}");
            out.put_any::<()>(Err(Box::new(m)))
        }
    }
}

/// The argument assembled for `client`, or why it cannot be used (no
/// chunks, or not the length the request claims).
///
/// # Safety
/// The slice stays valid until the next chunk from `client` arrives, which
/// is after the request using it has run: use it only within that request.
pub(crate) unsafe fn assembled<'b>(client: usize, len: usize) -> Result<&'b [u8], &'static str> {
    ASSEMBLY.with(|a| {
        let a = a.borrow();
        let buf = a.get(&client).ok_or("its assembled argument has no chunks")?;
        if buf.len() != len {
            return Err("its assembled argument does not have the length it claims");
        }
        // SAFETY: per the contract, the buffer is not touched while the
        // slice is in use.
        Ok(unsafe { std::slice::from_raw_parts(buf.as_ptr(), buf.len()) })
    })
}

/// Keeps `bytes` for pulling; returns the id.
pub(crate) fn stash(bytes: &[u8]) -> u64 {
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id + 1);
        id
    });
    OUTBOX.with(|o| o.borrow_mut().insert(id, bytes.to_vec()));
    id
}

/// Bytes of a response's framing around a pulled chunk: the serialized
/// length and the trailer (see `transfer`), with room to spare.
const CHUNK_FRAMING: usize = 16;

/// Sends one chunk of a stashed result back (runs on the trustee). The
/// environment is `(id, offset, len)`. The chunk is cut to what is left of
/// this batch's response bulk area, so that it is never stashed in turn (it
/// may be empty: the puller asks again); the last chunk frees the entry.
///
/// # Safety
/// As for any shim.
pub(crate) unsafe fn pull_shim(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded with this shim: an `(u64, u64, u64)` environment,
    // read only inside the record.
    let (id, offset, len) = match unsafe { take_env::<(u64, u64, u64)>(env as *const Word, out) } {
        Ok(e) => e,
        Err(m) => return out.put_any::<serde_bytes_vec::Bytes>(Err(Box::new(m))),
    };
    let room = match out.remote() {
        Some(far) => far.bulk_bytes.saturating_sub(out.bulk_used()).saturating_sub(CHUNK_FRAMING),
        None => usize::MAX,
    };
    let len = len.min(room as u64);
    let r: thread::Result<serde_bytes_vec::Bytes> = OUTBOX.with(|o| {
        let mut o = o.borrow_mut();
        let Some(buf) = o.get(&id) else {
            return Err(Box::new(format!("gossamer: no stashed result {id} to pull")) as Box<dyn std::any::Any + Send>);
        };
        let (from, to) = (offset as usize, offset.saturating_add(len) as usize);
        if from > buf.len() || to > buf.len() || from > to {
            return Err(Box::new(format!("gossamer: a pull past the end of result {id}")) as _);
        }
        let chunk = buf[from..to].to_vec();
        if to == buf.len() {
            o.remove(&id);
        }
        Ok(serde_bytes_vec::Bytes(chunk))
    });
    out.put_any(r);
}

/// Bytes that serialize as one byte string (not element by element).
pub(crate) mod serde_bytes_vec {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// A `Vec<u8>` serialized with `serialize_bytes`.
    pub(crate) struct Bytes(pub(crate) Vec<u8>);

    impl Serialize for Bytes {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }

    impl<'de> Deserialize<'de> for Bytes {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Bytes;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("bytes")
                }
                fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                    Ok(Bytes(v.to_vec()))
                }
                fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                    Ok(Bytes(v))
                }
            }
            d.deserialize_byte_buf(V)
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn stashed_results_are_taken_once_in_chunks() {
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let id = stash(&data);
        assert_ne!(id, stash(b"other"));
        OUTBOX.with(|o| assert_eq!(o.borrow().get(&id).map(Vec::len), Some(1000)));
    }

    #[test]
    fn chunk_size_leaves_room() {
        assert_eq!(chunk_bytes(1 << 20), 1 << 19);
        assert_eq!(chunk_bytes(1), 1);
    }

    #[test]
    fn bytes_round_trip_through_postcard() {
        let b = serde_bytes_vec::Bytes(vec![1, 2, 3, 255]);
        let enc = postcard::to_stdvec(&b).unwrap();
        assert_eq!(enc.len(), 5, "a length and the bytes");
        let back: serde_bytes_vec::Bytes = postcard::from_bytes(&enc).unwrap();
        assert_eq!(back.0, vec![1, 2, 3, 255]);
    }
}
