//! `stats`, `stats settings` and `stats conns` beside stock memcached: the
//! same keys in the same order (then this server's own), the same shape of
//! connection listing, and the same `curr_items` around `flush_all`.
//!
//! Needs the `memcached` binary; without it the tests are skipped, unless
//! `GOSSAMER_KV_REQUIRE_MEMCACHED=1` is set, in which case they fail.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{bin_req, Proc, Raw};

/// This server's keys after memcached's in `stats` (a program of several
/// processes adds `processes` and `rank`).
const GENERAL_EXTRAS: &[&str] = &[];
/// This server's keys after memcached's in `stats settings`.
const SETTINGS_EXTRAS: &[&str] = &["processes", "shards", "dedicated_trustees", "idle_spin_us", "wait_spin_us"];
/// `stats settings` values that legitimately differ with the same flags:
/// the port and the key hash.
const SETTINGS_DIFFER: &[&str] = &["tcpport", "hash_algorithm"];

fn server_pair() -> Option<(Proc, Proc)> {
    match Proc::memcached(&["-t", "2"]) {
        Some(mc) => Some((mc, Proc::kv(&["-t", "2"]))),
        None => {
            common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
            None
        }
    }
}

/// Sends `cmd` and parses the `STAT name value` lines up to `END`.
fn stats(c: &mut Raw, cmd: &str) -> Vec<(String, String)> {
    c.send(format!("{cmd}\r\n").as_bytes());
    let text = String::from_utf8(c.recv_until(b"END\r\n")).expect("stats are text");
    let mut lines: Vec<&str> = text.split("\r\n").collect();
    assert_eq!(lines.pop(), Some(""));
    assert_eq!(lines.pop(), Some("END"), "{cmd}: {text}");
    lines
        .into_iter()
        .map(|l| {
            let parts: Vec<&str> = l.split(' ').collect();
            assert!(parts.len() == 3 && parts[0] == "STAT" && !parts[2].is_empty(), "{cmd}: bad line {l:?}");
            (parts[1].to_string(), parts[2].to_string())
        })
        .collect()
}

fn keys(s: &[(String, String)]) -> Vec<&str> {
    s.iter().map(|(k, _)| k.as_str()).collect()
}

/// Ours must be memcached's keys in order, then exactly `extras`.
fn check_keys<M: AsRef<str>, O: AsRef<str>>(what: &str, mc: &[M], ours: &[O], extras: &[&str]) {
    let mc: Vec<&str> = mc.iter().map(AsRef::as_ref).collect();
    let ours: Vec<&str> = ours.iter().map(AsRef::as_ref).collect();
    assert!(ours.len() >= mc.len(), "{what}: memcached has {} keys, ours {}", mc.len(), ours.len());
    for (i, (m, o)) in mc.iter().zip(&ours).enumerate() {
        assert_eq!(o, m, "{what}: key {i} differs\nmemcached: {mc:?}\nours: {ours:?}");
    }
    assert_eq!(&ours[mc.len()..], extras, "{what}: our own keys");
}

#[test]
fn stats_and_settings_keys_match_memcached_in_order() {
    let Some((mc, kv)) = server_pair() else { return };
    let (mut a, mut b) = (mc.raw(), kv.raw());
    // Some traffic first, so that nothing is printed only when non-zero.
    for c in [&mut a, &mut b] {
        c.send(b"set k 0 0 1\r\nx\r\nget k\r\nget nope\r\n");
        c.recv_until(b"END\r\nEND\r\n");
    }
    let (mc_general, kv_general) = (stats(&mut a, "stats"), stats(&mut b, "stats"));
    check_keys("stats", &keys(&mc_general), &keys(&kv_general), GENERAL_EXTRAS);

    let (mc_settings, kv_settings) = (stats(&mut a, "stats settings"), stats(&mut b, "stats settings"));
    check_keys("stats settings", &keys(&mc_settings), &keys(&kv_settings), SETTINGS_EXTRAS);
    // With the same flags the values agree, fixed ones included.
    for ((k, want), (_, got)) in mc_settings.iter().zip(&kv_settings) {
        if !SETTINGS_DIFFER.contains(&k.as_str()) {
            assert_eq!(got, want, "stats settings {k}");
        }
    }
    eprintln!(
        "stats: memcached {} keys, ours {}; stats settings: memcached {}, ours {}",
        mc_general.len(),
        kv_general.len(),
        mc_settings.len(),
        kv_settings.len()
    );
}

