//! One shard of the table: its items on memcached's segmented LRU lists
//! (`shard/table.rs`, `shard/segments.rs`) and a memory limit, owned by
//! one trustee. Every method runs on that trustee, with exclusive
//! access, so nothing here locks.
//!
//! Semantics follow memcached 1.6: lazy expiry and flush on lookup, unique
//! CAS values, in-place incr/decr that pads with spaces, eviction from the
//! COLD segment when a store needs room.
//!
//! `flush_all` only marks items invalid, as memcached does: they stay in
//! the table (and in `curr_items` and `bytes`) until a request touches
//! them, a store needs their room, or the shard's crawl reclaims them from
//! the LRU tail. The crawl stands in for memcached's LRU maintainer thread,
//! which visits an idle LRU about once a second: from the second after a
//! flush takes effect, every request first reclaims up to
//! [`CRAWL_BUDGET`] flushed items from the tail, and a `stats` request
//! reclaims all of them, so `stats` shows what memcached shows once its
//! maintainer has been by.
//!
//! Expired items are reclaimed in the background too: once a second the
//! shard's maintainer (a fiber on its thread) delegates
//! [`Shard::maintain`] to it, which removes the items whose time has come,
//! found through the
//! shard's expiry queue (`shard/expiry.rs`), and the flushed ones, so that
//! memory and `curr_items` go down without anyone asking for those keys.

use super::item::{item_size_ok, Item};
use super::op::{Hit, Op, Outcome, StoreMode};
use super::stats::{ClassStats, ShardStats};
use crate::clock;
use crate::numeric;
use crawler::CrawlJob;
use expiry::Expiry;
pub use segments::LruSettings;
use table::{Segment, Slot, Table};

/// memcached refreshes an item's access time at most this often (seconds).
const ITEM_UPDATE_INTERVAL: u32 = 60;

/// Items a store looks at on the LRU tail when the maintainer is off
/// (memcached's `lru_pull_tail` tries).
const TAIL_SEARCH: usize = 5;

/// Flushed items a request reclaims from the LRU tail before it runs.
pub const CRAWL_BUDGET: usize = 64;

/// Slots one step of an `lru_crawler crawl` looks at.
pub const CRAWL_STEP: usize = 256;

/// How a shard is set up.
#[derive(Debug, Clone, Copy)]
pub struct ShardConfig {
    /// This shard's index among `count`.
    pub index: usize,
    /// Number of shards (CAS values are unique across them).
    pub count: usize,
    /// Bytes of items this shard may hold.
    pub mem_limit: u64,
    /// Largest item size (`-I`).
    pub item_size_max: usize,
    /// Each store first reclaims expired items from the LRU tail, as
    /// memcached does when its LRU maintainer is off.
    pub tail_reclaim: bool,
    /// The segmented LRU's settings.
    pub lru: LruSettings,
}

/// A shard of the table.
pub struct Shard {
    map: Table,
    lru: LruSettings,
    mem_used: u64,
    mem_limit: u64,
    item_size_max: usize,
    tail_reclaim: bool,
    index: usize,
    last_cas: u64,
    cas_step: u64,
    /// memcached's `oldest_live`: items accessed at or before this time are
    /// invalid once the time has come (0: no flush pending).
    oldest_live: u32,
    /// memcached's `oldest_cas`: items with a smaller CAS value were present
    /// at the last immediate flush, and are invalid (0: none).
    oldest_cas: u64,
    /// From this relative time on, requests reclaim flushed items from the
    /// LRU tail (0: nothing to reclaim).
    crawl_at: u32,
    stats: ShardStats,
    /// Per memcached slab class (index 0 is class 1).
    classes: Vec<ClassStats>,
    /// Items per 32-byte size bucket.
    sizes: Vec<u64>,
    /// Keys by expiration time, for the background reclaim.
    expiry: Expiry,
    /// The `lru_crawler crawl` in progress, if any.
    crawler: Option<CrawlJob>,
}

/// State of a key found in the map.
enum Found {
    Live,
    Flushed,
    Expired,
}

