//! Unit tests of one shard, with an explicit clock.

use super::*;
use crate::store::item_size;

const STARTED: i64 = 1_700_000_000;

fn shard(mem: u64) -> Shard {
    Shard::new(ShardConfig {
        index: 0,
        count: 1,
        mem_limit: mem,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru: Default::default(),
    })
}

/// One LRU, as without memcached's segments.
fn flat() -> LruSettings {
    LruSettings { segmented: false, ..LruSettings::default() }
}

fn set(s: &mut Shard, key: &str, data: &str, exptime: i64, now: u32) -> Outcome {
    s.execute(
        Op::Store { mode: StoreMode::Set, key: key.into(), flags: 0, exptime, cas: 0, data: data.into() },
        now,
        STARTED,
    )
}

fn get(s: &mut Shard, key: &str, now: u32) -> Option<Vec<u8>> {
    match s.execute(Op::Get { key: key.into(), touch: None, value: true }, now, STARTED) {
        Outcome::Found(h) => Some(h.data),
        _ => None,
    }
}

fn store(s: &mut Shard, mode: StoreMode, key: &str, data: &str, cas: u64) -> Outcome {
    s.execute(Op::Store { mode, key: key.into(), flags: 7, exptime: 0, cas, data: data.into() }, 10, STARTED)
}

fn arith(s: &mut Shard, key: &str, incr: bool, delta: u64) -> Outcome {
    s.execute(Op::Arith { key: key.into(), incr, delta, create: None, cas: 0 }, 10, STARTED)
}

#[test]
fn set_get_delete() {
    let mut s = shard(1 << 20);
    assert!(matches!(set(&mut s, "a", "hello", 0, 10), Outcome::Stored { .. }));
    assert_eq!(get(&mut s, "a", 10).as_deref(), Some(&b"hello"[..]));
    assert_eq!(s.execute(Op::Delete { key: b"a".to_vec(), cas: 0 }, 10, STARTED), Outcome::Deleted);
    assert_eq!(s.execute(Op::Delete { key: b"a".to_vec(), cas: 0 }, 10, STARTED), Outcome::NotFound);
    assert_eq!(get(&mut s, "a", 10), None);
}

#[test]
fn conditional_stores() {
    let mut s = shard(1 << 20);
    assert_eq!(store(&mut s, StoreMode::Replace, "k", "x", 0), Outcome::NotStored);
    assert_eq!(store(&mut s, StoreMode::Append, "k", "x", 0), Outcome::NotStored);
    assert!(matches!(store(&mut s, StoreMode::Add, "k", "b", 0), Outcome::Stored { .. }));
    assert_eq!(store(&mut s, StoreMode::Add, "k", "x", 0), Outcome::NotStored);
    assert!(matches!(store(&mut s, StoreMode::Append, "k", "c", 0), Outcome::Stored { .. }));
    assert!(matches!(store(&mut s, StoreMode::Prepend, "k", "a", 0), Outcome::Stored { .. }));
    assert_eq!(get(&mut s, "k", 10).as_deref(), Some(&b"abc"[..]));
}

#[test]
fn cas_values_are_unique_and_checked() {
    let mut s = shard(1 << 20);
    let Outcome::Stored { cas: c1 } = set(&mut s, "a", "1", 0, 10) else { panic!() };
    let Outcome::Stored { cas: c2 } = set(&mut s, "b", "1", 0, 10) else { panic!() };
    assert_ne!(c1, c2);
    assert_eq!(store(&mut s, StoreMode::Cas, "a", "2", c1 + 100), Outcome::Exists);
    assert!(matches!(store(&mut s, StoreMode::Cas, "a", "2", c1), Outcome::Stored { .. }));
    assert_eq!(store(&mut s, StoreMode::Cas, "a", "3", c1), Outcome::Exists);
    assert_eq!(store(&mut s, StoreMode::Cas, "zz", "3", c1), Outcome::NotFound);
}

