//! The server under abuse: random bytes, many connections, the connection
//! limit, the memory limit, and clients that vanish. It must never crash,
//! hang or leak a connection.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use common::{Proc, Raw};

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn stat(c: &mut Raw, name: &str) -> u64 {
    c.send(b"stats\r\n");
    let text = String::from_utf8(c.recv_until(b"END\r\n")).unwrap();
    let line =
        text.lines().find(|l| l.starts_with(&format!("STAT {name} "))).unwrap_or_else(|| panic!("no stat {name}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Waits until `curr_connections` (the asking connection included) drops
/// to `want`.
fn await_connections(p: &Proc, want: u64) {
    let start = Instant::now();
    loop {
        let mut c = p.raw();
        let n = stat(&mut c, "curr_connections");
        if n == want {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "curr_connections stuck at {n}, want {want}");
        thread::sleep(Duration::from_millis(50));
    }
}

fn fragments(rng: &mut Rng) -> Vec<u8> {
    const PIECES: &[&[u8]] = &[
        b"get ",
        b"gets ",
        b"set ",
        b"add ",
        b"cas ",
        b"incr ",
        b"delete ",
        b"touch ",
        b"gat ",
        b"flush_all",
        b"stats",
        b" ",
        b"  ",
        b"0",
        b"1",
        b"-1",
        b"4294967296",
        b"noreply",
        b"\r\n",
        b"\n",
        b"\r",
        b"key",
        b"\x80",
        b"\x00",
        b"verbosity",
        b"version",
        b"99999999999999999999",
    ];
    let mut v = Vec::new();
    for _ in 0..rng.below(40) {
        if rng.below(4) == 0 {
            v.push(rng.next() as u8);
        } else {
            v.extend_from_slice(PIECES[rng.below(PIECES.len() as u64) as usize]);
        }
    }
    v
}

#[test]
fn random_input_never_kills_the_server() {
    let mut p = Proc::kv(&["-t", "2", "-m", "8"]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let deadline = Instant::now() + Duration::from_secs(20);
    for round in 0..400 {
        if Instant::now() > deadline {
            break;
        }
        let mut s = TcpStream::connect(p.addr).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let binary = round % 3 == 0;
        for _ in 0..rng.below(8) + 1 {
            let mut chunk = fragments(&mut rng);
            if binary {
                chunk.insert(0, 0x80);
            }
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
        // Some clients vanish without reading.
        if rng.below(2) == 0 {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
    assert!(p.alive(), "the server died");
    let mut c = p.raw();
    c.check(b"set alive 0 0 2\r\nok\r\nget alive\r\n", b"STORED\r\nVALUE alive 0 2\r\nok\r\nEND\r\n");
    drop(c);
    await_connections(&p, 1);
}

#[test]
fn connection_limit_refuses_and_recovers() {
    let p = Proc::kv(&["-t", "2", "-c", "4"]);
    let mut held: Vec<Raw> = (0..4).map(|_| p.raw()).collect();
    for c in &mut held {
        c.check(b"version\r\n", b"VERSION ");
        c.recv_until(b"\r\n");
    }
    let mut extra = p.raw();
    extra.check(b"", b"ERROR Too many open connections\r\n");
    extra.expect_closed();
    held.pop();
    thread::sleep(Duration::from_millis(200));
    let mut again = p.raw();
    again.check(b"version\r\n", b"VERSION ");
    assert!(stat(&mut again, "rejected_connections") >= 1);
}

#[test]
fn many_connections_in_parallel() {
    let p = Proc::kv(&["-t", "2"]);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let addr = p.addr;
            thread::spawn(move || {
                let mut conns: Vec<Raw> = (0..25).map(|_| Raw::connect(addr)).collect();
                for round in 0..20 {
                    for (i, c) in conns.iter_mut().enumerate() {
                        let key = format!("t{t}c{i}");
                        c.send(format!("set {key} 0 0 2\r\n{round:02}\r\nget {key}\r\n").as_bytes());
                    }
                    for (i, c) in conns.iter_mut().enumerate() {
                        let want = format!("STORED\r\nVALUE t{t}c{i} 0 2\r\n{round:02}\r\nEND\r\n");
                        assert_eq!(c.recv_exact(want.len()), want.as_bytes());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    await_connections(&p, 1);
}

#[test]
fn memory_limit_evicts_least_recently_used() {
    let p = Proc::kv(&["-t", "2", "-m", "2", "-I", "1k"]);
    let mut c = p.raw();
    let value = vec![b'v'; 900];
    for i in 0..5000 {
        c.send(format!("set k{i} 0 0 900 noreply\r\n").as_bytes());
        c.send(&value);
        c.send(b"\r\n");
    }
    let evictions = stat(&mut c, "evictions");
    let bytes = stat(&mut c, "bytes");
    assert!(evictions > 2000, "evictions {evictions}");
    assert!(bytes <= 2 << 20, "bytes {bytes} over the 2 MiB limit");
    // The newest items survive, the oldest are gone.
    c.check(b"get k0\r\n", b"END\r\n");
    c.check(b"get k4999\r\n", b"VALUE k4999 0 900\r\n");
}

#[test]
fn vanishing_clients_do_not_leak() {
    let p = Proc::kv(&["-t", "2"]);
    for i in 0..50 {
        let mut c = p.raw();
        // Leave mid-command, mid-value, or with replies unread.
        match i % 3 {
            0 => c.send(b"set x 0 0 100\r\nabc"),
            1 => c.send(b"get a b c"),
            _ => {
                for _ in 0..200 {
                    c.send(b"get a b c d e f g h\r\n");
                }
            }
        }
    }
    await_connections(&p, 1);
}

#[test]
fn shuts_down_on_sigterm() {
    let p = Proc::kv(&["-t", "2"]);
    let mut c = p.raw();
    c.check(b"version\r\n", b"VERSION ");
    let pid = p.pid();
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    c.expect_closed();
    let mut p = p;
    let start = Instant::now();
    while p.alive() {
        assert!(start.elapsed() < Duration::from_secs(10), "no exit after SIGTERM");
        thread::sleep(Duration::from_millis(20));
    }
}

/// With no spinning at all, every request to another worker's shard goes
/// through the sleep/wake protocol. A lost wake-up would cost the 50 ms
/// sleep limit; 2000 round trips must take far less than that would.
#[test]
fn sleeping_workers_wake_promptly() {
    for args in [
        &["-t", "2", "--idle-spin-us", "0", "--wait-spin-us", "0"][..],
        &["-t", "3", "--idle-spin-us", "0", "--wait-spin-us", "0"],
        &["-t", "3", "--dedicated-trustees", "1", "--idle-spin-us", "0", "--wait-spin-us", "0"],
    ] {
        let p = Proc::kv(args);
        let mut conns: Vec<Raw> = (0..3).map(|_| p.raw()).collect();
        let start = Instant::now();
        let mut slow = 0;
        for i in 0..2000 {
            let c = &mut conns[i % 3];
            let t = Instant::now();
            c.send(format!("set w{i} 0 0 1\r\nx\r\n").as_bytes());
            assert_eq!(c.recv_exact(8), b"STORED\r\n");
            if t.elapsed() >= Duration::from_millis(45) {
                slow += 1;
            }
        }
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(20) && slow <= 10,
            "{args:?}: 2000 round trips took {took:?}, {slow} of them over 45 ms"
        );
        let mut c = p.raw();
        assert_eq!(stat(&mut c, "curr_items"), 2000);
    }
}