impl Shard {
    /// An empty shard.
    pub fn new(cfg: ShardConfig) -> Shard {
        let count = cfg.count.max(1) as u64;
        Shard {
            map: Table::default(),
            lru: cfg.lru,
            mem_used: 0,
            mem_limit: cfg.mem_limit,
            item_size_max: cfg.item_size_max,
            tail_reclaim: cfg.tail_reclaim,
            index: cfg.index,
            // CAS values of shard i are i+1, i+1+count, i+1+2*count, ...
            last_cas: (cfg.index as u64 + 1).wrapping_sub(count),
            cas_step: count,
            oldest_live: 0,
            oldest_cas: 0,
            crawl_at: 0,
            stats: ShardStats { limit_maxbytes: cfg.mem_limit, ..ShardStats::default() },
            classes: accounting::empty(),
            sizes: Vec::new(),
            expiry: Expiry::default(),
            crawler: None,
        }
    }

    /// Runs one request at the current server time.
    pub fn run(&mut self, op: Op) -> Outcome {
        self.execute(op, clock::now(), clock::process_started())
    }

    /// Runs one request at relative time `now`.
    pub fn execute(&mut self, op: Op, now: u32, started: i64) -> Outcome {
        if self.crawl_at != 0 && now >= self.crawl_at {
            // `stats` reports what memcached's maintainer would have left.
            let budget = if matches!(op, Op::Stats { .. }) { usize::MAX } else { CRAWL_BUDGET };
            self.crawl(now, budget);
        }
        match op {
            Op::Get { key, touch, value } => self.get(key, touch.map(|t| clock::realtime(t, now, started)), value, now),
            Op::Store { mode, key, flags, exptime, cas, data } => {
                self.store(mode, key, flags, clock::realtime(exptime, now, started), cas, data, now)
            }
            Op::Delete { key, cas } => self.delete(&key, cas, now),
            Op::Arith { key, incr, delta, create, cas } => {
                let create = create.map(|(init, exp)| (init, clock::realtime(exp, now, started)));
                self.arith(key, incr, delta, create, cas, now)
            }
            Op::Peek { key } => Outcome::Peeked(
                self.map
                    .peek(&key[..])
                    .filter(|it| !self.is_flushed(it, now) && !it.expired(now))
                    .map(|it| (it.flags, it.data.len() as u64)),
            ),
            Op::Unlink { key } => {
                self.remove(&key);
                Outcome::Done
            }
            Op::Flush { delay } => {
                self.flush(delay, now, started);
                Outcome::Done
            }
            Op::Meta(m) => {
                // A meta command may give an item a new expiration time.
                let key = (m.ttl.is_some() || m.vivify.is_some()).then(|| m.key.clone());
                let out = self.meta(*m, now, started);
                if let Some(key) = key {
                    self.reschedule(&key);
                }
                out
            }
            Op::MemLimit { total } => {
                self.mem_limit = share(total, self.index, self.cas_step as usize);
                Outcome::Done
            }
            Op::Dump { classes } => Outcome::Meta(self.dump(classes.as_deref(), now, started)),
            Op::CacheDump { class, limit } => Outcome::Meta(self.cachedump(class, limit, now, started)),
            Op::Crawl { classes, tocrawl } => {
                self.start_crawl(classes, tocrawl, now, CRAWL_STEP);
                Outcome::Done
            }
            Op::Stats { reset } => {
                let s = self.stats(now);
                if reset {
                    self.stats.reset();
                    self.classes.iter_mut().for_each(ClassStats::reset);
                }
                Outcome::Stats(Box::new(s))
            }
        }
    }