/// Reads binary stat packets up to the empty one; checks their status.
fn bin_stats(c: &mut Raw, key: &[u8]) -> Vec<String> {
    c.send(&bin_req(0x10, key, b"", b"", 7, 0));
    let mut names = Vec::new();
    loop {
        let r = c.recv_bin();
        assert_eq!((r.opcode, r.status, r.opaque), (0x10, 0, 7), "stat {key:?}: {r:?}");
        if r.key.is_empty() {
            return names;
        }
        names.push(String::from_utf8(r.key).expect("stat names are text"));
    }
}

#[test]
fn binary_stat_lists_the_same_keys() {
    let Some((mc, kv)) = server_pair() else { return };
    let (mut a, mut b) = (mc.raw(), kv.raw());
    let (mc_keys, kv_keys) = (bin_stats(&mut a, b""), bin_stats(&mut b, b""));
    check_keys("binary stat", &mc_keys, &kv_keys, GENERAL_EXTRAS);
    let (mc_keys, kv_keys) = (bin_stats(&mut a, b"settings"), bin_stats(&mut b, b"settings"));
    check_keys("binary stat settings", &mc_keys, &kv_keys, SETTINGS_EXTRAS);
    // Neither lists connections in the binary protocol.
    for c in [&mut a, &mut b] {
        c.send(&bin_req(0x10, b"conns", b"", b"", 8, 0));
        let r = c.recv_bin();
        assert_eq!((r.status, r.opaque), (0x0001, 8), "binary stat conns: {r:?}");
    }
}

/// One `stats conns` entry.
#[derive(Debug, Default)]
struct Entry {
    fields: Vec<String>,
    addr: String,
    listen_addr: Option<String>,
    state: String,
    secs: u32,
}

const STATES: &[&str] = &[
    "conn_listening",
    "conn_new_cmd",
    "conn_waiting",
    "conn_read",
    "conn_parse_cmd",
    "conn_write",
    "conn_nread",
    "conn_swallow",
    "conn_closing",
    "conn_mwrite",
    "conn_closed",
    "conn_watch",
    "conn_io_queue",
];

/// Parses `stats conns`, checking each line's shape; entries by fd.
fn conns(c: &mut Raw) -> BTreeMap<u32, Entry> {
    let mut out: BTreeMap<u32, Entry> = BTreeMap::new();
    let mut order = Vec::new();
    for (k, v) in stats(c, "stats conns") {
        let (fd, field) = k.split_once(':').unwrap_or_else(|| panic!("stats conns key {k:?}"));
        let fd: u32 = fd.parse().unwrap_or_else(|_| panic!("stats conns key {k:?}"));
        if order.last() != Some(&fd) {
            assert!(!out.contains_key(&fd), "fd {fd} listed twice");
            assert!(order.last().is_none_or(|&l| l < fd), "fds out of order: {order:?} then {fd}");
            order.push(fd);
        }
        let e = out.entry(fd).or_default();
        e.fields.push(field.to_string());
        match field {
            "addr" => e.addr = v,
            "listen_addr" => e.listen_addr = Some(v),
            "state" => {
                assert!(STATES.contains(&v.as_str()), "state {v:?}");
                e.state = v;
            }
            "secs_since_last_cmd" => e.secs = v.parse().unwrap_or_else(|_| panic!("secs_since_last_cmd {v:?}")),
            _ => panic!("unexpected field {field:?}"),
        }
    }
    for e in out.values() {
        let want: &[&str] = if e.state == "conn_listening" {
            &["addr", "state", "secs_since_last_cmd"]
        } else {
            &["addr", "listen_addr", "state", "secs_since_last_cmd"]
        };
        assert_eq!(e.fields, want, "{e:?}");
        assert!(e.addr.starts_with("tcp:127.0.0.1:"), "{e:?}");
    }
    out
}

