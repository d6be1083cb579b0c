//! memcached 1.6's segmented LRU, applied to one shard: which segment an
//! item enters, what a fetch does to it, how the maintainer moves items
//! between segments, and where a store finds room.
//!
//! * A new item enters HOT, or TEMP when `temporary_ttl` is set and the
//!   item's time to live is at most that; without segmentation
//!   (`-o no_lru_maintainer` or `no_modern`) every item is COLD.
//! * A fetch marks an item fetched; a second fetch marks it active. An
//!   item that becomes active while COLD moves to WARM at once (memcached
//!   queues this move for its maintainer; here the fetch already runs with
//!   the shard to itself).
//! * The maintainer ([`Shard::juggle`], memcached's `lru_maintainer_juggle`)
//!   looks at the tails: an active HOT item moves to WARM, an active WARM
//!   item to WARM's head; an inactive HOT (WARM) item moves to COLD while
//!   HOT (WARM) holds more than `hot_lru_pct` (`warm_lru_pct`) of the bytes
//!   of HOT, WARM and COLD together, or is older than the COLD tail's age
//!   times `hot_max_factor` (`warm_max_factor`); an active COLD item moves
//!   to WARM. Expired items met on the way are reclaimed.
//! * A store that needs room evicts COLD's tail; with COLD empty it first
//!   pulls HOT's tail down (memcached does the same), then WARM's, and
//!   TEMP is evicted last, so that a store never fails while items remain.
//!
//! memcached keeps these lists per slab class; here they are per shard,
//! and the percentages apply to the shard's bytes. Counters stay per class.

use super::table::{Segment, Slot};
use super::Shard;

/// Items memcached's `lru_pull_tail` looks at on a tail per pull.
const TAIL_TRIES: usize = 5;

/// The segmented LRU's settings (memcached's `-o` names, with its defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LruSettings {
    /// HOT/WARM/COLD; otherwise one LRU (COLD): memcached's
    /// `lru_segmented`, which its `no_lru_maintainer` and `no_modern` turn
    /// off.
    pub segmented: bool,
    /// HOT's share of the bytes, in percent (`hot_lru_pct`).
    pub hot_lru_pct: u32,
    /// WARM's share of the bytes, in percent (`warm_lru_pct`).
    pub warm_lru_pct: u32,
    /// HOT items older than COLD's tail times this move on (`hot_max_factor`).
    pub hot_max_factor: f64,
    /// WARM items older than COLD's tail times this move on (`warm_max_factor`).
    pub warm_max_factor: f64,
    /// Items with short lives go to TEMP (set by `temporary_ttl`).
    pub temp_lru: bool,
    /// The longest time to live, in seconds, of a TEMP item (`temporary_ttl`).
    pub temporary_ttl: u32,
}

impl Default for LruSettings {
    fn default() -> LruSettings {
        LruSettings {
            segmented: true,
            hot_lru_pct: 20,
            warm_lru_pct: 40,
            hot_max_factor: 0.2,
            warm_max_factor: 2.0,
            temp_lru: false,
            temporary_ttl: 61,
        }
    }
}

impl Shard {
    /// The segment a new item with expiration time `exptime` enters.
    pub(super) fn entry_segment(&self, exptime: u32, now: u32) -> Segment {
        let lru = &self.lru;
        if lru.temp_lru && exptime != 0 && exptime.saturating_sub(now) <= lru.temporary_ttl {
            Segment::Temp
        } else if lru.segmented {
            Segment::Hot
        } else {
            Segment::Cold
        }
    }

    /// A fetch of the live item in `slot` at `now` (memcached's
    /// `do_item_bump`), counted in `hits_to_*` by the segment it was on.
    /// Marks it fetched, or active if it was fetched before.
    pub(super) fn fetched(&mut self, slot: Slot, now: u32) {
        let segment = self.map.segment(slot);
        let class = self.map.item(slot).class;
        self.class_mut(class).hits_to[segment as usize] += 1;
        if !self.lru.segmented {
            // One LRU: a fetch moves the item to the head.
            self.map.move_to(slot, segment);
            let it = self.map.item_mut(slot);
            it.fetched = true;
            if it.time < now.saturating_sub(super::ITEM_UPDATE_INTERVAL) {
                it.time = now;
            }
            return;
        }
        if self.map.active(slot) {
            return;
        }
        let it = self.map.item_mut(slot);
        if !it.fetched {
            it.fetched = true;
            return;
        }
        it.time = now;
        self.map.set_active(slot, true);
        if segment == Segment::Cold {
            self.map.move_to(slot, Segment::Warm);
            self.class_mut(class).moves_to_warm += 1;
        }
    }

