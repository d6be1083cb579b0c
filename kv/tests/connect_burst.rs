//! A burst of connections, beside stock memcached: 1,500 clients connect at
//! once, and every one is accepted and answers `version` well within a
//! second. With too short a listen backlog the kernel drops the SYNs that
//! find the accept queue full, and each of those clients retries a second
//! later; memcached listens with a backlog of 1024 (`-b`), and so does
//! gossamer-kv.
//!
//! Needs the `memcached` binary for the side-by-side part; without it that
//! part is skipped, unless `GOSSAMER_KV_REQUIRE_MEMCACHED=1` is set.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::{Proc, Raw};

/// Connections in the burst.
const CONNS: usize = 1500;
/// Threads that connect at once.
const CONNECTORS: usize = 8;
/// How long the burst may take, connects and answers together: a dropped
/// SYN alone costs a second.
const BURST_MAX: Duration = Duration::from_millis(1000);
/// Both servers may serve the burst (and more).
const SERVER_ARGS: &[&str] = &["-t", "2", "-c", "2048"];

/// Raises this process's soft open-file limit to its hard limit so that it
/// can hold the burst's sockets; panics, naming the fix, if that is too low.
fn raise_nofile() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into `lim`, a valid rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0, "getrlimit");
    let need = (CONNS + 256) as u64;
    if lim.rlim_cur < need {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit reads `lim`; raising the soft limit up to the
        // hard one is always allowed.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0, "setrlimit");
    }
    assert!(
        lim.rlim_cur >= need,
        "this test holds {CONNS} sockets but the open-file limit is {}: raise it (ulimit -Hn {need})",
        lim.rlim_cur
    );
}

/// Opens `CONNS` connections from `CONNECTORS` threads at once, then sends
/// `version` on each and reads the answers. Returns the time it all took.
fn burst(addr: SocketAddr) -> Duration {
    // The server is up and serving before the burst.
    let mut first = Raw::connect(addr);
    first.send(b"version\r\n");
    first.recv_until(b"\r\n");
    let start = Instant::now();
    let connectors: Vec<_> = (0..CONNECTORS)
        .map(|t| {
            thread::spawn(move || {
                (t..CONNS)
                    .step_by(CONNECTORS)
                    .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut conns: Vec<TcpStream> = connectors.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert_eq!(conns.len(), CONNS);
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"version\r\n").expect("send version");
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let mut got = Vec::new();
        let mut b = [0u8; 128];
        while !got.ends_with(b"\r\n") {
            match c.read(&mut b) {
                Ok(0) => panic!("connection {i} closed; got {:?}", String::from_utf8_lossy(&got)),
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(e) => panic!("connection {i}: {e}"),
            }
        }
        assert!(got.starts_with(b"VERSION 1.6."), "connection {i}: {:?}", String::from_utf8_lossy(&got));
    }
    start.elapsed()
}

fn tcp_backlog(p: &Proc) -> String {
    let mut c: Raw = p.raw();
    c.send(b"stats settings\r\n");
    let s = String::from_utf8(c.recv_until(b"END\r\n")).unwrap();
    s.lines().find_map(|l| l.strip_prefix("STAT tcp_backlog ")).expect("tcp_backlog").to_string()
}

/// Which server a child run bursts at (see [`burst_in_a_child`]).
const CHILD_ENV: &str = "GOSSAMER_KV_BURST_SERVER";

/// Runs the burst against `server` in a fresh test process: a burst right
/// after another one from the same process stalls its first connects for
/// a SYN retry whichever server it meets, so each burst gets a process of
/// its own. Returns the child's report line, or `None` if memcached is
/// not installed.
fn burst_in_a_child(server: &str) -> Option<String> {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "burst_child", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, server)
        .output()
        .expect("run the burst in a child");
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the {server} burst failed:\n{text}");
    if text.contains("memcached is not installed") {
        return None;
    }
    let line = text.lines().find(|l| l.starts_with("burst:")).unwrap_or_else(|| panic!("no report in {text}"));
    Some(line.to_string())
}

/// The body of a child run (does nothing in a plain test run).
#[test]
fn burst_child() {
    let Ok(server) = std::env::var(CHILD_ENV) else { return };
    raise_nofile();
    let p = if server == "memcached" {
        match Proc::memcached(SERVER_ARGS) {
            Some(mc) => mc,
            None => return eprintln!("memcached is not installed"),
        }
    } else {
        Proc::kv(SERVER_ARGS)
    };
    let took = burst(p.addr);
    eprintln!("burst: {server}: {CONNS} connections answered in {:.3} s", took.as_secs_f64());
    assert!(took < BURST_MAX, "{server}: {CONNS} connections took {took:?}");
}

#[test]
fn a_burst_of_connections_is_accepted_at_once() {
    match burst_in_a_child("memcached") {
        Some(line) => eprintln!("{line}"),
        None => common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR),
    }
    let line = burst_in_a_child("gossamer-kv").expect("gossamer-kv's burst ran");
    eprintln!("{line}");
}

/// `-b` and its default, as `stats settings` shows them.
#[test]
fn the_backlog_setting_matches_memcached() {
    for args in [&["-t", "1"][..], &["-t", "1", "-b", "64"]] {
        let kv = Proc::kv(args);
        let want = if args.len() > 2 { "64" } else { "1024" };
        assert_eq!(tcp_backlog(&kv), want, "{args:?}");
        if let Some(mc) = Proc::memcached(args) {
            assert_eq!(tcp_backlog(&kv), tcp_backlog(&mc), "{args:?}");
        }
    }
}
