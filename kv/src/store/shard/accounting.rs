//! A shard's accounting by memcached slab class: each item is counted in
//! the class memcached would store it in, when it is stored and removed.

use std::collections::BTreeMap;

use super::Shard;
use crate::store::classes;
use crate::store::stats::ClassStats;

/// Counters for every class, all zero.
pub fn empty() -> Vec<ClassStats> {
    vec![ClassStats::default(); classes::largest() as usize]
}

/// memcached's size bucket of an item of `size` bytes: 32-byte steps,
/// rounded up.
fn size_bucket(size: u64) -> usize {
    size.div_ceil(32) as usize
}

/// The class of an item of `size` bytes, as stored in the item.
pub fn class_of(size: u64) -> u8 {
    classes::clsid(size as usize) as u8
}

impl Shard {
    /// The counters of class `class`.
    pub(super) fn class_mut(&mut self, class: u8) -> &mut ClassStats {
        let i = usize::from(class).saturating_sub(1).min(self.classes.len() - 1);
        &mut self.classes[i]
    }

    /// An item of `size` bytes was stored in `class`.
    pub(super) fn account_in(&mut self, class: u8, size: u64) {
        let c = self.class_mut(class);
        c.number += 1;
        c.mem_requested += size;
        c.cmd_set += 1;
        let b = size_bucket(size);
        if b >= self.sizes.len() {
            self.sizes.resize(b + 1, 0);
        }
        self.sizes[b] += 1;
    }

    /// An item of `size` bytes left `class`.
    pub(super) fn account_out(&mut self, class: u8, size: u64) {
        let c = self.class_mut(class);
        c.number -= 1;
        c.mem_requested -= size;
        if let Some(n) = self.sizes.get_mut(size_bucket(size)) {
            *n -= 1;
        }
    }

    /// Items per non-empty 32-byte size bucket.
    pub(super) fn size_buckets(&self) -> BTreeMap<u32, u64> {
        self.sizes.iter().enumerate().filter(|(_, &n)| n > 0).map(|(b, &n)| (b as u32, n)).collect()
    }

    /// An incr (or decr) found an item of `class`.
    pub(super) fn count_arith_hit(&mut self, class: u8, incr: bool) {
        if incr {
            self.stats.incr_hits += 1;
            self.class_mut(class).incr_hits += 1;
        } else {
            self.stats.decr_hits += 1;
            self.class_mut(class).decr_hits += 1;
        }
    }

    /// An expired or flushed item of `class` was taken back.
    pub(super) fn account_reclaimed(&mut self, class: u8, fetched: bool) {
        let c = self.class_mut(class);
        c.reclaimed += 1;
        if !fetched {
            c.expired_unfetched += 1;
        }
    }
}
