//! gossamer-kv as one program over several processes of this host
//! (`--processes N`): every process serves clients, keys live in shards
//! spread over all processes, and the answers are those of a server of one
//! process with the same number of shards, byte for byte.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::program::Program;
use common::{bin_req, random_text_stream, Proc, Raw, Rng, TIMEOUT};

/// The value of `STAT name` in a stats reply.
fn stat(reply: &str, name: &str) -> String {
    let prefix = format!("STAT {name} ");
    reply.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {name} in {reply:?}")).to_string()
}

fn text(raw: &mut Raw, send: &[u8]) -> Vec<u8> {
    raw.send(send);
    raw.send(b"mn\r\n");
    let mut got = raw.recv_until(b"MN\r\n");
    got.truncate(got.len() - 4);
    got
}

/// Reads `n` reply lines.
fn lines(raw: &mut Raw, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    while got.iter().filter(|&&b| b == b'\n').count() < n {
        got.extend(raw.recv_exact(1));
    }
    String::from_utf8(got).unwrap().lines().map(str::to_string).collect()
}

fn stats(raw: &mut Raw, args: &str) -> String {
    raw.send(format!("stats{args}\r\n").as_bytes());
    String::from_utf8(raw.recv_until(b"END\r\n")).unwrap()
}

/// Random text streams, each sent to one process of a 3-process program
/// (in turn) and to a server of one process with the same shard count:
/// the replies, CAS values included, are the same bytes.
#[test]
fn random_text_streams_across_processes_match_one_process() {
    const WORDS: &[&str] = &[
        "get",
        "gets",
        "gat",
        "gats",
        "set",
        "add",
        "replace",
        "append",
        "prepend",
        "cas",
        "delete",
        "incr",
        "decr",
        "touch",
        "flush_all",
        "version",
        "verbosity",
        "noreply",
        "k",
        "k2",
        "key:1",
        "key:2",
        "a",
        "b",
        "c",
        "0",
        "1",
        "2",
        "5",
        "-1",
        "10",
        "abc",
        "18446744073709551615",
        "x",
        "xyz",
        "",
        "mg",
        "ms",
        "md",
        "ma",
        "mn",
        "v",
        "k",
        "c",
        "f",
        "s",
        "q",
        "N30",
        "MA",
        "MD",
        "F5",
        "D3",
        "J7",
        "I",
    ];
    let rack = Program::start(3, &["-t", "1"]);
    let single = Proc::kv(&["-t", "3"]);
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let mut ours: Vec<Raw> = (0..3).map(|r| rack.raw(r)).collect();
    let mut theirs = single.raw();
    for case in 0..1500 {
        let stream = random_text_stream(&mut rng, WORDS, &["\r\n"]);
        let want = text(&mut theirs, stream.as_bytes());
        let got = text(&mut ours[case % 3], stream.as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "case {case} (process {}): reply to {stream:?}",
            case % 3
        );
    }
}

