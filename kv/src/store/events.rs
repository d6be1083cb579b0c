//! Events of the table that a log watcher may ask for (memcached's
//! `evictions` log type), reported by the shard where they happen.
//!
//! The shards do not know the server: the server of this process installs
//! its log as the process's [`Events`] sink once, at start-up, and a shard
//! that evicts an item asks the sink whether anyone watches evictions (one
//! relaxed load) before it formats anything. In a program of several
//! processes each process's shards report to that process's watchers.

use std::sync::{Arc, OnceLock};

/// An item evicted to make room (the `evictions` log type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eviction<'a> {
    /// Its key.
    pub key: &'a [u8],
    /// Whether a client read it since it was stored.
    pub fetched: bool,
    /// Seconds it had left to live, or -1 without an expiration time.
    pub ttl: i64,
    /// Seconds since it was last accessed.
    pub last_access: u32,
    /// Its memcached slab class.
    pub class: u32,
    /// Bytes of its value.
    pub size: usize,
}

/// Where the shards report events.
pub trait Events: Send + Sync {
    /// Whether anyone watches evictions.
    fn wants_evictions(&self) -> bool;
    /// An eviction happened.
    fn eviction(&self, e: &Eviction<'_>);
}

static SINK: OnceLock<Arc<dyn Events>> = OnceLock::new();

/// Installs the process's sink; returns false if one is installed already
/// (the first server of a process keeps it).
pub fn set_sink(sink: Arc<dyn Events>) -> bool {
    SINK.set(sink).is_ok()
}

/// Reports an eviction to the sink, if one is installed and interested.
/// `e` is only built when it is.
#[inline]
pub fn evicted<'a>(e: impl FnOnce() -> Eviction<'a>) {
    if let Some(s) = SINK.get() {
        if s.wants_evictions() {
            s.eviction(&e());
        }
    }
}
