//! YCSB core workloads C and D over the memcached text protocol, written
//! from the YCSB documentation (CoreWorkload semantics).
//!
//! * Records are named `user<n>` with `n = fnvhash64(keynum)` (YCSB's
//!   default hashed insert order). A record's value is its fields laid end
//!   to end: `field0=<field-length bytes>field1=<field-length bytes>…`,
//!   one memcached value per record (flags 0, no expiry).
//! * Load phase: `set` every record `0..records`, over the target servers.
//! * Run phase, closed loop (threads × client slots × depth in flight):
//!   * C: 100 % reads, scrambled Zipfian (constant 0.99): a Zipfian draw
//!     over 10^10 items, FNV-hashed modulo the record count.
//!   * D: 95 % reads, 5 % inserts. Inserts take the next key number of the
//!     insert sequence (starting at `records`); reads follow the "latest"
//!     distribution: a Zipfian draw of the distance back from the latest
//!     acknowledged record. The latest pointer only moves once an insert is
//!     acknowledged, and only past a contiguous run of acknowledged inserts.
//! * Routing: with `any`, each client slot holds one connection, to server
//!   `slot % servers`; with `ketama`, each client slot holds one connection
//!   per server and sends each request to its key's server (libmemcached's
//!   ketama continuum). A slot's `depth` is its in-flight total over all its
//!   connections.

use std::collections::BTreeSet;
use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream as StdStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use mio::{Events, Interest, Poll, Token};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::driver::{connect, connect_blocking, Client};
use super::ketama::Ketama;
use super::report::{self, RunResult};

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's 64-bit FNV hash of a number (its 8 bytes, low byte first),
/// made non-negative as a Java `long` would be by `Math.abs`.
pub fn fnvhash64(v: u64) -> u64 {
    let mut h = FNV_OFFSET_BASIS_64;
    let mut v = v;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    (h as i64).wrapping_abs() as u64
}

/// Appends the key of record `keynum`: `user` + fnvhash64(keynum).
pub fn key_name(out: &mut Vec<u8>, keynum: u64) {
    write!(out, "user{}", fnvhash64(keynum)).expect("writing to a Vec cannot fail");
}

/// The key of record `keynum`, as a string.
pub fn key_string(keynum: u64) -> String {
    let mut v = Vec::new();
    key_name(&mut v, keynum);
    String::from_utf8(v).expect("ASCII key")
}

/// ζ(n, θ) = Σ_{i=1..n} i^-θ, continued from ζ(from, θ) = `sum`.
fn zeta(from: u64, n: u64, theta: f64, sum: f64) -> f64 {
    let mut s = sum;
    for i in from..n {
        s += 1.0 / ((i + 1) as f64).powf(theta);
    }
    s
}

/// ζ(n, θ) for `n` items.
pub fn zeta_n(n: u64, theta: f64) -> f64 {
    zeta(0, n, theta, 0.0)
}

/// Gray et al.'s Zipfian generator (as YCSB uses it): item 0 is the most
/// popular; the item count may grow between draws (ζ is then extended).
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    /// Over `items` items with constant `theta`.
    pub fn new(items: u64, theta: f64) -> Zipfian {
        Zipfian::with_zeta(items, theta, zeta_n(items, theta))
    }

    /// Over `items` items, with ζ(items, θ) given (for huge item counts).
    pub fn with_zeta(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = items.max(1);
        let zeta2 = zeta_n(2, theta);
        let mut z = Zipfian { items, theta, alpha: 1.0 / (1.0 - theta), zeta2, zetan, eta: 0.0 };
        z.eta = z.eta_for();
        z
    }

    fn eta_for(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// Grows the item space to `items` (never shrinks it).
    pub fn grow(&mut self, items: u64) {
        if items > self.items {
            self.zetan = zeta(self.items, items, self.theta, self.zetan);
            self.items = items;
            self.eta = self.eta_for();
        }
    }

    /// A draw in `0..items`.
    pub fn next<R: RngExt + ?Sized>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.items - 1);
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }
}

/// The Zipfian constant of the YCSB core workloads.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// The item space the scrambled Zipfian draws from before hashing.
pub const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
/// ζ(10^10, 0.99), as YCSB precomputes it.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// YCSB's scrambled Zipfian: a Zipfian draw over 10^10 items, FNV-hashed
/// modulo the record count, so popular records are spread over the space.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    records: u64,
    zipf: Zipfian,
}