#[test]
fn cas_unique_across_shards() {
    let mut a = Shard::new(ShardConfig {
        index: 0,
        count: 2,
        mem_limit: 1 << 20,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru: Default::default(),
    });
    let mut b = Shard::new(ShardConfig {
        index: 1,
        count: 2,
        mem_limit: 1 << 20,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru: Default::default(),
    });
    let mut seen = std::collections::HashSet::new();
    for i in 0..50 {
        for s in [&mut a, &mut b] {
            let Outcome::Stored { cas } = set(s, &format!("k{i}"), "v", 0, 10) else { panic!() };
            assert!(cas != 0 && seen.insert(cas));
        }
    }
}

#[test]
fn incr_decr_like_memcached() {
    let mut s = shard(1 << 20);
    set(&mut s, "n", "10", 0, 10);
    assert!(matches!(arith(&mut s, "n", false, 1), Outcome::Number { value: 9, .. }));
    // Shorter results are padded in place.
    assert_eq!(get(&mut s, "n", 10).as_deref(), Some(&b"9 "[..]));
    assert!(matches!(arith(&mut s, "n", true, 5), Outcome::Number { value: 14, .. }));
    assert!(matches!(arith(&mut s, "n", false, 100), Outcome::Number { value: 0, .. }));
    set(&mut s, "m", "18446744073709551615", 0, 10);
    assert!(matches!(arith(&mut s, "m", true, 2), Outcome::Number { value: 1, .. }));
    assert_eq!(get(&mut s, "m", 10).unwrap().len(), 20);
    set(&mut s, "x", "abc", 0, 10);
    assert_eq!(arith(&mut s, "x", true, 1), Outcome::NonNumeric);
    set(&mut s, "e", "", 0, 10);
    assert_eq!(arith(&mut s, "e", true, 1), Outcome::NonNumeric);
    assert_eq!(arith(&mut s, "nope", true, 1), Outcome::NotFound);
    // Growing past the old length stores a new, longer value.
    set(&mut s, "g", "9", 0, 10);
    assert!(matches!(arith(&mut s, "g", true, 1), Outcome::Number { value: 10, .. }));
    assert_eq!(get(&mut s, "g", 10).as_deref(), Some(&b"10"[..]));
}

#[test]
fn binary_incr_creates() {
    let mut s = shard(1 << 20);
    let op = Op::Arith { key: b"c".to_vec(), incr: true, delta: 5, create: Some((100, 0)), cas: 0 };
    assert!(matches!(s.execute(op.clone(), 10, STARTED), Outcome::Number { value: 100, .. }));
    assert!(matches!(s.execute(op, 10, STARTED), Outcome::Number { value: 105, .. }));
}

#[test]
fn expiry() {
    let mut s = shard(1 << 20);
    set(&mut s, "a", "x", 5, 10);
    assert!(get(&mut s, "a", 14).is_some());
    assert!(get(&mut s, "a", 15).is_none());
    set(&mut s, "b", "x", -1, 10);
    assert!(get(&mut s, "b", 10).is_none());
    // Absolute time in the past.
    set(&mut s, "c", "x", STARTED - 5, 10);
    assert!(get(&mut s, "c", 10).is_none());
    // Absolute time in the future.
    set(&mut s, "d", "x", STARTED + 100, 10);
    assert!(get(&mut s, "d", 99).is_some());
    assert!(get(&mut s, "d", 100).is_none());
}

#[test]
fn touch_and_gat() {
    let mut s = shard(1 << 20);
    set(&mut s, "a", "x", 5, 10);
    let t = s.execute(Op::Get { key: b"a".to_vec(), touch: Some(100), value: false }, 11, STARTED);
    assert!(matches!(t, Outcome::Found(_)));
    assert!(get(&mut s, "a", 50).is_some());
    let t = s.execute(Op::Get { key: b"zz".to_vec(), touch: Some(100), value: true }, 11, STARTED);
    assert!(matches!(t, Outcome::Missing(_)));
}

#[test]
fn flush_now_and_later() {
    let mut s = shard(1 << 20);
    set(&mut s, "a", "x", 0, 10);
    s.execute(Op::Flush { delay: 0 }, 10, STARTED);
    assert!(get(&mut s, "a", 10).is_none());
    set(&mut s, "b", "x", 0, 10);
    assert!(get(&mut s, "b", 10).is_some());
    s.execute(Op::Flush { delay: 5 }, 10, STARTED);
    assert!(get(&mut s, "b", 12).is_some());
    assert!(get(&mut s, "b", 16).is_none());
}

