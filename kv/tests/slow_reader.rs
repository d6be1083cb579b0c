//! A client that pipelines many `get`s and reads the replies slowly: the
//! server stops reading it once its unwritten replies pass a small bound
//! (as memcached does), so the server's memory does not grow with the
//! volume of replies, and every reply still arrives, whole and in order.
//! Checked beside stock memcached, against a server of one process and
//! against each process of a program of two.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::program::Program;
use common::{Proc, Raw, TIMEOUT};

/// Pipelined gets per probe.
const GETS: usize = 100_000;
/// How fast the client reads, in bytes per second.
const RATE: f64 = 20e6;
/// How much the server's peak resident memory may grow over its resident
/// memory before the probe: the README's bound for one connection with
/// 1 KiB values (4 MiB), plus room for the allocator.
const BOUND: u64 = 8 << 20;
/// Longest a probe may take.
const PROBE_MAX: Duration = Duration::from_secs(120);

/// `VmRSS` and `VmHWM` of process `pid`, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}"));
        let kb: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().unwrap();
        kb * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Watches the resident memory of some processes while a probe runs.
struct Meter {
    pids: Vec<u32>,
    before: Vec<(u64, u64)>,
    peak: Arc<Vec<AtomicU64>>,
    stop: Arc<AtomicBool>,
    sampler: Option<thread::JoinHandle<()>>,
}

impl Meter {
    fn start(pids: &[u32]) -> Meter {
        let before: Vec<_> = pids.iter().map(|&p| memory(p)).collect();
        let peak: Arc<Vec<AtomicU64>> = Arc::new(before.iter().map(|&(rss, _)| AtomicU64::new(rss)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (pids, peak, stop) = (pids.to_vec(), peak.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for (i, &p) in pids.iter().enumerate() {
                        peak[i].fetch_max(memory(p).0, Ordering::Relaxed);
                    }
                    thread::sleep(Duration::from_millis(5));
                }
            })
        };
        Meter { pids: pids.to_vec(), before, peak, stop, sampler: Some(sampler) }
    }

    /// Each process's peak resident memory (its high-water mark if that
    /// moved, else the highest sample) and how far that rose over its
    /// resident memory at the start.
    fn growth(mut self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.sampler.take().unwrap().join().unwrap();
        self.pids
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let (rss0, hwm0) = self.before[i];
                let hwm = memory(p).1;
                let peak = if hwm > hwm0 { hwm } else { self.peak[i].load(Ordering::Relaxed) };
                (peak, peak.saturating_sub(rss0))
            })
            .collect()
    }
}

/// What a probe saw.
struct Probe {
    /// Reply bytes received.
    bytes: u64,
    /// Peak resident memory of each watched process.
    peak: Vec<u64>,
    /// Its growth over the resident memory before the probe.
    growth: Vec<u64>,
    secs: f64,
}

/// Stores a `value_len`-byte value at `key`, pipelines `GETS` gets of it
/// from a writer thread and reads the replies at [`RATE`], checking every
/// byte; `pids` are the processes whose memory is watched.
fn probe(addr: SocketAddr, pids: &[u32], key: &str, value_len: usize) -> Probe {
    let value: Vec<u8> = (0..value_len).map(|i| b'a' + (i % 26) as u8).collect();
    let mut raw = Raw::connect(addr);
    raw.send(format!("set {key} 0 0 {value_len}\r\n").as_bytes());
    raw.send(&value);
    raw.check(b"\r\n", b"STORED\r\n");
    raw.check(format!("get {key}\r\n").as_bytes(), &reply_of(key, &value));
    let reply = reply_of(key, &value);
    let meter = Meter::start(pids);

    let stream = raw.stream;
    let mut writer = stream.try_clone().unwrap();
    let req = format!("get {key}\r\n").into_bytes();
    let send = thread::spawn(move || {
        let chunk: Vec<u8> = req.repeat(4096);
        let mut left = GETS;
        while left > 0 {
            let n = left.min(4096);
            writer.write_all(&chunk[..n * req.len()]).expect("pipeline the gets");
            left -= n;
        }
    });

    let start = Instant::now();
    let want = (reply.len() * GETS) as u64;
    let got = read_throttled(stream, &reply, want, start);
    send.join().unwrap();
    let secs = start.elapsed().as_secs_f64();
    let (peak, growth) = meter.growth().into_iter().unzip();
    Probe { bytes: got, peak, growth, secs }
}

