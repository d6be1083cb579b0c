//! The segmented LRU and the LRU crawler beside stock memcached 1.6.18:
//! items move from HOT to COLD and, fetched twice while COLD, to WARM;
//! short-lived items go to TEMP; the LRU settings show as memcached shows
//! them; `lru_crawler crawl` reclaims in the background in every process,
//! and the crawler's settings apply to every process. Each probe runs
//! against memcached, gossamer-kv in one process, and gossamer-kv as a
//! program of 2 processes talking to both ranks.
//!
//! Needs the `memcached` binary; without it the tests are skipped, unless
//! `GOSSAMER_KV_REQUIRE_MEMCACHED=1` is set, in which case they fail.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::program::Program;
use common::{Proc, Raw};

fn memcached(args: &[&str]) -> Option<Proc> {
    let mc = Proc::memcached(args);
    if mc.is_none() {
        common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
    }
    mc
}

/// Sends `cmd` and parses the `STAT name value` lines up to `END`.
fn stats(c: &mut Raw, cmd: &str) -> BTreeMap<String, String> {
    c.send(format!("{cmd}\r\n").as_bytes());
    let text = String::from_utf8(c.recv_until(b"END\r\n")).expect("stats are text");
    text.lines()
        .filter_map(|l| l.strip_prefix("STAT "))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn num(m: &BTreeMap<String, String>, k: &str) -> u64 {
    m.get(k).map_or(0, |v| v.parse().unwrap_or_else(|_| panic!("{k} is {v}")))
}

/// Polls `stats cmd` on `c` until `done` holds, for at most `limit`;
/// returns the last reply.
fn poll(
    c: &mut Raw,
    cmd: &str,
    limit: Duration,
    done: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let start = Instant::now();
    loop {
        let m = stats(c, cmd);
        if done(&m) || start.elapsed() > limit {
            return m;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The class memcached stores 66560-byte values with a short key in.
const BIG: &str = "items:31";

/// Stores 20 values of 66560 bytes through `a`, waits for items to move to
/// COLD (seen through `b`), fetches the first one twice through `b`, and
/// waits for it to reach WARM (seen through `a`). Returns whether items
/// moved to COLD, whether one moved to WARM, whether that item is now
/// WARM, whether a fetch counted as a hit to COLD, and whether every item
/// is still there.
fn moves(a: &mut Raw, b: &mut Raw) -> [bool; 5] {
    let value = "B".repeat(66560);
    for i in 0..20 {
        a.check(format!("set big{i} 0 0 66560\r\n{value}\r\n").as_bytes(), b"STORED\r\n");
    }
    let cold = poll(b, "stats", Duration::from_secs(6), |m| num(m, "moves_to_cold") > 0);
    let want = format!("VALUE big0 0 66560\r\n{value}\r\nEND\r\n");
    b.check(b"get big0\r\n", want.as_bytes());
    b.check(b"get big0\r\n", want.as_bytes());
    let warm = poll(a, "stats items", Duration::from_secs(6), |m| num(m, &format!("{BIG}:moves_to_warm")) > 0);
    [
        num(&cold, "moves_to_cold") > 0,
        num(&warm, &format!("{BIG}:moves_to_warm")) > 0,
        num(&warm, &format!("{BIG}:number_warm")) == 1,
        num(&warm, &format!("{BIG}:hits_to_cold")) > 0,
        num(&stats(a, "stats"), "curr_items") == 20,
    ]
}

#[test]
fn items_move_between_segments_as_in_memcached() {
    let args = ["-t", "2", "-m", "64"];
    let Some(mc) = memcached(&args) else { return };
    let want = moves(&mut mc.raw(), &mut mc.raw());
    assert_eq!(want, [true; 5], "memcached: to COLD, to WARM, number_warm, hits_to_cold, curr_items");
    let kv = Proc::kv(&args);
    assert_eq!(moves(&mut kv.raw(), &mut kv.raw()), want, "one process");
    let p = Program::start(2, &args);
    assert_eq!(moves(&mut p.raw(0), &mut p.raw(1)), want, "2 processes, stored through rank 0");
    let p = Program::start(2, &args);
    assert_eq!(moves(&mut p.raw(1), &mut p.raw(0)), want, "2 processes, stored through rank 1");
}

/// The LRU's settings as `stats settings` shows them, and where an item
/// with a TTL under `temporary_ttl` goes and where one with a longer TTL
/// does: `number_temp`, and the items of the class in the other segments
/// (`number_hot` + `number_warm` + `number_cold`: memcached's LRU
/// maintainer thread may move the long-lived item out of HOT at any time
/// after it is stored).
fn temp_lru(c: &mut Raw) -> (Vec<(String, String)>, u64, u64, bool) {
    let names = [
        "lru_segmented",
        "hot_lru_pct",
        "warm_lru_pct",
        "hot_max_factor",
        "warm_max_factor",
        "temp_lru",
        "temporary_ttl",
    ];
    let s = stats(c, "stats settings");
    let settings = names.iter().map(|n| (n.to_string(), s.get(*n).cloned().unwrap_or_default())).collect();
    let value = "B".repeat(66560);
    c.check(format!("set canary 0 30 66560\r\n{value}\r\n").as_bytes(), b"STORED\r\n");
    c.check(format!("set long 0 3600 66560\r\n{value}\r\n").as_bytes(), b"STORED\r\n");
    let items = stats(c, "stats items");
    let has_temp = items.contains_key(&format!("{BIG}:number_temp"));
    let segmented = ["hot", "warm", "cold"].iter().map(|seg| num(&items, &format!("{BIG}:number_{seg}"))).sum();
    (settings, num(&items, &format!("{BIG}:number_temp")), segmented, has_temp)
}

#[test]
fn lru_settings_and_the_temp_lru_as_in_memcached() {
    let args =
        ["-t", "2", "-o", "hot_lru_pct=10,warm_lru_pct=30,hot_max_factor=0.5,warm_max_factor=3,temporary_ttl=40"];
    let Some(mc) = memcached(&args) else { return };
    let want = temp_lru(&mut mc.raw());
    assert_eq!((want.1, want.2, want.3), (1, 1, true), "memcached: one TEMP item, one in HOT, WARM or COLD");
    assert_eq!(want.0.iter().find(|(k, _)| k == "temp_lru").map(|(_, v)| v.as_str()), Some("yes"));
    assert_eq!(temp_lru(&mut Proc::kv(&args).raw()), want, "one process");
    let p = Program::start(2, &args);
    for rank in 0..2 {
        let got = temp_lru(&mut p.raw(rank));
        assert_eq!(got.0, want.0, "rank {rank}'s settings");
        assert!(got.3, "rank {rank}: number_temp listed");
    }
    // Without segments, memcached lists no segment keys.
    let args = ["-t", "2", "-o", "no_lru_maintainer"];
    let Some(mc) = memcached(&args) else { return };
    let want = temp_lru(&mut mc.raw());
    assert_eq!(temp_lru(&mut Proc::kv(&args).raw()), want, "no_lru_segmented");
}

/// A crawl started through `b` of items stored through `a`, and the
/// crawler's settings set through one connection and read through the
/// other. Returns what each step answered or showed.
fn crawler(a: &mut Raw, b: &mut Raw) -> Vec<String> {
    let mut seen = Vec::new();
    for i in 0..40 {
        a.check(format!("set c{i} 0 {} 1\r\nx\r\n", 1 + i % 2 * 1000).as_bytes(), b"STORED\r\n");
    }
    std::thread::sleep(Duration::from_millis(2200));
    b.check(b"lru_crawler crawl all\r\n", b"OK\r\n");
    let done = |m: &BTreeMap<String, String>| num(m, "lru_crawler_running") == 0 && num(m, "crawler_reclaimed") == 20;
    let s = poll(a, "stats", Duration::from_secs(5), done);
    for k in ["curr_items", "crawler_reclaimed", "crawler_items_checked", "lru_crawler_running", "expired_unfetched"] {
        seen.push(format!("{k}={}", num(&s, k)));
    }
    b.check(b"lru_crawler sleep 50\r\n", b"OK\r\n");
    b.check(b"lru_crawler tocrawl 7\r\n", b"OK\r\n");
    a.check(b"lru_crawler disable\r\n", b"OK\r\n");
    // memcached's crawler thread notes that it stopped on its own time.
    std::thread::sleep(Duration::from_millis(500));
    let s = stats(b, "stats settings");
    for k in ["lru_crawler", "lru_crawler_sleep", "lru_crawler_tocrawl"] {
        seen.push(format!("{k}={}", s.get(k).cloned().unwrap_or_default()));
    }
    b.send(b"lru_crawler crawl all\r\n");
    seen.push(String::from_utf8_lossy(&b.recv_until(b"\r\n")).into_owned());
    b.check(b"lru_crawler enable\r\n", b"OK\r\n");
    a.send(b"lru_crawler enable\r\n");
    seen.push(String::from_utf8_lossy(&a.recv_until(b"\r\n")).into_owned());
    seen
}

#[test]
fn the_lru_crawler_runs_in_the_background_for_the_whole_program() {
    // No maintainer: only the crawler reclaims.
    let args = ["-t", "2", "-o", "no_lru_maintainer"];
    let Some(mc) = memcached(&args) else { return };
    let want = crawler(&mut mc.raw(), &mut mc.raw());
    assert_eq!(want[..3], ["curr_items=20", "crawler_reclaimed=20", "crawler_items_checked=40"], "memcached");
    let kv = Proc::kv(&args);
    assert_eq!(crawler(&mut kv.raw(), &mut kv.raw()), want, "one process");
    let p = Program::start(2, &args);
    assert_eq!(crawler(&mut p.raw(0), &mut p.raw(1)), want, "2 processes, crawl through rank 1");
    let p = Program::start(2, &args);
    assert_eq!(crawler(&mut p.raw(1), &mut p.raw(0)), want, "2 processes, crawl through rank 0");
}
