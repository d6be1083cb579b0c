//! The administrative commands against stock memcached 1.6.18: detail
//! stats, binary `STAT` groups, `watch`, `slabs automove|reassign`,
//! `shutdown`, and the `-D`, `-A` and `-o` flags. Replies must match byte
//! for byte, after masking what legitimately differs (timestamps, event
//! ids, descriptors and ports in log lines; CAS values).
//!
//! Needs the `memcached` binary; without it the comparisons are skipped,
//! unless `GOSSAMER_KV_REQUIRE_MEMCACHED=1` is set, in which case they
//! fail. The checks of this server alone always run.

mod common;

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::{bin_req, Proc, Raw, TIMEOUT};

const MARK: &[u8] = b"mn\r\n";

/// memcached and this server started with the same `args`, or `None`
/// when memcached is missing (and not required).
fn pair(args: &[&str]) -> Option<(Proc, Proc)> {
    let mut mc_args = vec!["-t", "2"];
    mc_args.extend_from_slice(args);
    match Proc::memcached(&mc_args) {
        Some(mc) => Some((mc, Proc::kv(&mc_args))),
        None => {
            common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
            None
        }
    }
}

/// Sends `req` and a meta no-op; returns the replies before `MN`.
fn text(raw: &mut Raw, req: &[u8]) -> String {
    raw.send(req);
    raw.send(MARK);
    let got = raw.recv_until(b"MN\r\n");
    String::from_utf8_lossy(&got[..got.len() - 4]).into_owned()
}

/// Runs each step on both servers, one connection each, and compares.
fn compare_text(mc: &Proc, kv: &Proc, steps: &[&[u8]]) {
    let (mut a, mut b) = (mc.raw(), kv.raw());
    for step in steps {
        let want = text(&mut a, step);
        let got = text(&mut b, step);
        assert_eq!(got, want, "reply to {:?}", String::from_utf8_lossy(step));
    }
}

/// Sends binary requests and a no-op; returns the responses before it.
fn binary(raw: &mut Raw, req: &[u8]) -> Vec<String> {
    raw.send(req);
    raw.send(&bin_req(0x0a, b"", b"", b"", 0xfeed, 0));
    let mut out = Vec::new();
    loop {
        let mut r = raw.recv_bin();
        if r.opcode == 0x0a && r.opaque == 0xfeed {
            return out;
        }
        if r.cas != 0 {
            r.cas = 1;
        }
        out.push(format!(
            "op={:#x} status={} opaque={} cas={} key={:?} value={:?}",
            r.opcode,
            r.status,
            r.opaque,
            r.cas,
            String::from_utf8_lossy(&r.key),
            String::from_utf8_lossy(&r.value)
        ));
    }
}

fn stat(key: &str, opaque: u32) -> Vec<u8> {
    bin_req(0x10, key.as_bytes(), b"", b"", opaque, 0)
}

fn set_extras() -> Vec<u8> {
    [0u32.to_be_bytes(), 0u32.to_be_bytes()].concat()
}