#[test]
fn lru_eviction_under_memory_limit() {
    let item = item_size(2, 0, 100) as u64;
    let mut s = Shard::new(ShardConfig {
        index: 0,
        count: 1,
        mem_limit: item * 3,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru: flat(),
    });
    let v = "x".repeat(100);
    set(&mut s, "k1", &v, 0, 10);
    set(&mut s, "k2", &v, 0, 10);
    set(&mut s, "k3", &v, 0, 10);
    // Touch k1 so that k2 is the least recently used.
    assert!(get(&mut s, "k1", 10).is_some());
    set(&mut s, "k4", &v, 0, 10);
    assert!(get(&mut s, "k2", 10).is_none());
    assert!(get(&mut s, "k1", 10).is_some());
    assert!(get(&mut s, "k4", 10).is_some());
    let st = s.stats(10);
    assert_eq!(st.evictions, 1);
    assert_eq!(st.curr_items, 3);
    assert!(st.bytes <= item * 3);
    // An item larger than the whole shard is refused.
    let big = "y".repeat(10_000);
    assert_eq!(set(&mut s, "big", &big, 0, 10), Outcome::OutOfMemory);
}

#[test]
fn append_past_item_limit_is_not_stored() {
    let mut s = Shard::new(ShardConfig {
        index: 0,
        count: 1,
        mem_limit: 1 << 30,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru: Default::default(),
    });
    set(&mut s, "a", &"x".repeat(1_048_516), 0, 10);
    assert_eq!(store(&mut s, StoreMode::Append, "a", "y", 0), Outcome::NotStored);
}

#[test]
fn stats_count() {
    let mut s = shard(1 << 20);
    set(&mut s, "a", "x", 0, 10);
    get(&mut s, "a", 10);
    get(&mut s, "b", 10);
    let st = s.stats(10);
    assert_eq!((st.cmd_get, st.get_hits, st.get_misses, st.cmd_set, st.curr_items, st.bytes), (2, 1, 1, 1, 1, 61));
    let Outcome::Stats(_) = s.execute(Op::Stats { reset: true }, 10, STARTED) else { panic!() };
    let st = s.stats(10);
    assert_eq!((st.cmd_get, st.curr_items), (0, 1));
}

fn curr_items(s: &Shard, now: u32) -> u64 {
    s.stats(now).curr_items
}

#[test]
fn flushed_items_count_until_touched_or_crawled() {
    let mut s = shard(1 << 20);
    for k in ["a", "b", "c"] {
        set(&mut s, k, "x", 0, 10);
    }
    get(&mut s, "c", 10);
    s.execute(Op::Flush { delay: 0 }, 10, STARTED);
    // Marked invalid, not removed: memcached still counts them.
    assert_eq!((curr_items(&s, 10), s.stats(10).bytes), (3, 3 * 61));
    assert_eq!(get(&mut s, "a", 10), None);
    assert_eq!(curr_items(&s, 10), 2);
    assert_eq!(s.stats(10).get_flushed, 1);
    // A store after the flush, in the same second, is live.
    set(&mut s, "d", "x", 0, 10);
    assert_eq!(curr_items(&s, 10), 3);
    // From the next second, requests reclaim the flushed tail.
    assert_eq!(get(&mut s, "zz", 11), None);
    let st = s.stats(11);
    assert_eq!((st.curr_items, st.reclaimed, st.expired_unfetched, st.bytes), (1, 2, 1, 61));
    assert_eq!(get(&mut s, "d", 11).as_deref(), Some(&b"x"[..]));
}

#[test]
fn stats_request_reclaims_every_flushed_item() {
    let mut s = shard(1 << 24);
    let n = CRAWL_BUDGET * 3 + 5;
    for i in 0..n {
        set(&mut s, &format!("k{i}"), "x", 0, 10);
    }
    s.execute(Op::Flush { delay: 0 }, 10, STARTED);
    // Requests in the flush's second leave them; later ones take a budget each.
    let Outcome::Stats(st) = s.execute(Op::Stats { reset: false }, 10, STARTED) else { panic!() };
    assert_eq!(st.curr_items, n as u64);
    get(&mut s, "zz", 11);
    assert_eq!(curr_items(&s, 11), (n - CRAWL_BUDGET) as u64);
    let Outcome::Stats(st) = s.execute(Op::Stats { reset: false }, 11, STARTED) else { panic!() };
    assert_eq!((st.curr_items, st.reclaimed, st.bytes), (0, n as u64, 0));
}

