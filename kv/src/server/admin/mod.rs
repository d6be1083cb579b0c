//! memcached's administrative features: per-prefix stats (`stats detail`),
//! log watchers (`watch`), `slabs automove|reassign`, `shutdown` and
//! `stats sizes_enable|disable`, with the state they share across
//! connection workers.
//!
//! Requests reach these features through [`hooks::issue`], which costs the
//! get/set path one relaxed load of [`AdminState::observing`] while
//! neither detail counting nor any watcher is on.

pub mod commands;
pub mod detail;
pub mod hooks;
mod murmur3;
pub mod slabs;
pub mod watch;

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::Config;
use detail::Detail;
use watch::Watchers;

/// Server-wide state of the administrative features.
#[derive(Debug)]
pub struct AdminState {
    /// Bit 0: detail counting; other bits: the log types watched.
    flags: Arc<AtomicU16>,
    /// Per-prefix counters.
    pub detail: Detail,
    /// Log watchers.
    pub watchers: Arc<Watchers>,
    /// `shutdown` is enabled (`-A`).
    pub shutdown_enabled: bool,
    /// `slabs reassign` is allowed.
    pub slab_reassign: bool,
    /// memcached's `slab_automove` setting.
    pub slab_automove: AtomicU32,
    /// memcached's `slab_automove_ratio`, as `f64` bits.
    automove_ratio: AtomicU64,
    /// `stats sizes` lists item sizes.
    pub track_sizes: AtomicBool,
    /// memcached's `watcher_logbuf_size` in bytes.
    pub watcher_logbuf_size: u64,
    /// memcached's `worker_logbuf_size` in bytes.
    pub worker_logbuf_size: u64,
    /// The LRU crawler is enabled (`-o lru_crawler`, `lru_crawler
    /// enable|disable`).
    pub lru_crawler: AtomicBool,
    /// Expired items are reclaimed in the background (`-o
    /// lru_maintainer`, the default; `no_lru_maintainer` turns it off).
    pub lru_maintainer: bool,
    /// `lru_crawler sleep`: microseconds between a crawl's steps (reported).
    pub crawler_sleep: AtomicU32,
    /// `lru_crawler tocrawl`: items per class a crawl checks at most.
    pub crawler_tocrawl: AtomicU32,
    /// The segmented LRU's settings (`-o lru_segmented`, `hot_lru_pct`, ...).
    pub lru: crate::store::shard::LruSettings,
    /// Background reclaim passes this process has made (memcached's
    /// `lru_maintainer_juggles`).
    pub juggles: AtomicU64,
    /// `lru_crawler crawl` commands this process ran (memcached's
    /// `lru_crawler_starts`).
    pub crawls: AtomicU64,
}

impl AdminState {
    /// The state `config` starts with (its `-o` options already checked).
    pub fn new(config: &Config) -> AdminState {
        let x = config.extended_options().unwrap_or_default();
        let flags = Arc::new(AtomicU16::new(0));
        AdminState {
            detail: Detail::new(config.delimiter(), config.prefix_delimiter.is_some(), flags.clone()),
            watchers: Arc::new(Watchers::new(x.watcher_logbuf_size as usize, flags.clone())),
            flags,
            shutdown_enabled: config.enable_shutdown,
            slab_reassign: x.slab_reassign,
            slab_automove: AtomicU32::new(x.slab_automove),
            automove_ratio: AtomicU64::new(x.slab_automove_ratio.to_bits()),
            track_sizes: AtomicBool::new(x.track_sizes),
            watcher_logbuf_size: x.watcher_logbuf_size,
            worker_logbuf_size: x.worker_logbuf_size,
            lru_crawler: AtomicBool::new(x.lru_crawler),
            lru_maintainer: x.lru_maintainer,
            lru: x.lru,
            crawler_sleep: AtomicU32::new(x.lru_crawler_sleep),
            crawler_tocrawl: AtomicU32::new(x.lru_crawler_tocrawl),
            juggles: AtomicU64::new(0),
            crawls: AtomicU64::new(0),
        }
    }

    /// Whether detail counting or any log watcher is on: the one check on
    /// the request path.
    #[inline]
    pub fn observing(&self) -> bool {
        self.flags.load(Ordering::Relaxed) != 0
    }

    /// memcached's `slab_automove_ratio`.
    pub fn automove_ratio(&self) -> f64 {
        f64::from_bits(self.automove_ratio.load(Ordering::Relaxed))
    }

    /// Sets `slab_automove_ratio`.
    pub fn set_automove_ratio(&self, r: f64) {
        self.automove_ratio.store(r.to_bits(), Ordering::Relaxed);
    }

    /// The slab class of an item of `ntotal` bytes.
    pub fn clsid(&self, ntotal: usize) -> u32 {
        crate::store::classes::clsid(ntotal)
    }
}
