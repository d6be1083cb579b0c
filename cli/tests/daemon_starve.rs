//! 300 slow peers (one byte every 4 s, from 127.0.0.2) against a daemon
//! that runs as an unprivileged user under a task limit about its own
//! thread count: a real client (from 127.0.0.1) is answered within a
//! second, again and again; a Start that cannot fork is refused and
//! logged; a Query says ucx_info cannot start; the daemon never exits.
//! Needs root (to become `nobody`), `setpriv` and `prlimit`; else SKIPPED,
//! or a failure with `GOSSAMER_REQUIRE_ROOT=1`.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Daemon, TempDir};
use gossamer_cli::proto::{ClientMsg, DaemonMsg};
use socket2::{Domain, Socket, Type};

const NOBODY: u32 = 65534;

/// Tasks (threads) of processes whose real uid is `uid`.
fn tasks_of(uid: u32) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(s) = std::fs::read_to_string(e.path().join("status")) else { continue };
        let real = s.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|v| v.split_whitespace().next());
        if real == Some(&uid.to_string()) {
            n += s.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok()).unwrap_or(1);
        }
    }
    n
}

fn slow_peer(to: SocketAddr) -> Option<TcpStream> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).ok()?;
    s.bind(&"127.0.0.2:0".parse::<SocketAddr>().unwrap().into()).ok()?;
    s.connect_timeout(&to.into(), Duration::from_secs(1)).ok()?;
    Some(s.into())
}

/// Keeps `n` connections from 127.0.0.2 that send one byte every 4 s,
/// reconnecting those the daemon closes, until `stop`.
fn slow_peers(to: SocketAddr, n: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        // Each sends a plausible handshake record (48 bytes announced), a byte at a time.
        let mut peers: Vec<(Option<TcpStream>, usize)> = (0..n).map(|_| (slow_peer(to), 0)).collect();
        let mut connects = n;
        while !stop.load(Ordering::Relaxed) {
            for (p, at) in peers.iter_mut() {
                let byte = if *at == 1 { 48 } else { 0 };
                let ok = p.as_mut().is_some_and(|s| std::io::Write::write_all(s, &[byte]).is_ok());
                *at += 1;
                if !ok {
                    *p = slow_peer(to);
                    *at = 0;
                    connects += 1;
                }
            }
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(4) && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        connects
    })
}

#[test]
fn slow_peers_and_a_task_limit_do_not_stop_the_daemon() {
    if !common::root_with(&["setpriv", "prlimit"]) {
        return;
    }
    // The binary and secret where `nobody` can reach them.
    let dir = TempDir::new("starve");
    let exe = dir.0.join("gossamer");
    std::fs::copy(common::exe(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.secret();
    std::os::unix::fs::chown(&secret, Some(NOBODY), Some(NOBODY)).unwrap();
    let log = dir.0.join("daemon.log");
    // The daemon's own threads: the event loop and two hashing threads.
    let limit = tasks_of(NOBODY) + 3;
    let nproc = format!("--nproc={limit}");
    let prefix = ["prlimit", &nproc, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"];
    let mut daemon = Daemon::start(&prefix, &exe, &secret, &log, &["--allow", "/usr/bin/true"]);
    let threads = daemon.status_field("Threads");
    eprintln!("FIGURE daemon threads: {threads} (task limit {limit} for uid nobody)");

    let stop = Arc::new(AtomicBool::new(false));
    let peers = slow_peers(daemon.addr, 300, stop.clone());
    std::thread::sleep(Duration::from_secs(1));
    let at = daemon.addr.to_string();
    let start = Instant::now();
    let mut worst = Duration::ZERO;
    let mut answered = 0;
    while start.elapsed() < Duration::from_secs(13) {
        let t = Instant::now();
        let mut c = gossamer_cli::client::connect(&at, 0, common::SECRET.as_bytes())
            .unwrap_or_else(|e| panic!("a real client was not served: {e}\n{}", daemon.log()));
        let r = gossamer_cli::client::request(&mut c, &ClientMsg::Status, Duration::from_secs(1)).unwrap();
        assert!(matches!(r, DaemonMsg::Running { .. }), "{r:?}");
        let took = t.elapsed();
        eprintln!("real client answered in {took:?}");
        worst = worst.max(took);
        assert!(took < Duration::from_secs(1), "a real client waited {took:?}");
        answered += 1;
        drop(c);
        std::thread::sleep(Duration::from_millis(500));
        assert!(daemon.alive(), "the daemon exited:\n{}", daemon.log());
    }
    eprintln!("FIGURE {answered} real clients answered under 300 slow peers, the slowest in {worst:?}");

    // No process can be made: a Start and ucx_info fail, and are reported.
    let mut c = gossamer_cli::client::connect(&at, 0, common::SECRET.as_bytes()).unwrap();
    let r =
        gossamer_cli::client::request(&mut c, &common::start_msg("/usr/bin/true", &[], &[]), Duration::from_secs(10));
    match r.unwrap() {
        DaemonMsg::Refused { reason, .. } => assert!(reason.contains("cannot start rank 0"), "{reason}"),
        other => panic!("a Start under the task limit was not refused: {other:?}"),
    }
    let r = gossamer_cli::client::request(&mut c, &ClientMsg::Query, Duration::from_secs(15)).unwrap();
    match r {
        DaemonMsg::Info(i) => assert!(i.transports.is_err(), "{i:?}"),
        other => panic!("{other:?}"),
    }
    drop(c);
    stop.store(true, Ordering::Relaxed);
    let connects = peers.join().unwrap();
    eprintln!("FIGURE slow peers: {connects} connections made");
    assert!(daemon.alive(), "the daemon exited:\n{}", daemon.log());
    assert_eq!(daemon.status_field("Threads"), threads);
    let log = daemon.log();
    assert!(log.contains("refused to start") && log.contains("cannot start rank 0"), "{log}");
    assert!(log.contains("closed") && log.contains("at once"), "over-cap connections are not reported:\n{log}");
    assert!(log.lines().count() < 200, "the log is flooded:\n{log}");
    eprintln!("daemon log:\n{}", log.lines().take(14).collect::<Vec<_>>().join("\n"));
}