#[test]
fn delayed_flush_after_flush_keeps_items_flushed() {
    let mut s = shard(1 << 20);
    set(&mut s, "a", "x", 0, 10);
    s.execute(Op::Flush { delay: 0 }, 10, STARTED);
    s.execute(Op::Flush { delay: 100 }, 10, STARTED);
    assert_eq!(get(&mut s, "a", 10), None);
    set(&mut s, "b", "x", 0, 10);
    assert!(get(&mut s, "b", 50).is_some());
    // The delayed flush takes effect at 109 and is crawled from 110.
    assert_eq!(curr_items(&s, 50), 1);
    s.execute(Op::Stats { reset: false }, 110, STARTED);
    assert_eq!(curr_items(&s, 110), 0);
}

#[test]
fn stores_count_direct_reclaims() {
    let item = item_size(2, 0, 100) as u64;
    let mut s = shard(item * 2);
    let v = "x".repeat(100);
    for k in ["k1", "k2", "k3", "k4"] {
        set(&mut s, k, &v, 0, 10);
    }
    assert_eq!(s.stats(10).direct_reclaims, 2);
}

#[test]
fn maintain_reclaims_expired_items_nobody_asks_for() {
    let mut s = shard(1 << 20);
    set(&mut s, "a", "x", 2, 10); // due at 12
    set(&mut s, "b", "x", 5, 10); // due at 15
    set(&mut s, "c", "x", 0, 10); // never
    set(&mut s, "d", "x", 2, 10);
    // `d` is touched to a later time, `a` replaced by an item without one.
    s.execute(Op::Get { key: b"d".to_vec(), touch: Some(10), value: false }, 11, STARTED);
    set(&mut s, "a", "y", 0, 11);
    assert!(!s.maintain(11, 100));
    assert_eq!(curr_items(&s, 11), 4);
    assert!(!s.maintain(12, 100));
    assert_eq!((curr_items(&s, 12), s.stats(12).reclaimed), (4, 0));
    assert!(!s.maintain(15, 100));
    let st = s.stats(15);
    assert_eq!((st.curr_items, st.reclaimed, st.expired_unfetched, st.bytes), (3, 1, 1, 3 * 61));
    assert!(!s.maintain(21, 100));
    assert_eq!((curr_items(&s, 21), s.stats(21).reclaimed), (2, 2));
    assert_eq!(get(&mut s, "a", 21).as_deref(), Some(&b"y"[..]));
    assert_eq!(get(&mut s, "c", 21).as_deref(), Some(&b"x"[..]));
}

#[test]
fn maintain_works_in_batches_and_follows_meta_ttls() {
    let mut s = shard(1 << 24);
    for i in 0..10 {
        set(&mut s, &format!("k{i}"), "x", 1, 10);
    }
    assert!(s.maintain(11, 4));
    assert!(s.maintain(11, 4));
    assert!(!s.maintain(11, 4));
    assert_eq!((curr_items(&s, 11), s.stats(11).reclaimed), (0, 10));
    // An item without a TTL given one by `mg T`.
    set(&mut s, "m", "x", 0, 11);
    let mut op = crate::store::meta::MetaOp::new(crate::store::meta::MetaKind::Get, b"m".to_vec());
    op.flags.push(crate::store::meta::MetaFlag::SetTtl);
    op.ttl = Some(1);
    s.execute(Op::Meta(Box::new(op)), 11, STARTED);
    assert!(!s.maintain(12, 100));
    assert_eq!(curr_items(&s, 12), 0);
}