fn reply_of(key: &str, value: &[u8]) -> Vec<u8> {
    [format!("VALUE {key} 0 {}\r\n", value.len()).as_bytes(), value, b"\r\nEND\r\n"].concat()
}

/// Reads `want` bytes at no more than [`RATE`], checking that they are
/// `reply` over and over.
fn read_throttled(mut stream: TcpStream, reply: &[u8], want: u64, start: Instant) -> u64 {
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0u64;
    while got < want {
        assert!(start.elapsed() < PROBE_MAX, "the replies took over {PROBE_MAX:?} ({got} of {want} bytes)");
        // Read no faster than RATE: wait until the bytes so far are due.
        let due = Duration::from_secs_f64(got as f64 / RATE);
        if let Some(early) = due.checked_sub(start.elapsed()) {
            thread::sleep(early);
        }
        let room = buf.len().min((want - got) as usize);
        let n = match stream.read(&mut buf[..room]) {
            Ok(0) => panic!("closed after {got} of {want} bytes"),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("reading replies after {got} of {want} bytes: {e}"),
        };
        for (i, &b) in buf[..n].iter().enumerate() {
            let at = got + i as u64;
            let expect = reply[(at % reply.len() as u64) as usize];
            assert_eq!(b, expect, "reply byte {at} (reply {}) differs", at / reply.len() as u64);
        }
        got += n as u64;
    }
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    match stream.read(&mut buf) {
        Ok(n) if n > 0 => panic!("{n} bytes more than the replies"),
        _ => {}
    }
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    got
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// memcached, as the reference: the same replies arrive; its growth is
/// printed beside ours.
fn memcached_probe(value_len: usize) {
    let Some(mc) = Proc::memcached(&["-t", "2"]) else {
        common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
        return;
    };
    let p = probe(mc.addr, &[mc.pid()], "slow", value_len);
    eprintln!(
        "memcached: {:.0} MB of replies in {:.1} s, peak RSS {:.1} MB (growth {:.1} MB)",
        mb(p.bytes),
        p.secs,
        mb(p.peak[0]),
        mb(p.growth[0])
    );
}

fn one_process(value_len: usize) -> Probe {
    let kv = Proc::kv(&["-t", "2"]);
    let p = probe(kv.addr, &[kv.pid()], "slow", value_len);
    eprintln!(
        "gossamer-kv: {:.0} MB of replies in {:.1} s, peak RSS {:.1} MB (growth {:.1} MB)",
        mb(p.bytes),
        p.secs,
        mb(p.peak[0]),
        mb(p.growth[0])
    );
    p
}

#[test]
fn a_slow_reader_does_not_grow_one_process() {
    memcached_probe(1024);
    let p = one_process(1024);
    assert!(p.growth[0] < BOUND, "peak RSS grew {:.1} MB for {:.0} MB of replies", mb(p.growth[0]), mb(p.bytes));
}

/// Each process of a program of two, addressed in turn with the same key,
/// which lives in one of them: one of the probes is served across
/// processes. Both processes'
/// memory is watched.
#[test]
fn a_slow_reader_does_not_grow_any_process_of_two() {
    let prog = Program::start(2, &["-t", "2"]);
    let pids = [prog.pid(0), prog.pid(1)];
    for rank in 0..2 {
        let p = probe(prog.addrs[rank], &pids, "slow", 1024);
        eprintln!(
            "gossamer-kv rank {rank} of 2: {:.0} MB of replies in {:.1} s, peak RSS {:.1} / {:.1} MB (growth {:.1} / {:.1} MB)",
            mb(p.bytes),
            p.secs,
            mb(p.peak[0]),
            mb(p.peak[1]),
            mb(p.growth[0]),
            mb(p.growth[1])
        );
        for (r, g) in p.growth.iter().enumerate() {
            assert!(*g < BOUND, "rank {r}'s peak RSS grew {:.1} MB for {:.0} MB of replies", mb(*g), mb(p.bytes));
        }
    }
}

/// The larger probe (about 310 MB of replies), for measurements:
/// `cargo test -p gossamer-kv --test slow_reader -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: 310 MB of replies at 20 MB/s per server"]
fn a_slow_reader_of_3_kib_values() {
    memcached_probe(3 * 1024);
    let p = one_process(3 * 1024);
    assert!(p.growth[0] < 2 * BOUND, "peak RSS grew {:.1} MB for {:.0} MB of replies", mb(p.growth[0]), mb(p.bytes));
}