impl ScrambledZipfian {
    /// Over records `0..records`.
    pub fn new(records: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            records: records.max(1),
            zipf: Zipfian::with_zeta(SCRAMBLED_ITEMS, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    /// A record number in `0..records`.
    pub fn next<R: RngExt + ?Sized>(&self, rng: &mut R) -> u64 {
        fnvhash64(self.zipf.next(rng)) % self.records
    }
}

/// YCSB's skewed-latest distribution: a Zipfian draw of the distance back
/// from the latest record.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipf: Zipfian,
}

impl SkewedLatest {
    /// Starting with records `0..=latest`.
    pub fn new(latest: u64) -> SkewedLatest {
        SkewedLatest { zipf: Zipfian::new(latest + 1, ZIPFIAN_CONSTANT) }
    }

    /// A record number in `0..=latest` (the latest record most likely).
    pub fn next<R: RngExt + ?Sized>(&mut self, rng: &mut R, latest: u64) -> u64 {
        self.zipf.grow(latest + 1);
        latest - self.zipf.next(rng).min(latest)
    }
}

/// The insert sequence shared by all client threads: hands out key numbers
/// and tracks the latest record below which every insert is acknowledged.
#[derive(Debug)]
pub struct InsertSequence {
    next: AtomicU64,
    latest: AtomicU64,
    acked: Mutex<BTreeSet<u64>>,
}

impl InsertSequence {
    /// After the load phase stored records `0..records`.
    pub fn new(records: u64) -> InsertSequence {
        InsertSequence {
            next: AtomicU64::new(records),
            latest: AtomicU64::new(records.max(1) - 1),
            acked: Mutex::new(BTreeSet::new()),
        }
    }

    /// The key number for a new insert.
    pub fn take(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The latest record every record below which is acknowledged.
    pub fn latest(&self) -> u64 {
        self.latest.load(Ordering::Acquire)
    }

    /// Records that the insert of `keynum` was acknowledged.
    pub fn ack(&self, keynum: u64) {
        let mut acked = self.acked.lock().unwrap_or_else(|e| e.into_inner());
        acked.insert(keynum);
        let mut latest = self.latest.load(Ordering::Acquire);
        while acked.remove(&(latest + 1)) {
            latest += 1;
        }
        self.latest.store(latest, Ordering::Release);
    }
}

/// A YCSB core workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CoreWorkload {
    /// Read only, scrambled Zipfian.
    C,
    /// Read latest: 95 % reads (latest distribution), 5 % inserts.
    D,
}

impl fmt::Display for CoreWorkload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CoreWorkload::C => "c",
            CoreWorkload::D => "d",
        })
    }
}

/// How requests pick a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Route {
    /// Each client slot talks to one server, round-robin over slots (the
    /// servers route internally).
    Any,
    /// Each request goes to its key's server by libmemcached's ketama.
    Ketama,
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Route::Any => "any",
            Route::Ketama => "ketama",
        })
    }
}

/// Arguments of `gossamer-kv-load ycsb`.
#[derive(Debug, Clone, Args)]
pub struct YcsbArgs {
    /// Core workload.
    #[arg(long, value_enum)]
    pub workload: CoreWorkload,
    /// Server address (repeat for several servers).
    #[arg(long = "server")]
    pub servers: Vec<String>,
    /// How requests pick a server (forced to ketama with --spawn-memcached).
    #[arg(long, value_enum, default_value_t = Route::Any)]
    pub route: Route,
    /// Start this many local memcached servers, load them (ketama), and
    /// stop them at the end.
    #[arg(long, default_value_t = 0)]
    pub spawn_memcached: usize,
    /// Worker threads of each spawned memcached (-t).
    #[arg(long, default_value_t = 1)]
    pub server_threads: usize,
    /// Memory of each spawned memcached in MiB (-m): enough for every
    /// record by default, so that reads after the load phase all hit.
    #[arg(long, default_value_t = 1024)]
    pub server_memory: u64,
    /// Records stored by the load phase.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Fields per record.
    #[arg(long, default_value_t = 10)]
    pub fields: usize,
    /// Bytes per field.
    #[arg(long, default_value_t = 100)]
    pub field_length: usize,
    /// Operations in the run phase (default: run for --duration).
    #[arg(long)]
    pub operations: Option<u64>,
    /// Seconds of run phase, when --operations is not given.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Client slots per thread (each one connection, or one per server with ketama).
    #[arg(long, default_value_t = 4)]
    pub conns: usize,
    /// Requests in flight per client slot.
    #[arg(long, default_value_t = 1)]
    pub depth: usize,
    /// Skip the load phase (the records are already stored).
    #[arg(long)]
    pub no_load: bool,
    /// Append the result to this CSV file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Label for the CSV row.
    #[arg(long, default_value = "ycsb")]
    pub label: String,
}

