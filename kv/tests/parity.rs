//! Smaller behaviours beside stock memcached 1.6.18, byte for byte: how a
//! close the client forced is logged, when a refused store is answered,
//! `stats cachedump`, and the meta TTL flags in the order given.
//!
//! Needs the `memcached` binary; without it the tests are skipped, unless
//! `GOSSAMER_KV_REQUIRE_MEMCACHED=1` is set, in which case they fail.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{bin_req, Proc, Raw, TIMEOUT};

/// memcached and gossamer-kv started with the same `args`.
fn pair(args: &[&str]) -> Option<(Proc, Proc)> {
    match Proc::memcached(args) {
        Some(mc) => Some((mc, Proc::kv(args))),
        None => {
            common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
            None
        }
    }
}

/// Sends `req` and a meta no-op; returns the replies before `MN`.
fn text(raw: &mut Raw, req: &[u8]) -> String {
    raw.send(req);
    raw.send(b"mn\r\n");
    let got = raw.recv_until(b"MN\r\n");
    String::from_utf8_lossy(&got[..got.len() - 4]).into_owned()
}

/// Reads `n` log lines from a watcher, with the fields that differ between
/// servers (time, ids, port, descriptor) masked.
fn log_lines(w: &mut Raw, n: usize) -> Vec<String> {
    let start = Instant::now();
    let mut got = Vec::new();
    loop {
        let (chunk, closed) = w.recv_quiet(Duration::from_millis(100));
        got.extend_from_slice(&chunk);
        let s = String::from_utf8_lossy(&got).into_owned();
        if s.lines().count() >= n || closed {
            return s
                .lines()
                .map(|l| {
                    l.split(' ')
                        .map(|f| match f.split_once('=') {
                            Some((k @ ("ts" | "gid" | "cfd" | "rport"), _)) => format!("{k}=*"),
                            _ => f.to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect();
        }
        assert!(start.elapsed() < TIMEOUT, "only got {s:?}");
    }
}

/// A connection closed for an HTTP request line, an overlong line or a bad
/// binary header is logged with `reason=error`; one that quits or hangs
/// up, with `reason=normal`.
#[test]
fn forced_closes_are_logged_as_errors() {
    // One worker thread: memcached's logger then keeps the lines of
    // successive connections in order.
    let Some((mc, kv)) = pair(&["-t", "1"]) else { return };
    let mut logs = Vec::new();
    for p in [&mc, &kv] {
        let mut w = p.raw();
        w.send(b"watch connevents\r\n");
        assert_eq!(w.recv_until(b"OK\r\n"), b"OK\r\n");
        let closes: [&[u8]; 4] = [
            b"GET / HTTP/1.1\r\n",
            b"quit\r\n",
            &[b'x'; 3000],
            &[&bin_req(0x0a, b"", b"", b"", 0, 0)[..], &[0; 24]].concat(),
        ];
        for req in closes {
            let mut c = p.raw();
            c.send(req);
            c.recv_quiet(Duration::from_millis(200));
            c.expect_closed();
        }
        {
            // The client hangs up.
            let mut c = p.raw();
            text(&mut c, b"version\r\n");
        }
        logs.push(log_lines(&mut w, 10));
    }
    assert_eq!(logs[1], logs[0]);
    let reasons: Vec<&str> =
        logs[1].iter().filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("reason="))).collect();
    assert_eq!(reasons, ["error", "normal", "error", "error", "normal"]);
}

/// A refused store is answered only once its value has been swallowed:
/// nothing comes back while the value is still on its way.
#[test]
fn refused_stores_are_answered_after_their_value() {
    let Some((mc, kv)) = pair(&["-t", "2"]) else { return };
    let big = vec![b'x'; 2_000_000];
    let cases: [(&[u8], &[u8]); 4] = [
        (b"set k 0 0 2000000\r\n", &big),
        (b"ms k 2000000 T0\r\n", &big),
        (b"ms k 5 E\r\n", b"hello"),
        (b"ms k 5 Zq\r\n", b"hello"),
    ];
    for (head, value) in cases {
        let mut got = Vec::new();
        for p in [&mc, &kv] {
            let mut c = p.raw();
            let mut seen = Vec::new();
            c.send(head);
            seen.push(c.recv_quiet(Duration::from_millis(300)).0);
            c.send(&value[..value.len() / 2]);
            seen.push(c.recv_quiet(Duration::from_millis(300)).0);
            c.send(&value[value.len() / 2..]);
            c.send(b"\r\n");
            seen.push(text(&mut c, b"").into_bytes());
            got.push(seen.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>());
        }
        assert_eq!(got[1], got[0], "{:?} in three parts", String::from_utf8_lossy(head));
        assert!(got[1][0].is_empty() && got[1][1].is_empty(), "answered before the value: {:?}", got[1]);
    }
    // A client that leaves in the middle of a refused value is closed
    // without the answer.
    for p in [&mc, &kv] {
        let mut c = p.raw();
        c.send(b"set k 0 0 2000000\r\nxx");
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
        let (got, closed) = c.recv_quiet(Duration::from_millis(1000));
        assert!(got.is_empty() && closed, "got {:?}, closed: {closed}", String::from_utf8_lossy(&got));
    }
}

/// `stats cachedump` lists a slab class's items, most recently used first,
/// and refuses malformed arguments with memcached's errors. memcached runs
/// without its LRU maintainer (as its `t/stats.t` does), so that every item
/// is in the one segment it lists.
#[test]
fn stats_cachedump_matches_memcached() {
    let Some((mc, kv)) = pair(&["-t", "1", "-o", "no_lru_maintainer"]) else { return };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let mut replies = Vec::new();
    for p in [&mc, &kv] {
        let mut c = p.raw();
        let setup = [
            &b"set foo 0 0 6\r\nfooval\r\nset bar 5 0 3\r\nabc\r\nset big 0 0 5000\r\n"[..],
            &[b'y'; 5000],
            b"\r\nset ttl 0 100 1\r\nt\r\n",
        ]
        .concat();
        text(&mut c, &setup);
        let steps: [&[u8]; 11] = [
            b"stats cachedump 1 100\r\n",
            b"stats cachedump 1 0\r\n",
            b"stats cachedump 1 1\r\n",
            b"stats cachedump 1 2 3\r\n",
            b"stats cachedump\r\n",
            b"stats cachedump 1\r\n",
            b"stats cachedump x 1\r\n",
            b"stats cachedump 1 -1\r\n",
            b"stats cachedump 64 1\r\n",
            b"stats cachedump 0 1\r\n",
            b"stats cachedump 2 0\r\n",
        ];
        let mut all = Vec::new();
        for step in steps {
            all.push(text(&mut c, step));
        }
        replies.push(all);
    }
    // The expiry is a Unix time: each server's own clock reading.
    let ttl_line =
        |s: &str| s.lines().find(|l| l.starts_with("ITEM ttl ")).map(|l| l.to_string()).expect("ttl is listed");
    for r in &replies {
        let line = ttl_line(&r[0]);
        let exp: u64 = line["ITEM ttl [1 b; ".len()..line.len() - 3].parse().unwrap();
        assert!(exp.abs_diff(now + 100) <= 3, "{line}");
    }
    let mask = |v: &[String]| -> Vec<String> {
        v.iter().map(|s| s.replace(&ttl_line(&v[0]), "ITEM ttl [1 b; <exp> s]")).collect()
    };
    assert_eq!(mask(&replies[1]), mask(&replies[0]));
    assert!(replies[1][0].starts_with("ITEM ttl ") && replies[1][0].contains("ITEM foo [6 b; 0 s]\r\n"));
}

/// The README's example of meta flags acting in the order given.
#[test]
fn meta_ttl_flags_act_in_order() {
    let Some((mc, kv)) = pair(&["-t", "2"]) else { return };
    // A `t` before a `T` shows the TTL before the touch (none: -1), one
    // after it the new TTL; a flag given twice is refused.
    let req: &[u8] =
        b"set foo 0 0 2\r\nhi\r\nmg foo t T30 t\r\nmg foo t T30\r\nmd foo\r\nset foo 0 0 2\r\nhi\r\nmg foo T60 t v\r\n";
    let (mut a, mut b) = (mc.raw(), kv.raw());
    let want = text(&mut a, req);
    assert_eq!(want, "STORED\r\nCLIENT_ERROR duplicate flag\r\nHD t-1\r\nHD\r\nSTORED\r\nVA 2 t60\r\nhi\r\n");
    assert_eq!(text(&mut b, req), want);
}