    /// The background reclaim at relative time `now` (memcached's LRU
    /// maintainer): removes up to `budget` flushed items from the LRU tail
    /// and up to `budget` items whose expiration time has come, counting
    /// them as `reclaimed`. Returns whether some may be left for another
    /// call.
    pub fn maintain(&mut self, now: u32, budget: usize) -> bool {
        if self.crawl_at != 0 && now >= self.crawl_at {
            self.crawl(now, budget);
        }
        let mut more = self.crawl_at != 0 && now >= self.crawl_at;
        more |= self.juggle(now, budget);
        let mut checked = 0;
        while let Some(key) = self.expiry.next_due(now) {
            checked += 1;
            match self.map.peek(&key[..]) {
                Some(it) if it.expired(now) => {
                    if let Some(it) = self.remove(&key) {
                        self.account_reclaimed(it.class, it.fetched);
                        self.stats.reclaimed += 1;
                        if !it.fetched {
                            self.stats.expired_unfetched += 1;
                        }
                    }
                }
                // Given a later time since: due then.
                Some(it) => {
                    let at = it.exptime;
                    self.expiry.schedule(&key, at);
                }
                None => {}
            }
            if checked == budget {
                more = true;
                break;
            }
        }
        if self.expiry.wants_rebuild(self.map.len()) {
            self.expiry.rebuild(self.map.iter().map(|(k, it)| (k, it.exptime)));
        }
        more
    }

    /// memcached's `lru_pull_tail` before an allocation when its LRU is
    /// not segmented: removes the expired or flushed items among the last
    /// [`TAIL_SEARCH`] of the LRU tail, up to the first live one.
    fn reclaim_tail(&mut self, now: u32) {
        for _ in 0..TAIL_SEARCH {
            match self.map.tail(Segment::Cold) {
                Some(s) if self.map.item(s).expired(now) || self.is_flushed(self.map.item(s), now) => {
                    self.reclaim_slot(s)
                }
                _ => return,
            }
        }
    }

    /// Removes the item in `slot`, counted as `reclaimed` (expired or
    /// flushed, found by the shard itself).
    fn reclaim_slot(&mut self, slot: Slot) {
        let (k, it) = self.map.remove_slot(slot);
        let size = it.size(k.len()) as u64;
        self.mem_used -= size;
        self.account_out(it.class, size);
        self.account_reclaimed(it.class, it.fetched);
        self.stats.reclaimed += 1;
        if !it.fetched {
            self.stats.expired_unfetched += 1;
        }
    }

    /// Enqueues the item under `key` (if any) for its expiration time.
    fn reschedule(&mut self, key: &[u8]) {
        if let Some(at) = self.map.peek(key).map(|it| it.exptime) {
            self.expiry.schedule(key, at);
        }
    }

    /// Counters and gauges at relative time `now`.
    pub fn stats(&self, now: u32) -> ShardStats {
        let mut s = self.stats.clone();
        s.curr_items = self.map.len() as u64;
        s.bytes = self.mem_used;
        s.limit_maxbytes = self.mem_limit;
        s.crawling = self.crawling();
        let age = |seg| self.map.tail(seg).map_or(0, |t| u64::from(now.saturating_sub(self.map.item(t).time)));
        s.oldest_age = age(Segment::Cold);
        s.age_hot = age(Segment::Hot);
        s.age_warm = age(Segment::Warm);

        s.classes = self.classes.clone();
        for (c, class) in s.classes.iter_mut().zip(1u8..) {
            c.segments = self.map.class_counts(class);
        }
        s.sizes = self.size_buckets();
        s
    }