    /// One pass of the maintainer over the segments at `now`, moving at
    /// most `budget` items. Returns whether it stopped for the budget.
    pub(super) fn juggle(&mut self, now: u32, budget: usize) -> bool {
        if self.lru.temp_lru {
            self.pull(Segment::Temp, 0, 0, now);
        }
        if !self.lru.segmented {
            return false;
        }
        let cold_age = self.map.tail(Segment::Cold).map_or(0, |s| now.saturating_sub(self.map.item(s).time));
        let hot_age = (f64::from(cold_age) * self.lru.hot_max_factor) as u32;
        let warm_age = (f64::from(cold_age) * self.lru.warm_max_factor) as u32;
        let total = self.map.bytes(Segment::Hot) + self.map.bytes(Segment::Warm) + self.map.bytes(Segment::Cold);
        let mut moved = 0;
        while moved < budget {
            let mut more = self.pull(Segment::Hot, total, hot_age, now);
            if more == 0 {
                more = self.pull(Segment::Warm, total, warm_age, now);
            }
            more += self.pull(Segment::Cold, 0, 0, now);
            if more == 0 {
                return false;
            }
            moved += more;
        }
        true
    }

    /// memcached's `lru_pull_tail` without eviction: reclaims expired and
    /// flushed items from the tail of `segment`, then moves the first live
    /// one as the module documentation says. `total` is the bytes the
    /// percentages apply to, `max_age` the age past which items move on.
    /// Returns the items reclaimed or moved.
    fn pull(&mut self, segment: Segment, total: u64, max_age: u32, now: u32) -> usize {
        let mut removed = 0;
        for _ in 0..TAIL_TRIES {
            let Some(slot) = self.map.tail(segment) else { break };
            let it = self.map.item(slot);
            // (Flushed items wait for the crawl from the second after the
            // flush: see `Shard::maintain`.)
            if it.expired(now) {
                self.reclaim_slot(slot);
                removed += 1;
                continue;
            }
            let class = it.class;
            let old = now.saturating_sub(it.time) > max_age;
            let active = self.map.active(slot);
            match segment {
                Segment::Hot | Segment::Warm => {
                    let pct = if segment == Segment::Hot { self.lru.hot_lru_pct } else { self.lru.warm_lru_pct };
                    let limit = total * u64::from(pct) / 100;
                    if active {
                        self.map.set_active(slot, false);
                        if segment == Segment::Warm {
                            self.map.item_mut(slot).time = now;
                            self.map.move_to(slot, Segment::Warm);
                            self.class_mut(class).moves_within_lru += 1;
                        } else {
                            self.map.move_to(slot, Segment::Warm);
                            self.class_mut(class).moves_to_warm += 1;
                        }
                        removed += 1;
                    } else if self.map.bytes(segment) > limit || old {
                        self.map.move_to(slot, Segment::Cold);
                        self.class_mut(class).moves_to_cold += 1;
                        removed += 1;
                    }
                }
                Segment::Cold => {
                    if active {
                        self.map.set_active(slot, false);
                        self.map.move_to(slot, Segment::Warm);
                        self.class_mut(class).moves_to_warm += 1;
                        removed += 1;
                    }
                }
                Segment::Temp => {}
            }
            break;
        }
        removed
    }

    /// The item a store should evict to make room: COLD's tail, after
    /// pulling HOT's (then WARM's) tail down to COLD while COLD is empty;
    /// TEMP's tail if nothing else is left.
    pub(super) fn victim(&mut self) -> Option<Slot> {
        loop {
            if let Some(s) = self.map.tail(Segment::Cold) {
                return Some(s);
            }
            let from = [Segment::Hot, Segment::Warm].into_iter().find_map(|seg| self.map.tail(seg).map(|s| (seg, s)));
            let Some((seg, slot)) = from else { return self.map.tail(Segment::Temp) };
            let class = self.map.item(slot).class;
            if seg == Segment::Hot && self.map.active(slot) {
                // memcached's forced pull still rescues an active item.
                self.map.set_active(slot, false);
                self.map.move_to(slot, Segment::Warm);
                self.class_mut(class).moves_to_warm += 1;
            } else {
                self.map.move_to(slot, Segment::Cold);
                self.class_mut(class).moves_to_cold += 1;
            }
        }
    }
}