/// What a YCSB run measured.
#[derive(Debug, Clone)]
pub struct YcsbResult {
    /// Replies, reads (`gets`, `hits`), errors and latency.
    pub run: RunResult,
    /// Inserts acknowledged.
    pub inserts: u64,
    /// Seconds the load phase took.
    pub load_seconds: f64,
}

/// The CSV header matching [`csv_row`].
pub const CSV_HEADER: &str = "label,workload,servers,route,records,fields,field_length,client_threads,conns,depth,\
load_seconds,seconds,ops,ops_per_sec,reads,inserts,hit_ratio,errors,p50_us,p90_us,p99_us,p999_us,max_us";

/// One CSV row.
pub fn csv_row(a: &YcsbArgs, servers: &[String], route: Route, r: &YcsbResult) -> String {
    let x = &r.run;
    format!(
        "{},{},{},{route},{},{},{},{},{},{},{:.3},{:.3},{},{:.0},{},{},{:.4},{},{:.1},{:.1},{:.1},{:.1},{:.1}",
        a.label,
        a.workload,
        servers.join(" "),
        a.records,
        a.fields,
        a.field_length,
        a.threads,
        a.conns,
        a.depth,
        r.load_seconds,
        x.seconds,
        x.ops,
        x.ops_per_sec(),
        x.gets,
        r.inserts,
        x.hit_ratio(),
        x.errors,
        x.percentile_us(50.0),
        x.percentile_us(90.0),
        x.percentile_us(99.0),
        x.percentile_us(99.9),
        x.latency.max() as f64 / 1000.0,
    )
}

/// A one-line human summary.
pub fn summary(r: &YcsbResult) -> String {
    let x = &r.run;
    format!(
        "{:>10.0} ops/s  reads {}  inserts {}  hits {:.2}%  errors {}  p50 {:.1} µs  p99 {:.1} µs  (load {:.2} s)",
        x.ops_per_sec(),
        x.gets,
        r.inserts,
        x.hit_ratio() * 100.0,
        x.errors,
        x.percentile_us(50.0),
        x.percentile_us(99.0),
        r.load_seconds
    )
}