/// Random binary requests, spread over the processes likewise.
#[test]
fn random_binary_requests_across_processes_match_one_process() {
    const OPS: &[u8] = &[0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x09, 0x0c, 0x0d, 0x0e, 0x0f, 0x11, 0x1c, 0x1d];
    const KEYS: &[&[u8]] = &[b"a", b"b", b"n1", b"n2", b"key:1", b"key:2"];
    const VALUES: &[&[u8]] = &[b"", b"1", b"42", b"hello"];
    let rack = Program::start(3, &["-t", "1"]);
    let single = Proc::kv(&["-t", "3"]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ours: Vec<Raw> = (0..3).map(|r| rack.raw(r)).collect();
    let mut theirs = single.raw();
    for case in 0..1000 {
        let mut stream = Vec::new();
        for i in 0..1 + rng.below(4) {
            let op = OPS[rng.below(OPS.len())];
            let key = KEYS[rng.below(KEYS.len())];
            let opaque = (case * 8 + i) as u32;
            let req = match op {
                0x00 | 0x09 | 0x0c | 0x0d | 0x04 => bin_req(op, key, b"", b"", opaque, 0),
                0x01 | 0x02 | 0x03 | 0x11 => {
                    bin_req(op, key, &[0, 0, 0, 7, 0, 0, 0, 0], VALUES[rng.below(VALUES.len())], opaque, 0)
                }
                0x0e | 0x0f => bin_req(op, key, b"", VALUES[rng.below(VALUES.len())], opaque, 0),
                0x05 | 0x06 => {
                    let mut extras = [1u64, 5][rng.below(2)].to_be_bytes().to_vec();
                    extras.extend_from_slice(&10u64.to_be_bytes());
                    extras.extend_from_slice(&0u32.to_be_bytes());
                    bin_req(op, key, &extras, b"", opaque, 0)
                }
                _ => bin_req(op, key, &100u32.to_be_bytes(), b"", opaque, 0),
            };
            stream.extend_from_slice(&req);
        }
        let marker = bin_req(0x0a, b"", b"", b"", 0xfeed_f00d, 0);
        let run = |raw: &mut Raw| {
            raw.send(&stream);
            raw.send(&marker);
            let mut out = Vec::new();
            loop {
                let r = raw.recv_bin();
                if r.opcode == 0x0a && r.opaque == 0xfeed_f00d {
                    return out;
                }
                out.push(r);
            }
        };
        let want = run(&mut theirs);
        let got = run(&mut ours[case % 3]);
        assert_eq!(got, want, "case {case}: {stream:?}");
    }
}

/// An unmodified client library against each process, in both protocols;
/// what one process stores, every other reads.
#[test]
fn the_memcache_crate_against_each_process() {
    let rack = Program::start(3, &["-t", "1"]);
    let url = |r: usize, ascii: bool| {
        format!("memcache://{}?timeout=10{}", rack.addrs[r], if ascii { "&protocol=ascii" } else { "" })
    };
    for ascii in [true, false] {
        let clients: Vec<memcache::Client> = (0..3).map(|r| memcache::connect(url(r, ascii)).unwrap()).collect();
        clients[0].flush().unwrap();
        for (r, c) in clients.iter().enumerate() {
            assert!(!c.version().unwrap().is_empty());
            for i in 0..30 {
                c.set(&format!("p{r}:{i}"), format!("v{r}.{i}"), 0).unwrap();
            }
        }
        for c in &clients {
            for r in 0..3 {
                for i in 0..30 {
                    let v: Option<String> = c.get(&format!("p{r}:{i}")).unwrap();
                    assert_eq!(v, Some(format!("v{r}.{i}")));
                }
            }
            let keys: Vec<String> = (0..30).map(|i| format!("p1:{i}")).collect();
            let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
            let got: std::collections::HashMap<String, String> = c.gets(&refs).unwrap();
            assert_eq!(got.len(), 30);
        }
        clients[1].set("counter", 40, 0).unwrap();
        assert_eq!(clients[2].increment("counter", 2).unwrap(), 42);
        assert_eq!(clients[0].decrement("counter", 2).unwrap(), 40);
        assert!(clients[2].delete("p0:0").unwrap());
        assert_eq!(clients[1].get::<String>("p0:0").unwrap(), None);
        clients[0].flush().unwrap();
        assert_eq!(clients[2].get::<String>("p1:1").unwrap(), None);
    }
}

/// One client keeps pipelining against one process while clients of the
/// other processes hammer one hot counter: the pipeline's answers are all
/// right, and not one increment is lost.
#[test]
fn pipelining_client_is_served_while_others_hammer_a_hot_key() {
    let rack = Program::start(3, &["-t", "1"]);
    rack.raw(0).check(b"set hot 0 0 1\r\n0\r\n", b"STORED\r\n");
    const ROUNDS: usize = 200;
    const BURST: usize = 20;
    let hammers: Vec<_> = [0usize, 2]
        .into_iter()
        .map(|r| {
            let mut raw = rack.raw(r);
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    raw.send(&b"incr hot 1\r\n".repeat(BURST));
                    let got = lines(&mut raw, BURST);
                    assert_eq!(got.len(), BURST);
                    assert!(got.iter().all(|l| l.parse::<u64>().is_ok()), "{got:?}");
                }
            })
        })
        .collect();
    let mut p = rack.raw(1);
    for round in 0..100 {
        let mut req = Vec::new();
        let mut want = Vec::new();
        for i in 0..16 {
            let v = format!("{round}-{i}");
            req.extend_from_slice(format!("set pipe:{i} 0 0 {}\r\n{v}\r\nget pipe:{i}\r\n", v.len()).as_bytes());
            want.extend_from_slice(format!("STORED\r\nVALUE pipe:{i} 0 {}\r\n{v}\r\nEND\r\n", v.len()).as_bytes());
        }
        p.check(&req, &want);
    }
    for h in hammers {
        h.join().unwrap();
    }
    let total = 2 * ROUNDS * BURST;
    p.check(b"get hot\r\n", format!("VALUE hot 0 {}\r\n{total}\r\nEND\r\n", total.to_string().len()).as_bytes());
}

