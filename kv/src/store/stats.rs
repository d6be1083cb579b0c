//! Per-shard counters, named after memcached's stats.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counters kept by one shard; summed over shards for `stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardStats {
    /// Get requests (one per key).
    pub cmd_get: u64,
    /// Store requests.
    pub cmd_set: u64,
    /// Touch and gat requests.
    pub cmd_touch: u64,
    /// Meta debug (`me`) requests, which memcached 1.6 counts as
    /// `cmd_meta`.
    pub cmd_meta: u64,
    /// Keys found by get.
    pub get_hits: u64,
    /// Keys not found by get.
    pub get_misses: u64,
    /// Lookups that found an expired item.
    pub get_expired: u64,
    /// Lookups that found a flushed item.
    pub get_flushed: u64,
    /// Deletes of a present key.
    pub delete_hits: u64,
    /// Deletes of an absent key.
    pub delete_misses: u64,
    /// Increments of a present key.
    pub incr_hits: u64,
    /// Increments of an absent key.
    pub incr_misses: u64,
    /// Decrements of a present key.
    pub decr_hits: u64,
    /// Decrements of an absent key.
    pub decr_misses: u64,
    /// CAS stores that matched.
    pub cas_hits: u64,
    /// CAS stores of an absent key.
    pub cas_misses: u64,
    /// CAS stores that did not match.
    pub cas_badval: u64,
    /// Touches of a present key.
    pub touch_hits: u64,
    /// Touches of an absent key.
    pub touch_misses: u64,
    /// Stores refused for lack of memory.
    pub store_no_memory: u64,
    /// Items now in the shard.
    pub curr_items: u64,
    /// Items ever stored.
    pub total_items: u64,
    /// Bytes charged for the items now in the shard.
    pub bytes: u64,
    /// Memory limit of the shard.
    pub limit_maxbytes: u64,
    /// Live items removed to make room.
    pub evictions: u64,
    /// Evicted items that had an expiration time.
    pub evicted_nonzero: u64,
    /// Evicted items never read.
    pub evicted_unfetched: u64,
    /// Seconds since the last eviction's item was last accessed.
    pub evicted_time: u64,
    /// Expired items removed (their memory reused).
    pub reclaimed: u64,
    /// Expired items removed that were never read.
    pub expired_unfetched: u64,
    /// Age in seconds of the least recently used item of COLD (memcached's
    /// `age`).
    pub oldest_age: u64,
    /// Age in seconds of HOT's least recently used item.
    #[serde(default)]
    pub age_hot: u64,
    /// Age in seconds of WARM's least recently used item.
    #[serde(default)]
    pub age_warm: u64,
    /// Items a store removed from the LRU tail to make room (memcached's
    /// `direct_reclaims`).
    pub direct_reclaims: u64,
    /// Expired or flushed items an `lru_crawler crawl` removed.
    #[serde(default)]
    pub crawler_reclaimed: u64,
    /// Items an `lru_crawler crawl` looked at.
    #[serde(default)]
    pub crawler_items_checked: u64,
    /// An `lru_crawler crawl` is running.
    #[serde(default)]
    pub crawling: bool,
    /// Per memcached slab class (index 0 is class 1).
    #[serde(default)]
    pub classes: Vec<ClassStats>,
    /// Items per 32-byte size bucket (memcached's `stats sizes`).
    #[serde(default)]
    pub sizes: BTreeMap<u32, u64>,
}

/// Counters of the items accounted to one memcached slab class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassStats {
    /// Items now in the class.
    pub number: u64,
    /// Bytes those items take (memcached's `mem_requested`).
    pub mem_requested: u64,
    /// Stores into the class.
    pub cmd_set: u64,
    /// Gets that found an item of the class.
    pub get_hits: u64,
    /// Touches that found one.
    pub touch_hits: u64,
    /// Deletes that found one.
    pub delete_hits: u64,
    /// Increments that found one.
    pub incr_hits: u64,
    /// Decrements that found one.
    pub decr_hits: u64,
    /// CAS stores that matched one.
    pub cas_hits: u64,
    /// CAS stores that did not match.
    pub cas_badval: u64,
    /// Live items evicted to make room.
    pub evicted: u64,
    /// Evicted items that had an expiration time.
    pub evicted_nonzero: u64,
    /// Evicted items never read.
    pub evicted_unfetched: u64,
    /// Seconds since the last evicted item was accessed.
    pub evicted_time: u64,
    /// Stores refused for lack of memory.
    pub outofmemory: u64,
    /// Expired or flushed items whose memory was taken back.
    pub reclaimed: u64,
    /// Of those, never read.
    pub expired_unfetched: u64,
    /// Items a store removed from the LRU tail to make room.
    pub direct_reclaims: u64,
    /// Expired or flushed items an `lru_crawler crawl` removed.
    #[serde(default)]
    pub crawler_reclaimed: u64,
    /// Items an `lru_crawler crawl` looked at.
    #[serde(default)]
    pub crawler_items_checked: u64,
    /// Evicted items that were active (fetched twice, not yet moved).
    #[serde(default)]
    pub evicted_active: u64,
    /// Items moved to COLD by the maintainer or a store.
    #[serde(default)]
    pub moves_to_cold: u64,
    /// Items moved to WARM (active ones).
    #[serde(default)]
    pub moves_to_warm: u64,
    /// Active WARM items moved to WARM's head.
    #[serde(default)]
    pub moves_within_lru: u64,
    /// Fetches that found an item on HOT, WARM, COLD and TEMP.
    #[serde(default)]
    pub hits_to: [u64; 4],
    /// Items now on HOT, WARM, COLD and TEMP (a gauge).
    #[serde(default)]
    pub segments: [u64; 4],
}

