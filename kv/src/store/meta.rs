//! Meta-protocol requests (`mg`, `ms`, `md`, `ma`, `me`) as a shard runs
//! them: plain owned data, like every [`super::Op`].
//!
//! memcached applies some flags and writes the return flags in the order
//! the client gave them (`t` before `T` shows the old TTL, after it the
//! new one), so a request keeps its flags in order as [`MetaFlag`]s next
//! to the values they carry.

use serde::{Deserialize, Serialize};

use super::op::StoreMode;

/// Which meta command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaKind {
    /// `mg`
    Get,
    /// `ms`, with its mode (already upgraded to `Cas` when a CAS value was
    /// given in set or replace mode) and its value.
    Set {
        /// The store mode.
        mode: StoreMode,
        /// The value.
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// `md`
    Delete,
    /// `ma`
    Arith {
        /// Increment (true) or decrement.
        incr: bool,
    },
    /// `me`
    Debug,
    /// `ms` whose value did not end in `\r\n`: memcached counts the
    /// store (`cmd_set`) before it finds out, then answers
    /// `CLIENT_ERROR bad data chunk`.
    BadChunk,
}

/// A flag whose place among the others matters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaFlag {
    /// `O<token>`: copied back whole (the `O` included).
    Opaque(Vec<u8>),
    /// `k`: return the key.
    Key,
    /// `c`: return the CAS value.
    Cas,
    /// `t`: return the remaining TTL.
    Ttl,
    /// `T`: set the TTL.
    SetTtl,
    /// `N`: vivify on miss (applies the TTL when the item was created).
    Vivify,
    /// `R`: recache-win test.
    Recache,
    /// `s`: return the value size.
    Size,
    /// `f`: return the client flags.
    Flags,
    /// `l`: return the seconds since the last access.
    LastAccess,
    /// `h`: return whether the item was fetched before.
    Hit,
}

/// Longest opaque token memcached copies back (the `O` included).
pub const OPAQUE_MAX: usize = 32;

/// One meta request for a shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaOp {
    /// The command.
    pub kind: MetaKind,
    /// The key (decoded, for `b`).
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// The key was given in base64 (`b`): return it encoded.
    pub key_binary: bool,
    /// Flags in request order.
    pub flags: Vec<MetaFlag>,
    /// `v`: return the value.
    pub value: bool,
    /// `q`: suppress the nominal reply.
    pub quiet: bool,
    /// `u`: do not bump the item.
    pub no_update: bool,
    /// `I`: invalidate (md) or allow a stale CAS store (ms).
    pub invalidate: bool,
    /// `T<n>`: client expiration time.
    pub ttl: Option<i64>,
    /// `N<n>`: client expiration time of a vivified item.
    pub vivify: Option<i64>,
    /// `R<n>`: recache threshold, a client expiration time.
    pub recache: Option<i64>,
    /// `C<n>`: CAS value to compare.
    pub cas: Option<u64>,
    /// `F<n>`: client flags (ms).
    pub client_flags: u32,
    /// `D<n>`: delta (ma).
    pub delta: u64,
    /// `J<n>`: initial value (ma).
    pub initial: u64,
}

impl MetaOp {
    /// A request of `kind` on `key` with no flags.
    pub fn new(kind: MetaKind, key: Vec<u8>) -> MetaOp {
        MetaOp {
            kind,
            key,
            key_binary: false,
            flags: Vec::new(),
            value: false,
            quiet: false,
            no_update: false,
            invalidate: false,
            ttl: None,
            vivify: None,
            recache: None,
            cas: None,
            client_flags: 0,
            delta: 1,
            initial: 0,
        }
    }
}