/// `stats` covers the program, `stats process N` one process, and a bad
/// rank is refused.
#[test]
fn stats_cover_the_program_and_each_process() {
    let rack = Program::start(3, &["-t", "1", "-m", "16"]);
    let mut c: Vec<Raw> = (0..3).map(|r| rack.raw(r)).collect();
    for i in 0..60 {
        c[i % 3].check(format!("set s{i} 0 0 1\r\nx\r\n").as_bytes(), b"STORED\r\n");
    }
    let all = stats(&mut c[1], "");
    assert_eq!(stat(&all, "curr_items"), "60");
    assert_eq!(stat(&all, "cmd_set"), "60");
    assert_eq!(stat(&all, "threads"), "3");
    // Plain `stats` has memcached's keys only; the program's shape is in
    // `stats settings`.
    for key in ["processes", "shards", "rank"] {
        assert!(!all.contains(&format!("STAT {key} ")), "{key} in plain stats");
    }
    let settings = stats(&mut c[1], " settings");
    assert_eq!(stat(&settings, "processes"), "3");
    assert_eq!(stat(&settings, "shards"), "3");
    assert_eq!(stat(&all, "limit_maxbytes"), ((3u64 * 16) << 20).to_string());
    assert_eq!(stat(&all, "curr_connections"), "3");
    let mut items = 0;
    let mut pids = Vec::new();
    for r in 0..3 {
        let one = stats(&mut c[0], &format!(" process {r}"));
        assert_eq!(stat(&one, "rank"), r.to_string());
        assert_eq!(stat(&one, "processes"), "1");
        assert_eq!(stat(&one, "curr_connections"), "1");
        items += stat(&one, "curr_items").parse::<u64>().unwrap();
        pids.push(stat(&one, "pid"));
    }
    assert_eq!(items, 60);
    pids.dedup();
    assert_eq!(pids.len(), 3, "{pids:?}");
    c[2].check(b"stats process 3\r\n", b"CLIENT_ERROR no process 3: the program has 3\r\n");
    c[2].check(b"stats process x\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c[2].check(b"stats reset\r\n", b"RESET\r\n");
    assert_eq!(stat(&stats(&mut c[0], ""), "cmd_set"), "0");
    // `cache_memlimit` sets each process's limit, as `-m` does.
    c[1].check(b"cache_memlimit 8\r\n", b"OK\r\n");
    assert_eq!(stat(&stats(&mut c[0], ""), "limit_maxbytes"), ((3u64 * 8) << 20).to_string());
    assert_eq!(stat(&stats(&mut c[0], " process 2"), "limit_maxbytes"), (8u64 << 20).to_string());
}

/// Stock memcached to compare with, or `None` (the comparison is skipped)
/// when it is not installed and `GOSSAMER_KV_REQUIRE_MEMCACHED=1` is unset.
fn memcached() -> Option<Proc> {
    match Proc::memcached(&["-t", "2"]) {
        Some(mc) => Some(mc),
        None => {
            common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
            None
        }
    }
}

/// `n` text commands built by `line(i)`, sent in one write; their `n`
/// one-line replies.
fn each(raw: &mut Raw, n: usize, line: impl Fn(usize) -> String) -> Vec<String> {
    let script: String = (0..n).map(line).collect();
    raw.send(script.as_bytes());
    lines(raw, n)
}

/// Keys with a TTL, stored through rank 0 and never asked for again, are
/// gone when due in every process, whether or not that process has
/// clients: `curr_items` and `reclaimed` through every rank, and then the
/// gets through every rank, are memcached's.
#[test]
fn keys_expire_and_are_reclaimed_in_every_process_without_traffic_there() {
    let Some(mc) = memcached() else { return };
    let rack = Program::start(2, &["-t", "2"]);
    let mut m = mc.raw();
    let mut r: Vec<Raw> = (0..2).map(|i| rack.raw(i)).collect();
    for c in [&mut m, &mut r[0]] {
        let stored = each(c, 40, |i| format!("set e{i} 0 2 1\r\nx\r\n"));
        assert!(stored.iter().all(|l| l == "STORED"), "{stored:?}");
    }
    thread::sleep(Duration::from_millis(3200));
    let want = stats(&mut m, "");
    assert_eq!((stat(&want, "curr_items"), stat(&want, "reclaimed")), ("0".into(), "40".into()));
    let times: Vec<(u64, u64)> = (0..2)
        .map(|i| {
            let got = stats(&mut r[i], "");
            assert_eq!(
                (stat(&got, "curr_items"), stat(&got, "reclaimed")),
                (stat(&want, "curr_items"), stat(&want, "reclaimed")),
                "curr_items and reclaimed through rank {i}"
            );
            (stat(&got, "time").parse().unwrap(), stat(&got, "uptime").parse().unwrap())
        })
        .collect();
    assert!(times[0].0.abs_diff(times[1].0) <= 1 && times[0].1.abs_diff(times[1].1) <= 1, "time, uptime: {times:?}");
    let gets: String = (0..40).map(|i| format!(" e{i}")).collect();
    let want = text(&mut m, format!("get{gets}\r\n").as_bytes());
    for (i, c) in r.iter_mut().enumerate() {
        assert_eq!(text(c, format!("get{gets}\r\n").as_bytes()), want, "gets through rank {i}");
    }
}

/// A delayed `flush_all` takes effect at the same moment in every process,
/// whichever process the client told: keys stored after it are all
/// readable, through every rank, as in memcached.
#[test]
fn a_delayed_flush_takes_effect_in_every_process_at_once() {
    let Some(mc) = memcached() else { return };
    let rack = Program::start(2, &["-t", "2"]);
    let mut m = mc.raw();
    let mut r: Vec<Raw> = (0..2).map(|i| rack.raw(i)).collect();
    for told in 0..2 {
        for c in [&mut m, &mut r[told]] {
            c.check(b"flush_all 1\r\n", b"OK\r\n");
        }
        // Only the process told has clients meanwhile.
        thread::sleep(Duration::from_millis(2200));
        for c in [&mut m, &mut r[told]] {
            let stored = each(c, 40, |i| format!("set f{told}_{i} 0 0 2\r\n{i:02}\r\n"));
            assert!(stored.iter().all(|l| l == "STORED"), "{stored:?}");
        }
        let gets: String = (0..40).map(|i| format!(" f{told}_{i}")).collect();
        let want = text(&mut m, format!("get{gets}\r\n").as_bytes());
        assert_eq!(want.iter().filter(|&&b| b == b'\n').count(), 81, "memcached: {}", String::from_utf8_lossy(&want));
        for (i, c) in r.iter_mut().enumerate() {
            let got = text(c, format!("get{gets}\r\n").as_bytes());
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "flush_all 1 told to rank {told}; gets through rank {i}"
            );
        }
    }
}