    /// Number of items held (expired and flushed ones included until
    /// noticed or reclaimed).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the shard holds no items.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn next_cas(&mut self) -> u64 {
        self.last_cas = self.last_cas.wrapping_add(self.cas_step);
        self.last_cas
    }

    /// memcached's `item_is_flushed`, except that the CAS test also holds
    /// while a later delayed flush is pending (memcached skips both tests
    /// then, so items it has not yet reclaimed from an earlier `flush_all`
    /// would come back).
    fn is_flushed(&self, it: &Item, now: u32) -> bool {
        it.cas < self.oldest_cas || (self.oldest_live != 0 && self.oldest_live <= now && it.time <= self.oldest_live)
    }

    /// Reclaims up to `budget` flushed items from the tails of the LRU
    /// segments, as memcached's LRU maintainer does (counted as
    /// `reclaimed`). Flushed items gather at the tails: a flush
    /// invalidates everything stored before it, and touching a flushed
    /// item removes it.
    fn crawl(&mut self, now: u32, budget: usize) {
        let mut left = budget;
        for seg in Segment::ALL {
            while let Some(s) = self.map.tail(seg).filter(|&s| self.is_flushed(self.map.item(s), now)) {
                if left == 0 {
                    return;
                }
                left -= 1;
                self.reclaim_slot(s);
            }
        }
        // Done; a delayed flush still to come gets its own crawl.
        self.crawl_at = if self.oldest_live > now { self.oldest_live.saturating_add(1) } else { 0 };
    }

    fn remove(&mut self, key: &[u8]) -> Option<Item> {
        let it = self.map.remove(key)?;
        let size = it.size(key.len()) as u64;
        self.mem_used -= size;
        self.account_out(it.class, size);
        Some(it)
    }

    /// Whether `key` holds a live item; drops it if flushed or expired.
    fn live(&mut self, key: &[u8], now: u32) -> bool {
        let found = match self.map.peek(key) {
            None => return false,
            Some(it) if self.is_flushed(it, now) => Found::Flushed,
            Some(it) if it.expired(now) => Found::Expired,
            Some(_) => Found::Live,
        };
        match found {
            Found::Live => true,
            Found::Flushed => {
                self.remove(key);
                self.stats.get_flushed += 1;
                false
            }
            Found::Expired => {
                if let Some(it) = self.remove(key) {
                    self.account_reclaimed(it.class, it.fetched);
                    if !it.fetched {
                        self.stats.expired_unfetched += 1;
                    }
                    self.stats.reclaimed += 1;
                }
                self.stats.get_expired += 1;
                false
            }
        }
    }

    /// The live item under `key`, its access time refreshed as memcached's
    /// `do_item_update` does (without segments, also moved to the head of
    /// the LRU).
    fn bump(&mut self, key: &[u8], now: u32) -> Option<&mut Item> {
        if !self.live(key, now) {
            return None;
        }
        let slot = self.map.find(key)?;
        if !self.lru.segmented {
            let seg = self.map.segment(slot);
            self.map.move_to(slot, seg);
        }
        let it = self.map.item_mut(slot);
        if it.time < now.saturating_sub(ITEM_UPDATE_INTERVAL) {
            it.time = now;
        }
        Some(it)
    }

    /// The live item under `key`, fetched by a client (see
    /// [`Shard::fetched`]).
    fn fetch(&mut self, key: &[u8], now: u32) -> Option<&mut Item> {
        if !self.live(key, now) {
            return None;
        }
        let slot = self.map.find(key)?;
        self.fetched(slot, now);
        Some(self.map.item_mut(slot))
    }

    fn get(&mut self, key: Vec<u8>, touch: Option<u32>, value: bool, now: u32) -> Outcome {
        let plain_touch = touch.is_some() && !value;
        if touch.is_some() {
            self.stats.cmd_touch += 1;
        }
        if !plain_touch {
            self.stats.cmd_get += 1;
        }
        let Some(it) = self.fetch(&key, now) else {
            if touch.is_some() {
                self.stats.touch_misses += 1;
            }
            if !plain_touch {
                self.stats.get_misses += 1;
            }
            return Outcome::Missing(key);
        };
        if let Some(exptime) = touch {
            it.exptime = exptime;
            it.time = now;
        }
        it.fetched = true;
        let class = it.class;
        let hit = Hit { key, flags: it.flags, cas: it.cas, data: if value { it.data.clone() } else { Vec::new() } };
        if let Some(exptime) = touch {
            self.expiry.schedule(&hit.key, exptime);
        }
        if touch.is_some() {
            self.class_mut(class).touch_hits += 1;
            self.stats.touch_hits += 1;
        }
        if !plain_touch {
            self.class_mut(class).get_hits += 1;
            self.stats.get_hits += 1;
        }
        Outcome::Found(hit)
    }

    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        mode: StoreMode,
        key: Vec<u8>,
        flags: u32,
        exptime: u32,
        cas: u64,
        data: Vec<u8>,
        now: u32,
    ) -> Outcome {
        self.stats.cmd_set += 1;
        let exists = self.live(&key, now);
        let (data, flags, exptime) = match mode {
            StoreMode::Set => (data, flags, exptime),
            StoreMode::Add => {
                if exists {
                    // memcached refreshes the existing item's LRU position.
                    self.bump(&key, now);
                    return Outcome::NotStored;
                }
                (data, flags, exptime)
            }
            StoreMode::Replace => {
                if !exists {
                    return Outcome::NotStored;
                }
                (data, flags, exptime)
            }
            StoreMode::Cas => {
                let Some(old) = self.map.peek(&key[..]).filter(|_| exists) else {
                    self.stats.cas_misses += 1;
                    return Outcome::NotFound;
                };
                let class = old.class;
                if old.cas != cas {
                    self.class_mut(class).cas_badval += 1;
                    self.stats.cas_badval += 1;
                    return Outcome::Exists;
                }
                self.class_mut(class).cas_hits += 1;
                self.stats.cas_hits += 1;
                (data, flags, exptime)
            }
            StoreMode::Append | StoreMode::Prepend => {
                let Some(old) = self.map.peek(&key[..]).filter(|_| exists) else {
                    return Outcome::NotStored;
                };
                if cas != 0 && old.cas != cas {
                    return Outcome::Exists;
                }
                let mut joined = Vec::with_capacity(old.data.len() + data.len());
                if mode == StoreMode::Append {
                    joined.extend_from_slice(&old.data);
                    joined.extend_from_slice(&data);
                } else {
                    joined.extend_from_slice(&data);
                    joined.extend_from_slice(&old.data);
                }
                if !item_size_ok(key.len(), old.flags, joined.len(), self.item_size_max) {
                    return Outcome::NotStored;
                }
                (joined, old.flags, old.exptime)
            }
        };
        let item = Item::new(data, flags, exptime, now);
        match self.insert(key, item, now) {
            Some(cas) => Outcome::Stored { cas },
            None => Outcome::OutOfMemory,
        }
    }

    /// Puts `item` under `key`, replacing any old item and evicting from the
    /// LRU tail as needed. Returns the new CAS value, or `None` when the
    /// item cannot fit at all.
    fn insert(&mut self, key: Vec<u8>, mut item: Item, now: u32) -> Option<u64> {
        if self.tail_reclaim {
            self.reclaim_tail(now);
        }
        let size = item.size(key.len()) as u64;
        item.class = accounting::class_of(size);
        self.remove(&key);
        if size > self.mem_limit {
            self.class_mut(item.class).outofmemory += 1;
            self.stats.store_no_memory += 1;
            return None;
        }
        while self.mem_used + size > self.mem_limit {
            let Some(victim) = self.victim() else { break };
            let active = self.map.active(victim);
            let (k, old) = self.map.remove_slot(victim);
            self.stats.direct_reclaims += 1;
            let old_size = old.size(k.len()) as u64;
            self.mem_used -= old_size;
            self.account_out(old.class, old_size);
            self.class_mut(old.class).direct_reclaims += 1;
            if old.expired(now) || self.is_flushed(&old, now) {
                self.account_reclaimed(old.class, old.fetched);
                self.stats.reclaimed += 1;
                if !old.fetched {
                    self.stats.expired_unfetched += 1;
                }
            } else {
                super::events::evicted(|| super::events::Eviction {
                    key: &k,
                    fetched: old.fetched,
                    ttl: if old.exptime == 0 { -1 } else { i64::from(old.exptime) - i64::from(now) },
                    last_access: now.saturating_sub(old.time),
                    class: u32::from(old.class),
                    size: old.data.len(),
                });
                self.stats.evictions += 1;
                if old.exptime != 0 {
                    self.stats.evicted_nonzero += 1;
                }
                if !old.fetched {
                    self.stats.evicted_unfetched += 1;
                }
                self.stats.evicted_time = u64::from(now.saturating_sub(old.time));
                let c = self.class_mut(old.class);
                c.evicted += 1;
                c.evicted_nonzero += u64::from(old.exptime != 0);
                c.evicted_unfetched += u64::from(!old.fetched);
                c.evicted_time = u64::from(now.saturating_sub(old.time));
                c.evicted_active += u64::from(active);
            }
        }
        let cas = self.next_cas();
        item.cas = cas;
        self.mem_used += size;
        self.account_in(item.class, size);
        self.stats.total_items += 1;
        self.expiry.schedule(&key, item.exptime);
        let segment = self.entry_segment(item.exptime, now);
        self.map.insert(key.into_boxed_slice(), item, segment, size);
        Some(cas)
    }

    fn delete(&mut self, key: &[u8], cas: u64, now: u32) -> Outcome {
        if !self.live(key, now) {
            self.stats.delete_misses += 1;
            return Outcome::NotFound;
        }
        if cas != 0 && self.map.peek(key).is_some_and(|it| it.cas != cas) {
            return Outcome::Exists;
        }
        if let Some(it) = self.remove(key) {
            self.class_mut(it.class).delete_hits += 1;
        }
        self.stats.delete_hits += 1;
        Outcome::Deleted
    }

    fn arith(
        &mut self,
        key: Vec<u8>,
        incr: bool,
        delta: u64,
        create: Option<(u64, u32)>,
        cas: u64,
        now: u32,
    ) -> Outcome {
        if !self.live(&key, now) {
            if let Some((initial, exptime)) = create {
                let item = Item::new(initial.to_string().into_bytes(), 0, exptime, now);
                return match self.insert(key, item, now) {
                    Some(cas) => Outcome::Number { value: initial, cas },
                    None => Outcome::OutOfMemory,
                };
            }
            if incr {
                self.stats.incr_misses += 1;
            } else {
                self.stats.decr_misses += 1;
            }
            return Outcome::NotFound;
        }
        let new_cas = self.last_cas.wrapping_add(self.cas_step);
        let Some(it) = self.bump(&key, now) else { return Outcome::NotFound };
        let class = it.class;
        // memcached's order: an empty value, then the CAS value, then the number.
        if it.data.is_empty() {
            return Outcome::NonNumeric;
        }
        if cas != 0 && it.cas != cas {
            return Outcome::Exists;
        }
        let Some(old) = numeric::item_value(&it.data) else { return Outcome::NonNumeric };
        let value = if incr { old.wrapping_add(delta) } else { old.saturating_sub(delta) };
        let text = value.to_string();
        if text.len() <= it.data.len() {
            // In place, padded with spaces to the old length, as memcached does.
            it.data[..text.len()].copy_from_slice(text.as_bytes());
            it.data[text.len()..].fill(b' ');
            it.cas = new_cas;
            self.last_cas = new_cas;
        } else {
            // A new item, as memcached allocates: not yet fetched, and
            // without the marks of meta commands.
            let item = Item::new(text.into_bytes(), it.flags, it.exptime, now);
            let Some(c) = self.insert(key, item, now) else { return Outcome::OutOfMemory };
            self.count_arith_hit(class, incr);
            return Outcome::Number { value, cas: c };
        }
        self.count_arith_hit(class, incr);
        Outcome::Number { value, cas: new_cas }
    }

    /// memcached's flush_all: invalidates (without removing) every item
    /// stored up to now, or up to the time `delay` names.
    fn flush(&mut self, delay: i64, now: u32, started: i64) {
        if delay > 0 {
            self.oldest_live = clock::realtime(delay, now, started).saturating_sub(1);
        } else {
            self.oldest_live = now.saturating_sub(1);
            // Every item held has a smaller CAS value than the next one.
            self.oldest_cas = self.last_cas.wrapping_add(self.cas_step);
        }
        // Reclaim from the second after the flush takes effect.
        let at = self.oldest_live.max(now).saturating_add(1);
        self.crawl_at = if self.crawl_at == 0 { at } else { self.crawl_at.min(at) };
    }
}

/// Shard `index`'s part of a memory limit of `total` bytes split over
/// `count` shards: the parts add up to `total`.
pub fn share(total: u64, index: usize, count: usize) -> u64 {
    let count = count.max(1) as u64;
    let extra = u64::from((index as u64) < total % count);
    (total / count + extra).max(1)
}

mod accounting;
mod crawler;
mod dump;
mod expiry;
mod meta;
mod segments;
mod table;

#[cfg(test)]
mod tests;