#[test]
fn maintain_reclaims_flushed_items() {
    let mut s = shard(1 << 20);
    for k in ["a", "b"] {
        set(&mut s, k, "x", 0, 10);
    }
    s.execute(Op::Flush { delay: 0 }, 10, STARTED);
    assert!(!s.maintain(10, 100));
    assert_eq!(curr_items(&s, 10), 2);
    assert!(!s.maintain(11, 100));
    assert_eq!((curr_items(&s, 11), s.stats(11).reclaimed), (0, 2));
}

#[test]
fn without_the_maintainer_stores_reclaim_expired_items_from_the_tail() {
    let mut s = Shard::new(ShardConfig {
        index: 0,
        count: 1,
        mem_limit: 1 << 20,
        item_size_max: 1 << 20,
        tail_reclaim: true,
        lru: flat(),
    });
    for i in 0..7 {
        set(&mut s, &format!("k{i}"), "x", 1, 10);
    }
    set(&mut s, "live", "x", 0, 10);
    assert_eq!(curr_items(&s, 11), 8);
    // A store looks at five items of the tail, all expired.
    set(&mut s, "a", "x", 0, 11);
    assert_eq!((curr_items(&s, 11), s.stats(11).reclaimed), (4, 5));
    // Then two more, up to the live one.
    set(&mut s, "b", "x", 0, 11);
    assert_eq!((curr_items(&s, 11), s.stats(11).reclaimed), (3, 7));
}

fn class_of(s: &Shard, key_len: usize, len: usize, now: u32) -> ClassStats {
    let class = accounting::class_of(item_size(key_len, 0, len) as u64);
    s.stats(now).classes[usize::from(class) - 1].clone()
}

#[test]
fn segmented_items_enter_hot_and_the_maintainer_moves_them_to_cold() {
    let mut s = shard(1 << 24);
    for i in 0..10 {
        set(&mut s, &format!("k{i}"), "x", 0, 10);
    }
    let c = class_of(&s, 2, 1, 10);
    assert_eq!((c.segments, c.moves_to_cold), ([10, 0, 0, 0], 0));
    s.maintain(10, 1024);
    let c = class_of(&s, 2, 1, 10);
    // HOT keeps at most 20% of the bytes.
    assert_eq!((c.segments, c.moves_to_cold), ([2, 0, 8, 0], 8));
    assert_eq!(s.stats(12).oldest_age, 2);
    // Older than COLD's tail times hot_max_factor: on to COLD.
    s.maintain(12, 1024);
    assert_eq!(class_of(&s, 2, 1, 12).segments, [0, 0, 10, 0]);
}

#[test]
fn a_second_fetch_while_cold_moves_an_item_to_warm_and_saves_it_from_eviction() {
    let item = item_size(2, 0, 100) as u64;
    let mut s = shard(item * 4);
    let v = "x".repeat(100);
    for k in ["k0", "k1", "k2", "k3"] {
        set(&mut s, k, &v, 0, 10);
    }
    s.maintain(11, 1024);
    assert_eq!(class_of(&s, 2, 100, 11).segments[2], 4, "all COLD (HOT over 20%)");
    // The first fetch marks it fetched, the second active: to WARM.
    assert!(get(&mut s, "k0", 11).is_some());
    assert_eq!(class_of(&s, 2, 100, 11).moves_to_warm, 0);
    assert!(get(&mut s, "k0", 11).is_some());
    let c = class_of(&s, 2, 100, 11);
    assert_eq!((c.segments, c.moves_to_warm), ([0, 1, 3, 0], 1));
    assert_eq!(c.hits_to, [0, 0, 2, 0]);
    // Stores evict from COLD: k0, the least recently stored, stays.
    for k in ["n0", "n1", "n2"] {
        set(&mut s, k, &v, 0, 12);
    }
    assert!(get(&mut s, "k0", 12).is_some());
    for k in ["k1", "k2", "k3"] {
        assert!(get(&mut s, k, 12).is_none(), "{k} evicted");
    }
    assert_eq!(s.stats(12).evictions, 3);
}