/// Remaining TTLs (meta `t`), `touch` and `gat` mean the same time in
/// every process: keys stored through rank 0 show memcached's TTL when
/// asked through rank 1 after a quiet while, and keys touched or got
/// with a 1 s TTL through rank 1 are gone through rank 0 two seconds
/// later.
#[test]
fn ttls_touch_and_gat_agree_in_every_process() {
    let Some(mc) = memcached() else { return };
    let rack = Program::start(2, &["-t", "2"]);
    let mut m = mc.raw();
    let mut r: Vec<Raw> = (0..2).map(|i| rack.raw(i)).collect();
    for c in [&mut m, &mut r[0]] {
        let stored = each(c, 40, |i| format!("ms t{i} 1 T10\r\nx\r\n"));
        assert!(stored.iter().all(|l| l == "HD"), "{stored:?}");
    }
    thread::sleep(Duration::from_millis(2200));
    // Set 2.2 s ago with a TTL of 10 s: 8 or 7 s left, depending on where
    // the clock's seconds turn.
    let left = |c: &mut Raw| -> Vec<String> { each(c, 40, |i| format!("mg t{i} t\r\n")) };
    let want = left(&mut m);
    let got = left(&mut r[1]);
    for l in want.iter().chain(&got) {
        assert!(l == "HD t8" || l == "HD t7", "memcached {want:?}\nours {got:?}");
    }
    for c in [&mut m, &mut r[1]] {
        let touched = each(c, 20, |i| format!("touch t{} 1\r\n", 2 * i));
        assert!(touched.iter().all(|l| l == "TOUCHED"), "{touched:?}");
        let got: String = (0..20).map(|i| format!(" t{}", 2 * i + 1)).collect();
        c.send(format!("gat 1{got}\r\n").as_bytes());
        let reply = String::from_utf8(c.recv_until(b"END\r\n")).unwrap();
        assert_eq!(reply.matches("VALUE").count(), 20, "{reply}");
    }
    thread::sleep(Duration::from_millis(2200));
    let gets: String = (0..40).map(|i| format!(" t{i}")).collect();
    let want = text(&mut m, format!("get{gets}\r\n").as_bytes());
    assert_eq!(String::from_utf8_lossy(&want), "END\r\n");
    for (i, c) in r.iter_mut().enumerate() {
        let got = text(c, format!("get{gets}\r\n").as_bytes());
        assert_eq!(String::from_utf8_lossy(&got), "END\r\n", "gets through rank {i}");
    }
}