impl ClassStats {
    fn add(&mut self, o: &ClassStats) {
        self.number += o.number;
        self.mem_requested += o.mem_requested;
        self.cmd_set += o.cmd_set;
        self.get_hits += o.get_hits;
        self.touch_hits += o.touch_hits;
        self.delete_hits += o.delete_hits;
        self.incr_hits += o.incr_hits;
        self.decr_hits += o.decr_hits;
        self.cas_hits += o.cas_hits;
        self.cas_badval += o.cas_badval;
        self.evicted += o.evicted;
        self.evicted_nonzero += o.evicted_nonzero;
        self.evicted_unfetched += o.evicted_unfetched;
        self.evicted_time = self.evicted_time.max(o.evicted_time);
        self.outofmemory += o.outofmemory;
        self.reclaimed += o.reclaimed;
        self.expired_unfetched += o.expired_unfetched;
        self.direct_reclaims += o.direct_reclaims;
        self.crawler_reclaimed += o.crawler_reclaimed;
        self.crawler_items_checked += o.crawler_items_checked;
        self.evicted_active += o.evicted_active;
        self.moves_to_cold += o.moves_to_cold;
        self.moves_to_warm += o.moves_to_warm;
        self.moves_within_lru += o.moves_within_lru;
        for i in 0..4 {
            self.hits_to[i] += o.hits_to[i];
            self.segments[i] += o.segments[i];
        }
    }

    /// Zeroes the counters, keeping the gauges.
    pub fn reset(&mut self) {
        *self = ClassStats {
            number: self.number,
            mem_requested: self.mem_requested,
            segments: self.segments,
            ..ClassStats::default()
        };
    }
}

impl ShardStats {
    /// Adds `o` into `self` (ages: the maximum).
    pub fn add(&mut self, o: &ShardStats) {
        self.cmd_get += o.cmd_get;
        self.cmd_set += o.cmd_set;
        self.cmd_touch += o.cmd_touch;
        self.cmd_meta += o.cmd_meta;
        self.get_hits += o.get_hits;
        self.get_misses += o.get_misses;
        self.get_expired += o.get_expired;
        self.get_flushed += o.get_flushed;
        self.delete_hits += o.delete_hits;
        self.delete_misses += o.delete_misses;
        self.incr_hits += o.incr_hits;
        self.incr_misses += o.incr_misses;
        self.decr_hits += o.decr_hits;
        self.decr_misses += o.decr_misses;
        self.cas_hits += o.cas_hits;
        self.cas_misses += o.cas_misses;
        self.cas_badval += o.cas_badval;
        self.touch_hits += o.touch_hits;
        self.touch_misses += o.touch_misses;
        self.store_no_memory += o.store_no_memory;
        self.curr_items += o.curr_items;
        self.total_items += o.total_items;
        self.bytes += o.bytes;
        self.limit_maxbytes += o.limit_maxbytes;
        self.evictions += o.evictions;
        self.evicted_nonzero += o.evicted_nonzero;
        self.evicted_unfetched += o.evicted_unfetched;
        self.evicted_time = self.evicted_time.max(o.evicted_time);
        self.reclaimed += o.reclaimed;
        self.expired_unfetched += o.expired_unfetched;
        self.oldest_age = self.oldest_age.max(o.oldest_age);
        self.age_hot = self.age_hot.max(o.age_hot);
        self.age_warm = self.age_warm.max(o.age_warm);
        self.direct_reclaims += o.direct_reclaims;
        self.crawler_reclaimed += o.crawler_reclaimed;
        self.crawler_items_checked += o.crawler_items_checked;
        self.crawling |= o.crawling;
        if self.classes.len() < o.classes.len() {
            self.classes.resize(o.classes.len(), ClassStats::default());
        }
        for (c, oc) in self.classes.iter_mut().zip(&o.classes) {
            c.add(oc);
        }
        for (&b, &n) in &o.sizes {
            *self.sizes.entry(b).or_default() += n;
        }
    }

    /// Zeroes the counters that `stats reset` clears (not the gauges).
    pub fn reset(&mut self) {
        let mut classes = std::mem::take(&mut self.classes);
        classes.iter_mut().for_each(ClassStats::reset);
        let keep = ShardStats {
            classes,
            sizes: std::mem::take(&mut self.sizes),
            curr_items: self.curr_items,
            bytes: self.bytes,
            limit_maxbytes: self.limit_maxbytes,
            oldest_age: self.oldest_age,
            age_hot: self.age_hot,
            age_warm: self.age_warm,
            crawling: self.crawling,
            ..ShardStats::default()
        };
        *self = keep;
    }
}