/// Client connections in known states: port → the state memcached shows.
fn clients(p: &Proc) -> (Vec<Raw>, Vec<(u16, &'static str)>) {
    let idle = p.raw();
    let mut used = p.raw();
    used.check(b"version\r\n", b"VERSION ");
    used.recv_until(b"\r\n");
    let mut nread = p.raw();
    nread.send(b"set a 0 0 10\r\nabc");
    let mut swallow = p.raw();
    swallow.send(b"set a 0 0 2000000\r\nabc");
    let mut partial = p.raw();
    partial.send(b"get a");
    let roles = vec![
        (idle.stream.local_addr().unwrap().port(), "conn_new_cmd"),
        (used.stream.local_addr().unwrap().port(), "conn_read"),
        (nread.stream.local_addr().unwrap().port(), "conn_nread"),
        (swallow.stream.local_addr().unwrap().port(), "conn_swallow"),
        (partial.stream.local_addr().unwrap().port(), "conn_read"),
    ];
    (vec![idle, used, nread, swallow, partial], roles)
}

/// Client states by peer port, once they are what `roles` says (the
/// servers may not have read everything yet), and the listening entries.
fn settled(p: &Proc, asker: &mut Raw, roles: &[(u16, &str)]) -> (BTreeMap<u16, String>, Vec<Entry>) {
    let me = asker.stream.local_addr().unwrap().port();
    let start = Instant::now();
    loop {
        let all = conns(asker);
        let mut by_port = BTreeMap::new();
        let mut listening = Vec::new();
        for e in all.into_values() {
            if e.state == "conn_listening" {
                listening.push(e);
                continue;
            }
            assert_eq!(e.listen_addr.as_deref(), Some(format!("tcp:{}", p.addr).as_str()), "{e:?}");
            let port: u16 = e.addr.rsplit(':').next().unwrap().parse().unwrap();
            by_port.insert(port, e.state);
        }
        let want: BTreeMap<u16, String> =
            roles.iter().map(|&(port, s)| (port, s.to_string())).chain([(me, "conn_parse_cmd".to_string())]).collect();
        if by_port == want || start.elapsed() > Duration::from_secs(3) {
            return (by_port, listening);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn stats_conns_has_memcacheds_shape() {
    let Some((mc, kv)) = server_pair() else { return };
    let mut seen = Vec::new();
    for p in [&mc, &kv] {
        let (_keep, roles) = clients(p);
        let mut asker = p.raw();
        let (by_port, listening) = settled(p, &mut asker, &roles);
        // One listening socket, shown by its own address.
        assert_eq!(listening.len(), 1, "{listening:?}");
        assert_eq!(listening[0].addr, format!("tcp:{}", p.addr));
        assert_eq!(listening[0].listen_addr, None);
        // One entry per client connection, in memcached's state for it.
        let mut want: BTreeMap<u16, String> = roles.iter().map(|&(port, s)| (port, s.to_string())).collect();
        want.insert(asker.stream.local_addr().unwrap().port(), "conn_parse_cmd".into());
        assert_eq!(by_port, want, "states by client port");
        seen.push(roles.iter().map(|&(port, _)| by_port[&port].clone()).collect::<Vec<_>>());
    }
    assert_eq!(seen[1], seen[0], "states of the same clients: ours, then memcached's");
}

#[test]
fn stats_conns_follows_connections_and_idle_time() {
    let Some((mc, kv)) = server_pair() else { return };
    for p in [&mc, &kv] {
        let mut asker = p.raw();
        let before = conns(&mut asker).len();
        let extra: Vec<Raw> = (0..3).map(|_| p.raw()).collect();
        let start = Instant::now();
        while conns(&mut asker).len() != before + 3 {
            assert!(start.elapsed() < Duration::from_secs(3), "new connections not listed");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(extra);
        while conns(&mut asker).len() != before {
            assert!(start.elapsed() < Duration::from_secs(3), "closed connections still listed");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // A connection idle for over a second says so (memcached's clock ticks
    // once a second, so give it two).
    let idle: Vec<(u16, Raw)> = [&mc, &kv]
        .map(|p| {
            let mut c = p.raw();
            c.check(b"version\r\n", b"VERSION ");
            c.recv_until(b"\r\n");
            (c.stream.local_addr().unwrap().port(), c)
        })
        .into_iter()
        .collect();
    std::thread::sleep(Duration::from_millis(2100));
    for (p, (port, _)) in [&mc, &kv].into_iter().zip(&idle) {
        let mut asker = p.raw();
        let all = conns(&mut asker);
        let e = all.values().find(|e| e.addr.ends_with(&format!(":{port}"))).expect("idle connection listed");
        assert_eq!(e.state, "conn_read");
        assert!(e.secs >= 1, "{}: {e:?}", p.addr);
        let me = all.values().find(|e| e.state == "conn_parse_cmd").expect("the asking connection");
        assert_eq!(me.secs, 0, "{}: {me:?}", p.addr);
    }
}

/// `curr_items`, `get_flushed` and `reclaimed`.
type Items = (u64, u64, u64);

/// A step's reply and [`Items`] after it.
type Step = (String, Items);

/// [`Items`] from a `stats` reply.
fn item_stats(block: &str) -> Items {
    let all: BTreeMap<&str, u64> = block
        .lines()
        .filter_map(|l| l.strip_prefix("STAT ")?.split_once(' '))
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect();
    (all["curr_items"], all["get_flushed"], all["reclaimed"])
}

/// Sends each step followed by `stats`, all in one write (so that a
/// server's background reclaim hardly ever falls in between), and returns
/// each step's reply with `item_stats` after it.
fn steps(c: &mut Raw, steps: &[&str]) -> Vec<Step> {
    let script: String = steps.iter().map(|s| format!("{s}stats\r\n")).chain(["mn\r\n".into()]).collect();
    c.send(script.as_bytes());
    let got = String::from_utf8(c.recv_until(b"MN\r\n")).unwrap();
    let mut rest = &got[..got.len() - 4];
    let mut out = Vec::new();
    while let Some(at) = rest.find("STAT pid ") {
        let end = at + rest[at..].find("END\r\n").expect("stats end") + 5;
        out.push((rest[..at].to_string(), item_stats(&rest[at..end])));
        rest = &rest[end..];
    }
    assert_eq!((out.len(), rest), (steps.len(), ""), "{got}");
    out
}

/// The replies and `item_stats` after each step; `None` if the server
/// reclaimed flushed items in the background before the wait (memcached's
/// LRU maintainer may come by at any moment, ours at the next second),
/// which would make the comparison depend on timing.
fn flush_script(p: &Proc) -> Option<Vec<Step>> {
    let mut c = p.raw();
    let sets: String = (0..10).map(|i| format!("set k{i} 0 0 1\r\nx\r\n")).collect();
    let mut out = steps(
        &mut c,
        &[
            &sets,
            "flush_all\r\n",
            "get k0 k1\r\n",
            "set k2 0 0 1\r\ny\r\n",
            "delete k3\r\ntouch k4 10\r\nincr k5 1\r\n",
            "set n1 0 0 1\r\nz\r\nget k2 n1\r\n",
        ],
    );
    if out.iter().any(|(_, (_, _, reclaimed))| *reclaimed != 0) {
        return None;
    }
    // memcached's LRU maintainer visits an idle LRU at least once a second.
    std::thread::sleep(Duration::from_millis(2500));
    out.extend(steps(&mut c, &["get k2\r\n"]));
    Some(out)
}

#[test]
fn curr_items_after_flush_all_matches_memcached() {
    for attempt in 0.. {
        assert!(attempt < 5, "background reclaim raced the script every time");
        let Some((mc, kv)) = server_pair() else { return };
        let (want, got) = std::thread::scope(|s| {
            let want = s.spawn(|| flush_script(&mc));
            let got = flush_script(&kv);
            (want.join().expect("memcached's script"), got)
        });
        let (Some(want), Some(got)) = (want, got) else {
            eprintln!("a server reclaimed flushed items during the script; again");
            continue;
        };
        assert_eq!(got, want, "replies and (curr_items, get_flushed, reclaimed) after each step");
        // Flushed items count until touched, then the crawl takes the rest.
        let items: Vec<u64> = got.iter().map(|(_, (n, _, _))| *n).collect();
        assert_eq!(items, [10, 10, 8, 8, 5, 6, 2]);
        return;
    }
}

/// `stats` (or `stats slabs`) as a map.
fn stat_map(c: &mut Raw, cmd: &str) -> BTreeMap<String, String> {
    stats(c, cmd).into_iter().collect()
}

fn num(m: &BTreeMap<String, String>, k: &str) -> u64 {
    m.get(k).unwrap_or_else(|| panic!("no {k}")).parse().unwrap_or_else(|_| panic!("{k} is {}", m[k]))
}

/// What memcached's `t/issue_14.t` looks at: ten 65 KiB items with a 1 s
/// TTL are stored and never asked for again; once due they are reclaimed
/// in the background. Returns (`curr_items`, `reclaimed`,
/// `expired_unfetched`) once `curr_items` is 0 (or after 6 s), whether
/// `total_malloced` is back where it was after ten more such items, and
/// whether `lru_maintainer_juggles` went up meanwhile.
fn background_reclaim(p: &Proc) -> ((u64, u64, u64), bool, bool) {
    let mut c = p.raw();
    let value = "B".repeat(66560);
    let set = |c: &mut Raw, from: usize| {
        for i in from..from + 10 {
            c.check(format!("set key{i} 0 1 66560\r\n{value}\r\n").as_bytes(), b"STORED\r\n");
        }
    };
    set(&mut c, 0);
    let first = num(&stat_map(&mut c, "stats slabs"), "total_malloced");
    let juggles = num(&stat_map(&mut c, "stats"), "lru_maintainer_juggles");
    let start = Instant::now();
    let st = loop {
        std::thread::sleep(Duration::from_millis(250));
        let st = stat_map(&mut c, "stats");
        if num(&st, "curr_items") == 0 || start.elapsed() > Duration::from_secs(6) {
            break st;
        }
    };
    let juggled = num(&st, "lru_maintainer_juggles") > juggles;
    set(&mut c, 10);
    let second = num(&stat_map(&mut c, "stats slabs"), "total_malloced");
    ((num(&st, "curr_items"), num(&st, "reclaimed"), num(&st, "expired_unfetched")), first == second, juggled)
}

/// Expired items are reclaimed without being asked for, their memory
/// reused, as memcached's LRU maintainer does (`t/issue_14.t`).
#[test]
fn expired_items_are_reclaimed_in_the_background_as_memcached_does() {
    let Some((mc, kv)) = server_pair() else { return };
    let (want, got) = std::thread::scope(|s| {
        let want = s.spawn(|| background_reclaim(&mc));
        (want.join().expect("memcached's probe"), background_reclaim(&kv))
    });
    assert_eq!(want, ((0, 10, 10), true, true), "memcached");
    assert_eq!(got, want, "(curr_items, reclaimed, expired_unfetched), total_malloced unchanged, juggles");
}

/// `-o no_lru_maintainer,no_lru_crawler`: the settings say so, `stats`
/// and `stats items` leave out the crawler's and the segmented LRU's keys,
/// and expired items stay until asked for, as in memcached.
#[test]
fn no_lru_maintainer_leaves_expired_items_as_memcached_does() {
    let args = ["-t", "2", "-o", "no_lru_maintainer,no_lru_crawler"];
    let Some(mc) = Proc::memcached(&args) else {
        common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
        return;
    };
    let kv = Proc::kv(&args);
    let probe = |p: &Proc| {
        let mut c = p.raw();
        for i in 0..10 {
            c.check(format!("set n{i} 0 1 1\r\nx\r\n").as_bytes(), b"STORED\r\n");
        }
        std::thread::sleep(Duration::from_millis(2500));
        let settings = stat_map(&mut c, "stats settings");
        let general = stats(&mut c, "stats");
        let items: Vec<String> = stats(&mut c, "stats items").into_iter().map(|(k, _)| k).collect();
        let st: BTreeMap<String, String> = general.iter().cloned().collect();
        let values = (
            settings["lru_crawler"].clone(),
            settings["lru_maintainer_thread"].clone(),
            num(&st, "curr_items"),
            num(&st, "reclaimed"),
        );
        (values, general.into_iter().map(|(k, _)| k).collect::<Vec<_>>(), items)
    };
    let (want, got) = std::thread::scope(|s| {
        let want = s.spawn(|| probe(&mc));
        (want.join().expect("memcached's probe"), probe(&kv))
    });
    assert_eq!(want.0, ("no".into(), "no".into(), 10, 0), "memcached");
    assert_eq!(got.0, want.0, "lru_crawler, lru_maintainer_thread, curr_items, reclaimed");
    check_keys("stats", &want.1, &got.1, GENERAL_EXTRAS);
    assert_eq!(got.2, want.2, "stats items");
}

/// `lru_crawler crawl all` reclaims expired items where nothing else does
/// (`-o no_lru_maintainer`), counted as memcached's crawler counts them.
#[test]
fn lru_crawler_crawl_reclaims_as_memcached_does() {
    let args = ["-t", "2", "-o", "no_lru_maintainer"];
    let Some(mc) = Proc::memcached(&args) else {
        common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
        return;
    };
    let kv = Proc::kv(&args);
    let probe = |p: &Proc| {
        let mut c = p.raw();
        for i in 0..6 {
            c.check(format!("set c{i} 0 {} 1\r\nx\r\n", i % 2).as_bytes(), b"STORED\r\n");
        }
        std::thread::sleep(Duration::from_millis(2200));
        c.check(b"lru_crawler crawl all\r\n", b"OK\r\n");
        std::thread::sleep(Duration::from_millis(1200));
        let st = stat_map(&mut c, "stats");
        let items = stat_map(&mut c, "stats items");
        let names = [
            "curr_items",
            "reclaimed",
            "expired_unfetched",
            "crawler_reclaimed",
            "crawler_items_checked",
            "lru_crawler_starts",
        ];
        let mut got: Vec<u64> = names.iter().map(|k| num(&st, k)).collect();
        got.push(num(&items, "items:1:crawler_reclaimed"));
        got.push(num(&items, "items:1:crawler_items_checked"));
        got
    };
    let (want, got) = std::thread::scope(|s| {
        let want = s.spawn(|| probe(&mc));
        (want.join().expect("memcached's probe"), probe(&kv))
    });
    assert_eq!(want, [3, 0, 3, 3, 6, 1, 3, 6], "memcached");
    assert_eq!(got, want, "curr_items, reclaimed, expired_unfetched, crawler_*, lru_crawler_starts, items:1:crawler_*");
}