/// SIGTERM to any process stops the whole program cleanly.
#[test]
fn a_signal_to_any_process_stops_the_program() {
    for victim in [0usize, 2] {
        let mut rack = Program::start(3, &["-t", "1"]);
        let mut c = rack.raw(1);
        let pid: u32 = stat(&stats(&mut c, &format!(" process {victim}")), "pid").parse().unwrap();
        Program::signal(pid, libc::SIGTERM);
        let status = rack.wait(TIMEOUT);
        assert!(status.success(), "SIGTERM to rank {victim}: {status}");
        c.expect_closed();
    }
}

/// A process that dies takes the program down: every client's connection
/// closes, and no request gets a wrong answer meanwhile.
#[test]
fn a_dead_process_closes_every_connection() {
    let mut rack = Program::start(3, &["-t", "1"]);
    let mut clients: Vec<Raw> = (0..3).map(|r| rack.raw(r)).collect();
    clients[0].check(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    let pid: u32 = stat(&stats(&mut clients[0], " process 1"), "pid").parse().unwrap();
    Program::signal(pid, libc::SIGKILL);
    let status = rack.wait(TIMEOUT);
    assert!(!status.success(), "the program must fail when a process dies: {status}");
    for c in clients.iter_mut().step_by(2) {
        // Whatever still arrives is a right answer, then the close.
        c.stream.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
        let _ = std::io::Write::write_all(&mut c.stream, b"get k\r\n");
        let (got, closed) = c.recv_quiet(Duration::from_secs(2));
        assert!(closed, "the connection stayed open");
        assert!(got.is_empty() || got == b"VALUE k 0 1\r\nv\r\nEND\r\n", "{:?}", String::from_utf8_lossy(&got));
    }
}

/// Bad process counts and ports are refused before anything starts.
#[test]
fn bad_settings_are_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_gossamer-kv"))
        .args(["--processes", "0", "-p", "0"])
        .env_remove("GOSSAMER_PROCESSES")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--processes must be at least 1"));
    let out = Command::new(env!("CARGO_BIN_EXE_gossamer-kv"))
        .args(["--processes", "2", "-p", "65535", "-t", "1"])
        .env_remove("GOSSAMER_PROCESSES")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("port 65535 + rank 1 is not a TCP port"), "{err}");
}