/// Appends the `set` of record `keynum` with `fields` × `field_length`
/// bytes (`field<i>=` then the bytes, fields end to end).
fn push_set(out: &mut Vec<u8>, keynum: u64, fields: usize, field_length: usize, noreply: bool) {
    let mut len = 0;
    for i in 0..fields {
        len += format!("field{i}=").len() + field_length;
    }
    out.extend_from_slice(b"set ");
    key_name(out, keynum);
    write!(out, " 0 0 {len}{}\r\n", if noreply { " noreply" } else { "" }).expect("writing to a Vec cannot fail");
    let mut x = fnvhash64(keynum);
    for i in 0..fields {
        write!(out, "field{i}=").expect("writing to a Vec cannot fail");
        for _ in 0..field_length {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            out.push(b' ' + ((x >> 33) % 95) as u8);
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// How requests are spread over servers.
struct Router {
    ketama: Option<Ketama>,
}

impl Router {
    fn new(names: &[String], route: Route) -> Router {
        Router { ketama: (route == Route::Ketama).then(|| Ketama::new(names)) }
    }

    /// The server for record `keynum`, when routing by key.
    fn by_key(&self, keynum: u64, scratch: &mut Vec<u8>) -> Option<usize> {
        let k = self.ketama.as_ref()?;
        scratch.clear();
        key_name(scratch, keynum);
        Some(k.server(scratch))
    }
}

/// Load phase: stores records `0..records`, one thread per server
/// (`noreply` sets in batches, each synchronised with `mn`).
pub fn load(addrs: &[SocketAddr], names: &[String], route: Route, a: &YcsbArgs) -> io::Result<()> {
    let router = Router::new(names, route);
    let results: Vec<io::Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..addrs.len())
            .map(|si| {
                let router = &router;
                s.spawn(move || -> io::Result<()> {
                    let mut conn = connect_blocking(addrs[si])?;
                    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
                    let mut buf = Vec::new();
                    let mut scratch = Vec::new();
                    let mut reply = Vec::new();
                    let mut next = 0;
                    while next < a.records {
                        buf.clear();
                        let upto = (next + 1000).min(a.records);
                        for k in next..upto {
                            let mine = match router.by_key(k, &mut scratch) {
                                Some(s) => s == si,
                                None => k % addrs.len() as u64 == si as u64,
                            };
                            if mine {
                                push_set(&mut buf, k, a.fields, a.field_length, true);
                            }
                        }
                        buf.extend_from_slice(b"mn\r\n");
                        conn.write_all(&buf)?;
                        reply.clear();
                        let mut chunk = [0u8; 4096];
                        while !reply.ends_with(b"MN\r\n") {
                            let n = conn.read(&mut chunk)?;
                            if n == 0 {
                                return Err(io::Error::new(ErrorKind::UnexpectedEof, "server closed during load"));
                            }
                            reply.extend_from_slice(&chunk[..n]);
                        }
                        if reply.len() > 4 {
                            return Err(io::Error::other(format!(
                                "load phase got {:?}",
                                String::from_utf8_lossy(&reply[..reply.len().min(200)])
                            )));
                        }
                        next = upto;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("load thread panicked"))))
            .collect()
    });
    results.into_iter().collect()
}

/// A request in flight.
#[derive(Debug, Clone, Copy)]
enum Op {
    Read,
    Insert(u64),
}

type Conn = Client<Op>;

/// Parses one reply at the start of `buf`: Some((length, is a hit / stored, is an error)).
fn parse(buf: &[u8], op: Op) -> Option<(usize, bool, bool)> {
    let nl = memchr::memchr(b'\n', buf)?;
    let line = &buf[..=nl];
    match op {
        Op::Insert(_) => {
            let ok = line == b"STORED\r\n";
            Some((nl + 1, ok, !ok))
        }
        Op::Read => {
            if line == b"END\r\n" {
                return Some((nl + 1, false, false));
            }
            if !line.starts_with(b"VALUE ") {
                return Some((nl + 1, false, true));
            }
            let text = std::str::from_utf8(&line[..line.len().saturating_sub(2)]).ok();
            let Some(len) = text.and_then(|t| t.split(' ').nth(3)).and_then(|l| l.parse::<usize>().ok()) else {
                return Some((nl + 1, false, true));
            };
            let end = nl + 1 + len + 2 + 5;
            if buf.len() < end {
                return None;
            }
            let ok = &buf[end - 5..end] == b"END\r\n";
            Some((end, ok, !ok))
        }
    }
}

/// Shared state of the run phase.
struct Shared<'a> {
    a: &'a YcsbArgs,
    router: Router,
    seq: InsertSequence,
    issued: AtomicU64,
    end: Instant,
}

/// Per-thread request source.
struct Source {
    rng: SmallRng,
    scrambled: ScrambledZipfian,
    latest: SkewedLatest,
    scratch: Vec<u8>,
}

impl Source {
    /// Chooses the next request: (op, key number). None when the run is over.
    fn next(&mut self, sh: &Shared) -> Option<(Op, u64)> {
        if let Some(n) = sh.a.operations {
            if sh.issued.fetch_add(1, Ordering::Relaxed) >= n {
                return None;
            }
        } else if Instant::now() >= sh.end {
            return None;
        }
        Some(match sh.a.workload {
            CoreWorkload::C => (Op::Read, self.scrambled.next(&mut self.rng)),
            CoreWorkload::D => {
                if self.rng.random::<f64>() < 0.05 {
                    let k = sh.seq.take();
                    (Op::Insert(k), k)
                } else {
                    (Op::Read, self.latest.next(&mut self.rng, sh.seq.latest()))
                }
            }
        })
    }
}

/// Queues the next request on one of a client slot's connections `conns`
/// (its key's server with ketama); returns false when the run is over.
fn issue(sh: &Shared, src: &mut Source, conns: &mut [Conn], now: Instant) -> bool {
    let Some((op, k)) = src.next(sh) else { return false };
    let ci = if conns.len() == 1 { 0 } else { sh.router.by_key(k, &mut src.scratch).unwrap_or(0) };
    let c = &mut conns[ci];
    match op {
        Op::Read => {
            c.wbuf.extend_from_slice(b"get ");
            key_name(&mut c.wbuf, k);
            c.wbuf.extend_from_slice(b"\r\n");
        }
        Op::Insert(_) => push_set(&mut c.wbuf, k, sh.a.fields, sh.a.field_length, false),
    }
    c.pending.push_back((op, now));
    true
}

fn drive(sh: &Shared, addrs: &[SocketAddr], thread: usize) -> io::Result<(RunResult, u64)> {
    let a = sh.a;
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(256);
    let mut src = Source {
        rng: SmallRng::seed_from_u64(0x5eed + thread as u64 * 7919),
        scrambled: ScrambledZipfian::new(a.records),
        latest: SkewedLatest::new(a.records.max(1) - 1),
        scratch: Vec::new(),
    };
    let per_slot = if sh.router.ketama.is_some() { addrs.len() } else { 1 };
    let mut slots: Vec<Vec<Conn>> = Vec::with_capacity(a.conns);
    let now = Instant::now();
    let mut in_flight = 0usize;
    for s in 0..a.conns.max(1) {
        let global = thread * a.conns.max(1) + s;
        let mut conns = Vec::with_capacity(per_slot);
        for j in 0..per_slot {
            let addr = if per_slot == 1 { addrs[global % addrs.len()] } else { addrs[j] };
            let mut stream = connect(addr)?;
            poll.registry().register(&mut stream, Token(s * per_slot + j), Interest::READABLE | Interest::WRITABLE)?;
            conns.push(Conn::new(stream));
        }
        for _ in 0..a.depth.max(1) {
            if issue(sh, &mut src, &mut conns, now) {
                in_flight += 1;
            }
        }
        for c in &mut conns {
            c.flush()?;
        }
        slots.push(conns);
    }
    let mut r = RunResult::new();
    let mut inserts = 0;
    let start = Instant::now();
    let hard_end = sh.end + Duration::from_secs(10);
    let mut done = false;
    while in_flight > 0 {
        let now = Instant::now();
        if sh.a.operations.is_none() && now >= sh.end {
            break;
        }
        if now >= hard_end {
            return Err(io::Error::new(ErrorKind::TimedOut, "replies did not arrive"));
        }
        poll.poll(&mut events, Some(Duration::from_millis(10)))?;
        for ev in events.iter() {
            let (s, j) = (ev.token().0 / per_slot, ev.token().0 % per_slot);
            let conns = &mut slots[s];
            if ev.is_readable() || ev.is_read_closed() {
                if !conns[j].fill()? {
                    return Err(io::Error::new(ErrorKind::UnexpectedEof, "server closed the connection"));
                }
                let t = Instant::now();
                let mut pos = 0;
                let mut completed = 0;
                loop {
                    let c = &mut conns[j];
                    let Some(&(op, t0)) = c.pending.front() else { break };
                    let Some((used, ok, err)) = parse(&c.rbuf[pos..c.rlen], op) else { break };
                    pos += used;
                    c.pending.pop_front();
                    in_flight -= 1;
                    completed += 1;
                    r.ops += 1;
                    let _ = r.latency.record((t - t0).as_nanos().max(1) as u64);
                    if err {
                        r.errors += 1;
                    }
                    match op {
                        Op::Read => {
                            r.gets += 1;
                            r.hits += u64::from(ok);
                        }
                        Op::Insert(k) => {
                            if ok {
                                inserts += 1;
                                sh.seq.ack(k);
                            }
                        }
                    }
                }
                let c = &mut conns[j];
                c.rbuf.copy_within(pos..c.rlen, 0);
                c.rlen -= pos;
                for _ in 0..completed {
                    if !done && issue(sh, &mut src, conns, t) {
                        in_flight += 1;
                    } else {
                        done = true;
                    }
                }
                for c in conns.iter_mut() {
                    c.flush()?;
                }
            } else {
                conns[j].flush()?;
            }
        }
    }
    r.seconds = start.elapsed().as_secs_f64();
    Ok((r, inserts))
}

/// Run phase against servers `addrs` (named `names`, for ketama).
pub fn run_phase(addrs: &[SocketAddr], names: &[String], route: Route, a: &YcsbArgs) -> io::Result<YcsbResult> {
    if addrs.is_empty() {
        return Err(io::Error::other("no servers"));
    }
    let start = Instant::now();
    let end = start
        + if a.operations.is_some() {
            Duration::from_secs(24 * 3600)
        } else {
            Duration::from_secs_f64(a.duration.max(0.0))
        };
    let sh = Shared {
        a,
        router: Router::new(names, route),
        seq: InsertSequence::new(a.records),
        issued: AtomicU64::new(0),
        end,
    };
    let results: Vec<io::Result<(RunResult, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.threads.max(1))
            .map(|t| {
                let sh = &sh;
                s.spawn(move || drive(sh, addrs, t))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(io::Error::other("client thread panicked"))))
            .collect()
    });
    let mut total = RunResult::new();
    let mut inserts = 0;
    for r in results {
        let (r, i) = r?;
        total.merge(&r);
        inserts += i;
    }
    total.seconds = start.elapsed().as_secs_f64();
    Ok(YcsbResult { run: total, inserts, load_seconds: 0.0 })
}