#[test]
fn short_lived_items_go_to_temp_and_are_not_evicted_before_others() {
    let item = item_size(2, 0, 100) as u64;
    let lru = LruSettings { temp_lru: true, temporary_ttl: 61, ..LruSettings::default() };
    let mut s = Shard::new(ShardConfig {
        index: 0,
        count: 1,
        mem_limit: item * 3,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru,
    });
    let v = "x".repeat(100);
    set(&mut s, "t0", &v, 30, 10);
    assert_eq!(class_of(&s, 2, 100, 10).segments, [0, 0, 0, 1]);
    for i in 0..10 {
        s.maintain(10 + i, 1024);
        set(&mut s, &format!("h{i}"), &v, 3600, 10 + i);
    }
    assert!(get(&mut s, "t0", 20).is_some(), "TEMP is evicted last");
    let c = class_of(&s, 2, 100, 20);
    assert_eq!(c.segments[3], 1);
    assert!(c.evicted > 0 && c.segments[0] > 0);
    // Expired TEMP items are reclaimed by the maintainer.
    s.maintain(41, 1024);
    assert_eq!(class_of(&s, 2, 100, 41).segments[3], 0);
}

#[test]
fn without_segments_every_item_is_cold() {
    let mut s = Shard::new(ShardConfig {
        index: 0,
        count: 1,
        mem_limit: 1 << 20,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru: flat(),
    });
    set(&mut s, "a", "x", 0, 10);
    assert!(get(&mut s, "a", 10).is_some());
    assert!(get(&mut s, "a", 10).is_some());
    s.maintain(11, 1024);
    let c = class_of(&s, 1, 1, 11);
    assert_eq!((c.segments, c.moves_to_cold, c.moves_to_warm), ([0, 0, 1, 0], 0, 0));
}

#[test]
fn a_crawl_walks_in_bounded_steps_and_reclaims_what_is_dead() {
    let mut s = shard(1 << 24);
    for i in 0..1000 {
        set(&mut s, &format!("k{i}"), "x", if i % 2 == 0 { 1 } else { 0 }, 10);
    }
    s.execute(Op::Crawl { classes: None, tocrawl: 0 }, 12, STARTED);
    // The request ran one step: the rest is left for the maintainer.
    assert!(s.crawling() && s.stats(12).crawling);
    let checked = s.stats(12).crawler_items_checked;
    assert_eq!(checked, CRAWL_STEP as u64);
    let mut steps = 0;
    while s.crawl_step(12, CRAWL_STEP) {
        steps += 1;
    }
    assert!(!s.crawling() && steps >= 2);
    let st = s.stats(12);
    assert_eq!((st.crawler_items_checked, st.crawler_reclaimed, st.curr_items), (1000, 500, 500));
    // `tocrawl` bounds the items checked per class.
    s.execute(Op::Crawl { classes: None, tocrawl: 10 }, 12, STARTED);
    while s.crawl_step(12, CRAWL_STEP) {}
    assert_eq!(s.stats(12).crawler_items_checked, 1010);
}

#[test]
fn an_active_item_evicted_when_nothing_else_is_left_counts_as_evicted_active() {
    let item = item_size(1, 0, 100) as u64;
    let lru = LruSettings { temp_lru: true, ..LruSettings::default() };
    let mut s = Shard::new(ShardConfig {
        index: 0,
        count: 1,
        mem_limit: item,
        item_size_max: 1 << 20,
        tail_reclaim: false,
        lru,
    });
    let v = "x".repeat(100);
    // A TEMP item, active after two fetches (TEMP items never move).
    set(&mut s, "t", &v, 30, 10);
    assert!(get(&mut s, "t", 10).is_some());
    assert!(get(&mut s, "t", 10).is_some());
    set(&mut s, "b", &v, 0, 10);
    assert!(get(&mut s, "t", 10).is_none());
    let c = class_of(&s, 1, 100, 10);
    assert_eq!((c.evicted, c.evicted_active, c.hits_to), (1, 1, [0, 0, 0, 2]));
    // A HOT item rescued to WARM on the way down is no longer active.
    let mut s = shard(item);
    set(&mut s, "a", &v, 0, 10);
    assert!(get(&mut s, "a", 10).is_some());
    assert!(get(&mut s, "a", 10).is_some());
    set(&mut s, "b", &v, 0, 10);
    let c = class_of(&s, 1, 100, 10);
    assert_eq!((c.evicted, c.evicted_active, c.moves_to_warm, c.moves_to_cold), (1, 0, 1, 1));
}