/// Masks the fields of a log line that differ between servers.
fn mask_log(lines: &str) -> Vec<String> {
    lines
        .lines()
        .map(|l| {
            l.split(' ')
                .map(|f| match f.split_once('=') {
                    Some(("ts" | "gid" | "cfd" | "rport", _)) => format!("{}=*", f.split('=').next().unwrap_or("")),
                    _ => f.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Reads log lines from a watcher until `n` lines (after `OK`) arrived.
fn log_lines(w: &mut Raw, n: usize) -> Vec<String> {
    let start = Instant::now();
    let mut got = Vec::new();
    loop {
        let (chunk, closed) = w.recv_quiet(Duration::from_millis(100));
        got.extend_from_slice(&chunk);
        let s = String::from_utf8_lossy(&got).into_owned();
        if s.lines().count() >= n || closed {
            return mask_log(&s);
        }
        assert!(start.elapsed() < TIMEOUT, "only got {s:?}");
    }
}

#[test]
fn detail_stats_match_memcached() {
    let Some((mc, kv)) = pair(&[]) else { return };
    compare_text(
        &mc,
        &kv,
        &[
            b"stats detail dump\r\n",
            b"stats detail\r\nstats detail x\r\nstats detail on extra\r\n",
            b"set foo:a 0 0 1\r\nx\r\n",
            b"stats detail dump\r\n",
            b"get foo:a foo:b bar:c nodelim\r\n",
            b"set nodelim 0 0 1\r\nx\r\ndelete foo:a\r\ndelete foo:zz\r\nincr foo:a 1\r\ntouch foo:x 1\r\n",
            b"gat 10 foo:a bar:x\r\ngets foo:a\r\n",
            b"set a:b:c 0 0 1\r\nx\r\nset :x 0 0 1\r\nx\r\nadd foo:a 0 0 1\r\nx\r\n",
            b"cas foo:q 0 0 1 5\r\nx\r\nappend foo:q 0 0 1\r\nx\r\nprepend foo:a 0 0 1\r\nx\r\nreplace foo:r 0 0 1\r\nx\r\n",
            &[&b"set big:x 0 0 2000000 noreply\r\n"[..], &[b'x'; 2_000_000], b"\r\n"].concat(),
            b"delete foo:a noreply\r\nset q:1 0 0 1 noreply\r\nx\r\nget foo:a\r\nstats detail dump\r\n",
            b"stats detail off\r\nget foo:a bar:1\r\nstats detail dump\r\n",
            b"stats detail dump noreply\r\n",
            b"stats detail on\r\nstats reset\r\nstats detail dump\r\nset k:1 0 0 1\r\nx\r\nstats detail dump\r\n",
        ],
    );
    // The order of many prefixes follows memcached's hash buckets.
    let mut many = Vec::new();
    for i in 0..40 {
        many.extend_from_slice(format!("set p{i}:k 0 0 1\r\nx\r\nget p{i}:k p{i}:z\r\n").as_bytes());
    }
    compare_text(&mc, &kv, &[b"stats detail on\r\n", &many, b"stats detail dump\r\n"]);
}

#[test]
fn delimiter_flag_matches_memcached() {
    let Some((mc, kv)) = pair(&["-D", "-"]) else { return };
    compare_text(
        &mc,
        &kv,
        &[
            b"set a-b 0 0 1\r\nx\r\nset a:b 0 0 1\r\nx\r\nget a-b a-c\r\ndelete a-b\r\n",
            b"stats detail dump\r\n",
            b"stats detail off\r\nset a-b 0 0 1\r\nx\r\nstats detail dump\r\n",
        ],
    );
    let (mut a, mut b) = (mc.raw(), kv.raw());
    let settings = |raw: &mut Raw| {
        text(raw, b"stats settings\r\n")
            .lines()
            .filter(|l| l.contains("stat_key_prefix") || l.contains("detail_enabled"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(settings(&mut b), settings(&mut a));
}

#[test]
fn binary_stat_groups_match_memcached() {
    let Some((mc, kv)) = pair(&[]) else { return };
    let (mut a, mut b) = (mc.raw(), kv.raw());
    let f = set_extras();
    let touch = 0u32.to_be_bytes();
    let steps: Vec<Vec<u8>> = vec![
        stat("items", 1),
        stat("slabs", 2),
        stat("sizes", 3),
        stat("conns", 4),
        stat("bogus", 5),
        stat("detailx", 6),
        stat("detail x", 7),
        stat("detail dump", 8),
        stat("detail on", 9),
        [
            bin_req(0x01, b"bin:a", &f, b"v", 10, 0),
            bin_req(0x00, b"bin:a", b"", b"", 11, 0),
            bin_req(0x00, b"bin:b", b"", b"", 12, 0),
            bin_req(0x0c, b"bin:a", b"", b"", 13, 0),
            bin_req(0x1c, b"bin:t", &touch, b"", 14, 0),
            bin_req(0x1d, b"bin:g", &touch, b"", 15, 0),
            bin_req(0x02, b"bin:a", &f, b"w", 16, 0),
            bin_req(0x04, b"bin:a", b"", b"", 17, 0),
            bin_req(0x04, b"bin:a", b"", b"", 18, 0),
            bin_req(0x05, b"bin:n", &[0u8; 20], b"", 19, 0),
            bin_req(0x11, b"other:q", &f, b"v", 20, 0),
        ]
        .concat(),
        stat("detail dump", 21),
        stat("detail off", 22),
        bin_req(0x00, b"bin:a", b"", b"", 23, 0),
        stat("detail dump", 24),
        stat("sizes_disable", 25),
        stat("resetx", 26),
        stat("detail dump", 27),
        stat("reset", 28),
    ];
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(binary(&mut b, step), binary(&mut a, step), "step {i}");
    }
    // `settings` matches memcached's keys up to this server's own at the end.
    let (want, got) = (binary(&mut a, &stat("settings", 30)), binary(&mut b, &stat("settingsxyz", 30)));
    assert_eq!(got[..2], want[..2]);
    assert!(got.len() >= want.len());
}

#[test]
fn slabs_commands_match_memcached() {
    let Some((mc, kv)) = pair(&[]) else { return };
    let mut steps: Vec<Vec<u8>> = [
        "slabs automove 0",
        "slabs automove 1",
        "slabs automove 2",
        "slabs automove 3",
        "slabs automove",
        "slabs automove x",
        "slabs automove -1",
        "slabs automove 1 noreply",
        "slabs automove 4294967296",
        "slabs automove 1 2 3",
        "slabs automove ratio 0.5",
        "slabs automove ratio",
        "slabs automove ratio x",
        "slabs automove ratio 0.7 noreply",
        "slabs reassign 1 2",
        "slabs reassign -1 2",
        "slabs reassign 1 1",
        "slabs reassign 0 39",
        "slabs reassign 39 40",
        "slabs reassign 100 2",
        "slabs reassign x y",
        "slabs reassign 1",
        "slabs reassign 1 2 noreply",
        "slabs",
        "slabs foo bar",
    ]
    .iter()
    .map(|c| format!("{c}\r\n").into_bytes())
    .collect();
    steps.push(b"slabs automove 2\r\nslabs automove ratio 0.25\r\n".to_vec());
    let refs: Vec<&[u8]> = steps.iter().map(Vec::as_slice).collect();
    compare_text(&mc, &kv, &refs);
    let (mut a, mut b) = (mc.raw(), kv.raw());
    let settings = |raw: &mut Raw| {
        text(raw, b"stats settings\r\n").lines().filter(|l| l.contains("slab_automove")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(settings(&mut b), settings(&mut a));
    drop((mc, kv));
    let Some((mc, kv)) = pair(&["-o", "no_slab_reassign"]) else { return };
    compare_text(&mc, &kv, &[b"slabs reassign 1 2\r\n", b"slabs reassign x y\r\n", b"slabs automove 1\r\n"]);
}

/// Waits (bounded) for `p` to exit.
fn exits(p: &mut Proc) -> bool {
    let start = Instant::now();
    while start.elapsed() < TIMEOUT {
        if !p.alive() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn shutdown_matches_memcached() {
    let Some((mc, kv)) = pair(&[]) else { return };
    compare_text(&mc, &kv, &[b"shutdown\r\n", b"shutdown graceful\r\n", b"shutdown x\r\n", b"shutdown noreply\r\n"]);
    drop((mc, kv));
    for mode in ["shutdown\r\n", "shutdown graceful\r\n"] {
        let Some((mut mc, mut kv)) = pair(&["-A"]) else { return };
        compare_text(&mc, &kv, &[b"shutdown x\r\n", b"shutdown graceful now\r\n"]);
        let (mut a, mut b) = (mc.raw(), kv.raw());
        let enabled = |raw: &mut Raw| text(raw, b"stats settings\r\n").contains("STAT shutdown_command yes\r\n");
        assert!(enabled(&mut a) && enabled(&mut b));
        for p in [&mut mc, &mut kv] {
            let mut c = p.raw();
            c.send(mode.as_bytes());
            c.expect_closed();
            assert!(exits(p), "the server did not exit after {mode:?}");
        }
    }
}

#[test]
fn watch_replies_match_memcached() {
    let Some((mc, kv)) = pair(&[]) else { return };
    compare_text(&mc, &kv, &[b"watch foo\r\n", b"watch fetchers deletions\r\n", b"watch noreply\r\n"]);
    for p in [&mc, &kv] {
        let mut w = p.raw();
        // Replies before a watch go out first; input after it is ignored.
        w.send(b"get a\r\nwatch mutations\r\nget b\r\n");
        assert_eq!(w.recv_until(b"OK\r\n"), b"END\r\nOK\r\n");
        assert!(w.recv_quiet(Duration::from_millis(200)).0.is_empty());
    }
}

#[test]
fn watch_streams_match_memcached() {
    let Some((mc, kv)) = pair(&[]) else { return };
    let mut streams = Vec::new();
    for p in [&mc, &kv] {
        let mut c = p.raw();
        text(&mut c, &[&b"set k 0 0 1\r\nx\r\nset k2 5 0 100\r\n"[..], &[b'y'; 100], b"\r\n"].concat());
        // The stores come before the watcher: it sees the reads only.
        let mut fetch = p.raw();
        fetch.send(b"watch fetchers\r\n");
        assert_eq!(fetch.recv_until(b"OK\r\n"), b"OK\r\n");
        let gets = [&b"get k\r\n"[..], b"get nope\r\n", b"gets k2\r\n", b"get k k2 zz\r\n", b"get sp\x01c\r\n"];
        text(&mut c, &gets.concat());
        let fetched = log_lines(&mut fetch, 7);
        drop(fetch);
        // Let both servers notice the watcher's close before the next one.
        thread::sleep(Duration::from_millis(300));
        let mut mutate = p.raw();
        mutate.send(b"watch mutations connevents\r\n");
        assert_eq!(mutate.recv_until(b"OK\r\n"), b"OK\r\n");
        // Pipelined: lines still come in command order.
        let mut c = p.raw();
        let stores: Vec<u8> = [
            &b"set k3 0 100 2\r\nab\r\n"[..],
            b"add k 0 0 1\r\nx\r\n",
            b"replace q 0 0 1\r\nx\r\n",
            b"prepend q 0 0 1\r\nx\r\n",
            b"cas k 0 0 1 999\r\nx\r\n",
            b"cas q 0 0 1 1\r\nx\r\n",
            b"set n 0 0 1 noreply\r\nx\r\n",
        ]
        .concat();
        text(&mut c, &stores);
        drop(c);
        streams.push((fetched, log_lines(&mut mutate, 9)));
    }
    assert_eq!(streams[1].0, streams[0].0, "fetchers");
    assert_eq!(streams[1].1, streams[0].1, "mutations and connevents");
}

/// A store, delete, incr/decr or touch looks its key up inside the cache
/// first, and `watch fetchers` shows that lookup before the store's own
/// line, as memcached's own `t/watcher_connid.t` expects; a stored append
/// reports the joined size, a touch the item's.
#[test]
fn lookups_inside_requests_are_logged_as_memcached_does() {
    let Some((mc, kv)) = pair(&[]) else { return };
    let requests: Vec<u8> = [
        &b"set k 0 0 5\r\nhello\r\n"[..],
        b"set k 0 0 5\r\nhello\r\n",
        b"add k 0 0 1\r\nx\r\n",
        b"add b 0 0 1\r\nx\r\n",
        b"replace nope 0 0 1\r\nx\r\n",
        b"append k 0 0 1\r\nx\r\n",
        b"prepend k 0 0 2\r\nxy\r\n",
        b"cas k 0 0 1 999\r\nx\r\n",
        b"incr nope 1\r\n",
        b"set n 0 0 1\r\n5\r\n",
        b"incr n 2\r\n",
        b"decr n 1\r\n",
        b"touch k 10\r\n",
        b"touch nope 10\r\n",
        b"delete k\r\n",
        b"delete nope\r\n",
    ]
    .concat();
    let mut streams = Vec::new();
    for p in [&mc, &kv] {
        let mut w = p.raw();
        w.send(b"watch fetchers mutations\r\n");
        assert_eq!(w.recv_until(b"OK\r\n"), b"OK\r\n");
        let mut c = p.raw();
        text(&mut c, &requests);
        // As many lines as memcached wrote (it goes first), then a quiet
        // moment: no more may follow.
        let n = streams.first().map_or(1, |s: &Vec<String>| s.len());
        let mut lines = log_lines(&mut w, n);
        let (more, _) = w.recv_quiet(Duration::from_millis(300));
        lines.extend(mask_log(&String::from_utf8_lossy(&more)));
        streams.push(lines);
    }
    assert!(streams[0].len() > 20, "memcached logged {:?}", streams[0]);
    assert_eq!(streams[1], streams[0]);
}

/// `watch evictions`: the same line for an item evicted to make room (the
/// two servers evict different keys first, so keys are masked).
#[test]
fn eviction_lines_match_memcached() {
    let Some((mc, kv)) = pair(&["-m", "2"]) else { return };
    let mut lines = Vec::new();
    for p in [&mc, &kv] {
        let mut w = p.raw();
        w.send(b"watch evictions\r\n");
        assert_eq!(w.recv_until(b"OK\r\n"), b"OK\r\n");
        let mut c = p.raw();
        let mut fill = Vec::new();
        for i in 0..5000 {
            fill.extend_from_slice(format!("set key{i} 0 100 1000 noreply\r\n").as_bytes());
            fill.extend_from_slice(&[b'v'; 1000]);
            fill.extend_from_slice(b"\r\n");
        }
        text(&mut c, &fill);
        let first = log_lines(&mut w, 1).into_iter().next().expect("an eviction line");
        // A second may pass between the store and the eviction: ttl and
        // la are checked for range, the rest compared as they are.
        let masked: Vec<String> = first
            .split(' ')
            .map(|f| match f.split_once('=') {
                Some(("key", _)) => "key=<k>".to_string(),
                Some(("ttl", v)) => {
                    assert!(["99", "100"].contains(&v), "{first}");
                    "ttl=<t>".to_string()
                }
                Some(("la", v)) => {
                    assert!(["0", "1"].contains(&v), "{first}");
                    "la=<a>".to_string()
                }
                _ => f.to_string(),
            })
            .collect();
        lines.push(masked.join(" "));
    }
    assert_eq!(lines[1], lines[0]);
    assert!(lines[0].contains("type=eviction key=<k> fetch=no ttl=<t> la=<a> clsid="), "{}", lines[0]);
}

#[test]
fn options_and_flags_match_memcached() {
    let opts =
        ["-o", "track_sizes,watcher_logbuf_size=128,slab_automove=2,slab_automove_ratio=0.5,no_lru_crawler", "-A"];
    let Some((mc, kv)) = pair(&opts) else { return };
    let keys = ["shutdown_command", "automove", "logbuf", "track_sizes", "slab_reassign", "detail_enabled"];
    let pick = |raw: &mut Raw| {
        text(raw, b"stats settings\r\n")
            .lines()
            .filter(|l| keys.iter().any(|k| l.contains(k)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (mut a, mut b) = (mc.raw(), kv.raw());
    assert_eq!(pick(&mut b), pick(&mut a));
}

/// Runs the server binary with `args` and returns its exit status and
/// output; it must exit by itself.
fn run_kv(args: &[&str]) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gossamer-kv"))
        .args(["-p", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gossamer-kv");
    let start = Instant::now();
    while start.elapsed() < TIMEOUT {
        if let Ok(Some(_)) = child.try_wait() {
            let out = child.wait_with_output().expect("output");
            let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            return (out.status.success(), text);
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("gossamer-kv {args:?} kept running");
}

#[test]
fn bad_options_are_refused() {
    for (args, msg) in [
        (&["-o", "bogus"][..], "Illegal suboption \"bogus\""),
        (&["-o", "track_sizes,nope=1"], "Illegal suboption \"nope=1\""),
        (&["-o", "watcher_logbuf_size"], "Missing watcher_logbuf_size argument"),
        (&["-o", "watcher_logbuf_size=x"], "could not parse argument to watcher_logbuf_size"),
        (&["-D", ""], "No delimiter specified"),
    ] {
        let (ok, out) = run_kv(args);
        assert!(!ok, "{args:?} was accepted");
        assert!(out.contains(msg), "{args:?}: {out}");
    }
}

fn stat_value(report: &str, name: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
        .unwrap_or_else(|| panic!("no {name} in {report}"))
        .parse()
        .expect("a number")
}

#[test]
fn watcher_counters_and_skips() {
    let kv = Proc::kv(&["-t", "2", "-o", "watcher_logbuf_size=1"]);
    let mut c = kv.raw();
    let mut w = kv.raw();
    w.send(b"watch fetchers\r\n");
    assert_eq!(w.recv_until(b"OK\r\n"), b"OK\r\n");
    let report = text(&mut c, b"stats\r\n");
    assert_eq!(stat_value(&report, "log_watchers"), 1);
    // Far more lines than the socket and a 1 KiB buffer hold, unread.
    let gets: Vec<u8> = (0..20_000).flat_map(|i| format!("get key{i}\r\n").into_bytes()).collect();
    text(&mut c, &gets);
    let report = text(&mut c, b"stats\r\n");
    assert!(stat_value(&report, "log_watcher_skipped") > 0, "{report}");
    assert!(stat_value(&report, "log_worker_written") >= 20_000, "{report}");
    let (got, _) = w.recv_quiet(Duration::from_millis(300));
    let got = String::from_utf8_lossy(&got);
    assert!(got.contains("\nskipped=") || got.starts_with("skipped="), "no skipped line");
    drop(w);
    let start = Instant::now();
    loop {
        let report = text(&mut c, b"stats\r\n");
        if stat_value(&report, "log_watchers") == 0 {
            break;
        }
        assert!(start.elapsed() < TIMEOUT, "the watcher was not removed");
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn detail_off_counts_nothing() {
    let kv = Proc::kv(&["-t", "2"]);
    let mut c = kv.raw();
    assert_eq!(
        text(&mut c, b"set a:b 0 0 1\r\nx\r\nget a:b\r\nstats detail dump\r\n"),
        "STORED\r\nVALUE a:b 0 1\r\nx\r\nEND\r\nEND\r\n"
    );
    assert_eq!(
        text(&mut c, b"stats detail on\r\nget a:b\r\nstats detail dump\r\n"),
        "OK\r\nVALUE a:b 0 1\r\nx\r\nEND\r\nPREFIX a get 1 hit 1 set 0 del 0\r\nEND\r\n"
    );
}

/// Masks the `stats items` values that depend on timing or on memcached's
/// LRU maintainer (ages, segments, moves between them).
fn mask_items(report: &str) -> String {
    report
        .lines()
        .map(|l| {
            let timing = ["age", "number_hot", "number_warm", "number_cold", "moves_", "lrutail", "hits_to_"];
            match l.rsplit_once(' ') {
                Some((name, _)) if timing.iter().any(|t| name.contains(t)) => format!("{name} *\n"),
                _ => format!("{l}\n"),
            }
        })
        .collect()
}

#[test]
fn memory_stats_match_memcached() {
    let Some((mc, kv)) = pair(&["-o", "track_sizes"]) else { return };
    let mut setup = Vec::new();
    for (i, len) in [1usize, 30, 100, 1000, 5000, 20_000, 100_000].iter().enumerate() {
        for j in 0..3 {
            setup.extend_from_slice(format!("set k{i}:{j} {j} 0 {len}\r\n").as_bytes());
            setup.extend_from_slice(&vec![b'v'; *len]);
            setup.extend_from_slice(b"\r\n");
        }
    }
    setup.extend_from_slice(b"get k1:0 k2:1 nope\r\ndelete k3:2\r\ntouch k4:0 100\r\nincr k0:0 1\r\n");
    let (mut a, mut b) = (mc.raw(), kv.raw());
    assert_eq!(text(&mut b, &setup), text(&mut a, &setup));
    for cmd in [&b"stats sizes\r\n"[..], b"stats slabs\r\n"] {
        assert_eq!(text(&mut b, cmd), text(&mut a, cmd), "{}", String::from_utf8_lossy(cmd));
    }
    assert_eq!(mask_items(&text(&mut b, b"stats items\r\n")), mask_items(&text(&mut a, b"stats items\r\n")));
    let (mut ba, mut bb) = (mc.raw(), kv.raw());
    for key in ["sizes", "slabs"] {
        assert_eq!(binary(&mut bb, &stat(key, 7)), binary(&mut ba, &stat(key, 7)), "{key}");
    }
    assert_eq!(
        text(&mut b, b"stats sizes_disable\r\nstats sizes\r\n"),
        text(&mut a, b"stats sizes_disable\r\nstats sizes\r\n")
    );
}

#[test]
fn memory_stats_follow_the_store() {
    let kv = Proc::kv(&["-t", "1", "-m", "2", "-I", "64k"]);
    let mut c = kv.raw();
    let value = vec![b'v'; 100];
    let mut sets = Vec::new();
    for i in 0..1000 {
        sets.extend_from_slice(format!("set m:{i} 0 0 100 noreply\r\n").as_bytes());
        sets.extend_from_slice(&value);
        sets.extend_from_slice(b"\r\n");
    }
    text(&mut c, &sets);
    let general = text(&mut c, b"stats\r\n");
    let items = text(&mut c, b"stats items\r\n");
    let slabs = text(&mut c, b"stats slabs\r\n");
    // 1000 items of 161 to 164 bytes: class 4 (chunks of 192), one page.
    assert_eq!(stat_value(&items, "items:4:number"), 1000);
    assert_eq!(stat_value(&items, "items:4:mem_requested"), stat_value(&general, "bytes"));
    assert_eq!(stat_value(&slabs, "4:used_chunks"), 1000);
    assert_eq!(stat_value(&slabs, "total_malloced"), 1 << 20);
    let deletes: Vec<u8> = (0..1000).flat_map(|i| format!("delete m:{i} noreply\r\n").into_bytes()).collect();
    text(&mut c, &deletes);
    let slabs = text(&mut c, b"stats slabs\r\n");
    assert_eq!((stat_value(&slabs, "active_slabs"), stat_value(&slabs, "total_malloced")), (0, 0));
    assert_eq!(text(&mut c, b"stats items\r\n"), "END\r\n");
    // Expired items are reclaimed when looked up.
    text(&mut c, b"set e:1 0 1 1\r\nx\r\nset e:2 0 1 1\r\nx\r\n");
    thread::sleep(Duration::from_millis(2100));
    text(&mut c, b"set keep 0 0 1\r\nx\r\nget e:1 e:2\r\n");
    let items = text(&mut c, b"stats items\r\n");
    assert_eq!((stat_value(&items, "items:1:reclaimed"), stat_value(&items, "items:1:expired_unfetched")), (2, 2));
    // Filling the memory evicts, per class.
    let big = vec![b'b'; 10_000];
    let mut fill = Vec::new();
    for i in 0..400 {
        fill.extend_from_slice(format!("set big:{i} 0 0 10000 noreply\r\n").as_bytes());
        fill.extend_from_slice(&big);
        fill.extend_from_slice(b"\r\n");
    }
    text(&mut c, &fill);
    let items = text(&mut c, b"stats items\r\n");
    let evicted: u64 = items
        .lines()
        .filter(|l| l.contains(":evicted "))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(evicted > 0, "{items}");
    // Classes left without items are not listed (as in memcached).
    assert!(evicted <= stat_value(&text(&mut c, b"stats\r\n"), "evictions"));
}