/// Local memcached servers, killed on drop.
pub struct Memcacheds {
    children: Vec<Child>,
    /// Where they listen.
    pub addrs: Vec<SocketAddr>,
}

impl Drop for Memcacheds {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `n` memcached servers on free loopback ports (`-t threads -m
/// memory_mb -U 0`) and waits until each accepts connections.
pub fn spawn_memcached(n: usize, threads: usize, memory_mb: u64) -> io::Result<Memcacheds> {
    let mut m = Memcacheds { children: Vec::new(), addrs: Vec::new() };
    while m.addrs.len() < n {
        let mut started = false;
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let mut cmd = Command::new("memcached");
            {
                use std::os::unix::process::CommandExt;
                // SAFETY: prctl is async-signal-safe and touches no memory of
                // ours; it makes memcached die with this process, even if
                // this process is killed before it can stop them.
                unsafe {
                    cmd.pre_exec(|| {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        Ok(())
                    });
                }
            }
            cmd.args(["-p", &port.to_string(), "-t", &threads.max(1).to_string(), "-U", "0", "-l", "127.0.0.1"])
                .args(["-m", &memory_mb.max(1).to_string()]);
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                cmd.args(["-u", "root"]);
            }
            let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let t0 = Instant::now();
            let mut up = false;
            while t0.elapsed() < Duration::from_secs(5) {
                if StdStream::connect(addr).is_ok() {
                    up = true;
                    break;
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if up {
                m.children.push(child);
                m.addrs.push(addr);
                started = true;
                break;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if !started {
            return Err(io::Error::other("memcached did not start"));
        }
    }
    Ok(m)
}

/// Load phase then run phase. Returns the result and the servers and
/// route used.
pub fn ycsb(a: &YcsbArgs) -> io::Result<(YcsbResult, Vec<String>, Route)> {
    use std::net::ToSocketAddrs;
    let _spawned;
    let (addrs, names, route) = if a.spawn_memcached > 0 {
        let m = spawn_memcached(a.spawn_memcached, a.server_threads, a.server_memory)?;
        let addrs = m.addrs.clone();
        _spawned = m;
        (addrs.clone(), addrs.iter().map(|x| x.to_string()).collect::<Vec<_>>(), Route::Ketama)
    } else {
        let servers = if a.servers.is_empty() { vec!["127.0.0.1:11211".to_string()] } else { a.servers.clone() };
        let mut addrs = Vec::new();
        for s in &servers {
            addrs.push(s.to_socket_addrs()?.next().ok_or_else(|| io::Error::other(format!("{s} does not resolve")))?);
        }
        (addrs, servers, a.route)
    };
    let t = Instant::now();
    if !a.no_load {
        load(&addrs, &names, route, a)?;
    }
    let load_seconds = t.elapsed().as_secs_f64();
    let mut r = run_phase(&addrs, &names, route, a)?;
    r.load_seconds = load_seconds;
    Ok((r, names, route))
}

/// Appends rows to a CSV file with [`CSV_HEADER`], writing the header if new.
pub fn append_csv(path: &std::path::Path, rows: &[String]) -> io::Result<()> {
    let fresh = !path.exists();
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    if fresh {
        writeln!(f, "{CSV_HEADER}")?;
    }
    for r in rows {
        writeln!(f, "{r}")?;
    }
    Ok(())
}

/// `gossamer-kv-load ycsb`: runs, prints, writes CSV; true when verified
/// (no errors; for C after a load phase, every read a hit).
pub fn main(a: &YcsbArgs) -> io::Result<bool> {
    let (r, names, route) = ycsb(a)?;
    println!("{}", report::machine());
    println!("ycsb {} on {} ({route}): {}", a.workload, names.join(" "), summary(&r));
    let row = csv_row(a, &names, route, &r);
    match &a.csv {
        Some(path) => append_csv(path, &[row])?,
        None => println!("{CSV_HEADER}\n{row}"),
    }
    let problem = verify(a, &r);
    if let Some(p) = &problem {
        eprintln!("verification failed: {p}");
    }
    Ok(problem.is_none())
}

/// What is wrong with a result, if anything.
pub fn verify(a: &YcsbArgs, r: &YcsbResult) -> Option<String> {
    if r.run.ops == 0 {
        return Some("no replies".into());
    }
    if r.run.errors > 0 {
        return Some(format!("{} error replies", r.run.errors));
    }
    if !a.no_load && r.run.hits != r.run.gets {
        return Some(format!("{} of {} reads missed stored records", r.run.gets - r.run.hits, r.run.gets));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_and_keys() {
        assert_eq!(fnvhash64(0), fnvhash64(0));
        assert_ne!(fnvhash64(0), fnvhash64(1));
        assert!(key_string(7).starts_with("user"));
        assert!(fnvhash64(12345) <= i64::MAX as u64);
    }

    #[test]
    fn zipfian_head() {
        let z = Zipfian::new(1000, ZIPFIAN_CONSTANT);
        let mut rng = SmallRng::seed_from_u64(3);
        let n = 200_000;
        let zeros = (0..n).filter(|_| z.next(&mut rng) == 0).count();
        let want = n as f64 / zeta_n(1000, ZIPFIAN_CONSTANT);
        assert!((zeros as f64 - want).abs() < want * 0.05, "{zeros} vs {want}");
    }

    #[test]
    fn zipfian_grows() {
        let mut a = Zipfian::new(10, 0.99);
        a.grow(1000);
        let b = Zipfian::new(1000, 0.99);
        assert!((a.zetan - b.zetan).abs() < 1e-9);
    }

    #[test]
    fn insert_sequence_waits_for_contiguous_acks() {
        let s = InsertSequence::new(10);
        assert_eq!(s.latest(), 9);
        let (a, b) = (s.take(), s.take());
        assert_eq!((a, b), (10, 11));
        s.ack(b);
        assert_eq!(s.latest(), 9);
        s.ack(a);
        assert_eq!(s.latest(), 11);
    }

    #[test]
    fn value_layout() {
        let mut v = Vec::new();
        push_set(&mut v, 1, 2, 3, false);
        let text = String::from_utf8(v).unwrap();
        let (head, body) = text.split_once("\r\n").unwrap();
        assert_eq!(head, format!("set {} 0 0 {}", key_string(1), 2 * 7 + 6));
        assert!(body.starts_with("field0="));
        assert_eq!(&body[10..17], "field1=");
        assert_eq!(body.len(), 20 + 2);
    }

    #[test]
    fn parses_reads() {
        assert_eq!(parse(b"END\r\n", Op::Read), Some((5, false, false)));
        let hit = b"VALUE k 0 3\r\nabc\r\nEND\r\n";
        assert_eq!(parse(hit, Op::Read), Some((hit.len(), true, false)));
        assert_eq!(parse(&hit[..hit.len() - 1], Op::Read), None);
        assert_eq!(parse(b"STORED\r\n", Op::Insert(1)), Some((8, true, false)));
        assert_eq!(parse(b"SERVER_ERROR x\r\n", Op::Insert(1)), Some((16, false, true)));
    }
}