/// Started by Open MPI's `mpirun` like any Gossamer program (the ranks meet
/// at `GOSSAMER_RENDEZVOUS`). Skips loudly without `mpirun`; fails instead
/// with `GOSSAMER_REQUIRE_MPI=1` (CI sets it and installs openmpi-bin).
#[test]
fn started_by_mpirun() {
    let found = Command::new("mpirun").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !found {
        common::skip::skip("mpirun (apt install openmpi-bin)", "GOSSAMER_REQUIRE_MPI");
        return;
    }
    use std::os::unix::process::CommandExt;
    let sock = std::env::temp_dir().join(format!("kv-mpirun-{}.sock", std::process::id()));
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np", "2", "-x"])
        .arg(format!("GOSSAMER_RENDEZVOUS={}", sock.display()))
        .args(["-x", "GOSSAMER_SILENCE_MS=10000", "-x", "GOSSAMER_SECRET"])
        .env("GOSSAMER_SECRET", format!("kv-mpirun-test-{}", std::process::id()))
        .env_remove("GOSSAMER_SECRET_FILE")
        .arg(env!("CARGO_BIN_EXE_gossamer-kv"))
        .args(["-t", "1", "-p", "0", "-l", "127.0.0.1"])
        .env_remove("GOSSAMER_PROCESSES")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // SAFETY: setpgid is async-signal-safe: mpirun and its ranks get a
    // process group of their own, which the test signals as a whole.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let pgid = child.id() as i32;
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut addrs = Vec::new();
    while addrs.len() < 2 {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) else {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            panic!("mpirun's program did not report its addresses");
        };
        if line.contains(" listening on ") {
            addrs.push(line.rsplit(' ').next().unwrap().parse::<SocketAddr>().unwrap());
        }
    }
    let mut a = Raw::connect(addrs[0]);
    let mut b = Raw::connect(addrs[1]);
    for i in 0..20 {
        a.check(format!("set m{i} 0 0 2\r\nv{}\r\n", i % 10).as_bytes(), b"STORED\r\n");
    }
    for i in 0..20 {
        b.check(format!("get m{i}\r\n").as_bytes(), format!("VALUE m{i} 0 2\r\nv{}\r\nEND\r\n", i % 10).as_bytes());
    }
    assert_eq!(stat(&stats(&mut b, " settings"), "processes"), "2");
    // mpirun forwards SIGTERM to its ranks; the program stops cleanly.
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pgid, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            // SAFETY: as above.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            panic!("mpirun did not end after SIGTERM");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&sock);
    eprintln!("mpirun ended with {status}");
    a.expect_closed();
    // Nothing of the program is left (give the last rank a moment to go).
    let start = Instant::now();
    // SAFETY: signal 0 only checks that the process group exists.
    while unsafe { libc::kill(-pgid, 0) } == 0 {
        assert!(start.elapsed() < TIMEOUT, "a rank outlived mpirun");
        thread::sleep(Duration::from_millis(20));
    }
}
