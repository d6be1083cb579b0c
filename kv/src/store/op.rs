//! The requests connection workers delegate to a shard, and their results.
//!
//! Requests travel to the shard's trustee through `apply_with`, so they are
//! plain owned data (serializable, as the runtime requires for arguments
//! that may cross processes). Keys and values are marked `serde_bytes`, so
//! that between processes they are copied as byte strings rather than
//! serialized byte by byte. Results come back as copies: a connection
//! worker never touches the table itself.

use serde::{Deserialize, Serialize};

use super::meta::MetaOp;
use super::stats::ShardStats;

/// How a store request treats an existing item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoreMode {
    /// Store unconditionally.
    Set,
    /// Store only if the key is absent.
    Add,
    /// Store only if the key is present.
    Replace,
    /// Add the data after the existing value.
    Append,
    /// Add the data before the existing value.
    Prepend,
    /// Store only if the item's CAS value still matches.
    Cas,
}

/// One delegated request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Op {
    /// Read an item, optionally setting a new expiration time (gat, touch).
    Get {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// New client expiration time, for gat and touch.
        touch: Option<i64>,
        /// Copy the value out (false for touch).
        value: bool,
    },
    /// Store an item.
    Store {
        /// The mode.
        mode: StoreMode,
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// Client flags (ignored by append and prepend).
        flags: u32,
        /// Client expiration time (ignored by append and prepend).
        exptime: i64,
        /// CAS value to compare, or 0.
        cas: u64,
        /// The value.
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// Remove an item (if its CAS value matches, when `cas` is not 0).
    Delete {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// CAS value to compare, or 0.
        cas: u64,
    },
    /// Increment or decrement a decimal value.
    Arith {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// Increment (true) or decrement.
        incr: bool,
        /// The amount.
        delta: u64,
        /// Binary protocol: create a missing item with this initial value
        /// and client expiration time.
        create: Option<(u64, i64)>,
        /// CAS value to compare, or 0.
        cas: u64,
    },
    /// Look at an item without touching it (no statistics, no LRU move):
    /// what memcached's log watchers see of the lookup that a store,
    /// delete or incr/decr makes inside the cache.
    Peek {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
    /// Remove an item without counting it as a delete (after a failed set).
    Unlink {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
    /// Invalidate items: now (`delay` <= 0) or at a later time.
    Flush {
        /// Client expiration time of the flush.
        delay: i64,
    },
    /// A meta command (`mg`, `ms`, `md`, `ma`, `me`).
    Meta(Box<MetaOp>),
    /// Set the server-wide memory limit (`cache_memlimit`); the shard
    /// takes its part.
    MemLimit {
        /// The server-wide limit in bytes.
        total: u64,
    },
    /// List the live items (`lru_crawler metadump`), in memcached's line
    /// format, of the given slab classes or all.
    Dump {
        /// Slab class ids to list; `None` for all.
        classes: Option<Vec<u32>>,
    },
    /// List the live items of one slab class, most recently used first
    /// (`stats cachedump`): records of a little-endian `u32` length and an
    /// `ITEM <key> [<bytes> b; <exptime> s]` line.
    CacheDump {
        /// The slab class.
        class: u32,
        /// At most this many items (0: all).
        limit: u32,
    },
    /// `lru_crawler crawl`: reclaim the expired and flushed items of the
    /// given slab classes or all, counted as the crawler's.
    Crawl {
        /// Slab class ids to crawl; `None` for all.
        classes: Option<Vec<u32>>,
        /// Items to check per class at most (0: all).
        tocrawl: u32,
    },
    /// Read the shard's counters, optionally resetting them.
    Stats {
        /// Reset the counters after reading them.
        reset: bool,
    },
}

/// The most `stats cachedump` answers, as memcached's buffer (its `END`
/// included).
pub const CACHEDUMP_MAX: usize = 2 * 1024 * 1024;

/// A found item, copied out of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    /// The key, handed back.
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// Client flags.
    pub flags: u32,
    /// CAS value.
    pub cas: u64,
    /// The value.
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// The result of an [`Op`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Get: the item.
    Found(Hit),
    /// Get: no such item (the key is handed back).
    Missing(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Store: stored, with the new CAS value.
    Stored {
        /// The new CAS value.
        cas: u64,
    },
    /// Store: the mode's condition failed.
    NotStored,
    /// CAS mismatch.
    Exists,
    /// No such item.
    NotFound,
    /// Delete: removed.
    Deleted,
    /// Arith: the new value and CAS value.
    Number {
        /// The new value.
        value: u64,
        /// The new CAS value.
        cas: u64,
    },
    /// Arith: the item's value is not a decimal number.
    NonNumeric,
    /// The item does not fit in the shard's memory.
    OutOfMemory,
    /// A reply rendered by the shard (meta commands, whose return flags
    /// depend on the item; empty when quiet mode suppresses it).
    Meta(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Stats: the counters.
    Stats(Box<ShardStats>),
    /// Peek: the live item's client flags and value length, if there is one.
    Peeked(Option<(u32, u64)>),
    /// Done, nothing to report (unlink, flush).
    Done,
    /// The request failed inside the shard (a bug; the shard goes on).
    Failed,
}
