//! The fabric between hosts over UCX: every process registers its host's
//! region (the mapping it has of it) and opens one *receiver* worker, whose
//! address and key it sends to rank 0 at start-up ([`LocalEnd`],
//! [`PeerInfo`]); once every process's are known, each worker thread opens
//! its own UCX worker and, lazily, one endpoint per remote host (§3.2.9:
//! machines² × threads endpoints in all, never one per thread pair).
//!
//! A send to host `h` goes to one process of `h` — the same one for all of
//! a thread's sends to `h`, spread over `h`'s processes by thread — into
//! that process's mapping of `h`'s region, which every process of `h` sees.
//! It goes by one-sided puts where UCX may use RDMA, else as one active
//! message that the target writes into its region (`am.rs`); see [`Path`].
//! An active message gathers large payloads from their senders' own
//! buffers, and the target keeps those of 16 KiB and more (unless
//! `GOSSAMER_FAR_DETACH` says otherwise) beside its region
//! (`fabric::landed`), for the receiving code to take as its `Vec<u8>`:
//! one copy at the receiver instead of two.
//!
//! Over TCP, UCX carries a put, and an active message, as messages that the
//! target writes into its memory when its receiver worker progresses.
//! Whoever of the process gets to it first progresses the receiver worker
//! (it sits behind a lock that nobody waits for): its workers while they
//! idle, polling for what they wait on, and a receiver thread for when they
//! all sleep. Whoever took in anything wakes the process's sleeping
//! workers, since the slot that changed may be theirs. A worker that polls
//! it sees an answer from another host as soon as the bytes are in, with no
//! thread to wake in between (2 simulated hosts, 2 cores: a blocking round
//! trip of 29–36 µs instead of 55–70, still by puts). Idle, the receiver
//! thread polls with pauses of 50 µs (or, with `GOSSAMER_UCX_EVENTS=1`,
//! sleeps on UCX's wake-up descriptor; see `EVENTS_ENV` for why that is not
//! the default).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::am::{self, AM_LAND};
use super::ucx::{Context, Endpoint, IoPart, MemRegion, RemoteKey, Request, Ucx, UcxError, Worker};
use super::{Fabric, Piece, ThreadFabric, Ticket, MAX_PIECES};

/// Set to `1`, the receiver thread sleeps on UCX's wake-up descriptor when
/// idle instead of polling with pauses of 50 µs. Off by default: measured
/// with UCX 1.13 over TCP (`scripts/fabric-hosts.sh`), its median round
/// trips were no shorter than polling's (58–70 µs at 64 B), some stalled
/// for milliseconds, and small echoes became erratic (64 B: 0.8–15.5 MB/s
/// per direction against 25–40 MB/s polling), as if the descriptor did not
/// signal data that a progress call left unread. Kept to measure it on
/// other transports and versions.
const EVENTS_ENV: &str = "GOSSAMER_UCX_EVENTS";

fn events_wanted() -> bool {
    std::env::var(EVENTS_ENV).is_ok_and(|v| v.trim() == "1")
}

/// The longest the receiver thread sleeps on UCX's wake-up descriptor
/// before it looks at its stop flag again.
const RECEIVER_WAIT: Duration = Duration::from_millis(20);

/// How a thread's sends reach another host: `put` (one-sided puts, a
/// fence between the pieces of one send) or `am` (one active message per
/// send, which the target's fabric writes into its region). Unset, see
/// [`Path::default_here`].
const PATH_ENV: &str = "GOSSAMER_UCX_PATH";

/// How sends reach another host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// One-sided puts into the peer's registered region.
    Put,
    /// One active message per send, written by the target.
    Am,
}

impl Path {
    /// `GOSSAMER_UCX_PATH`, else [`default_here`](Self::default_here).
    fn wanted() -> Result<Path, String> {
        match std::env::var(PATH_ENV) {
            Err(_) => Ok(Path::default_here()),
            Ok(v) => match v.trim() {
                "put" => Ok(Path::Put),
                "am" => Ok(Path::Am),
                "" => Ok(Path::default_here()),
                other => Err(format!("{PATH_ENV}={other}: expected 'put' or 'am'")),
            },
        }
    }

    /// Puts where UCX may use an RDMA transport: this machine has an RDMA
    /// device (`/sys/class/infiniband`) and `UCX_TLS` is unset or names one
    /// (`rc`, `dc`, `ud`, `ib` or `all`); there a put is written by the
    /// network card, with no work at the target. Active messages
    /// elsewhere: over TCP, UCX carries a put as a message that the target
    /// writes and acknowledges with a message of its own, and a send of two
    /// pieces takes two puts and a fence; an active message is one message,
    /// not acknowledged (2 simulated hosts, 2 cores: see
    /// `benchmarks/fabric.md`).
    fn default_here() -> Path {
        let device = std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
        let tls_allows = std::env::var("UCX_TLS").map_or(true, |tls| {
            let tls = tls.trim();
            !tls.starts_with('^')
                && tls.split(',').any(|t| {
                    let t = t.trim();
                    t == "all" || ["rc", "dc", "ud", "ib"].iter().any(|p| t.starts_with(p))
                })
        });
        if device && tls_allows {
            Path::Put
        } else {
            Path::Am
        }
    }
}

/// Where to put into one process's mapping of its host's region.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PeerInfo {
    /// The region's address in that process, and its length.
    pub(crate) base: u64,
    pub(crate) len: u64,
    /// The packed remote key of the registration.
    pub(crate) rkey: Vec<u8>,
    /// The address of the process's receiver worker.
    pub(crate) address: Vec<u8>,
}

fn text(e: UcxError) -> String {
    e.to_string()
}

/// This process's end before the others are known.
pub(crate) struct LocalEnd {
    ctx: Context,
    mem: MemRegion,
    receiver: Worker,
    info: PeerInfo,
    path: Path,
}

impl LocalEnd {
    /// Loads UCX, registers `region` (`(base, len)`, this process's mapping
    /// of its host's region) and opens the receiver worker. `UCX_*`
    /// variables (`UCX_TLS`, `UCX_NET_DEVICES`, …) apply unchanged.
    pub(crate) fn new(region: (*mut u8, usize)) -> Result<LocalEnd, String> {
        let ucx = Ucx::load().map_err(text)?;
        let ctx = Context::new(&ucx, None, events_wanted()).map_err(text)?;
        // SAFETY: the region stays mapped for the life of the process (the
        // runtime that owns it outlives the fabric), and only puts that
        // follow the slot protocol write into it.
        let mem = unsafe { ctx.mem_map(region.0, region.1) }.map_err(text)?;
        let receiver = Worker::new(&ctx).map_err(text)?;
        let (base, len) = (region.0 as usize, region.1);
        // SAFETY: the region stays mapped for the life of the process, and
        // is only ever accessed through raw pointers and atomics.
        let land = move |header: &[u8], data: Option<&[u8]>| unsafe { am::land(base, len, header, data) };
        receiver.set_am_handler(AM_LAND, land).map_err(text)?;
        let path = Path::wanted()?;
        tracing::debug!("sends to other hosts go by {path:?}");
        super::pipeline_bytes()?;
        super::detach_bytes()?;
        let info = PeerInfo {
            base: mem.base(),
            len: mem.len() as u64,
            rkey: mem.pack_rkey().map_err(text)?,
            address: receiver.address().map_err(text)?,
        };
        Ok(LocalEnd { ctx, mem, receiver, info, path })
    }

    pub(crate) fn info(&self) -> PeerInfo {
        self.info.clone()
    }

    /// The fabric of rank `rank`, given every rank's [`PeerInfo`] and the
    /// ranks of each host.
    pub(crate) fn connect(
        self,
        rank: usize,
        peers: Vec<PeerInfo>,
        host_ranks: Vec<Vec<usize>>,
    ) -> Result<Arc<dyn Fabric>, String> {
        let my_host = host_ranks.iter().position(|r| r.contains(&rank)).ok_or("rank on no host")?;
        Ok(Arc::new(UcxFabric {
            shared: Arc::new(Common {
                ctx: self.ctx,
                peers,
                host_ranks,
                my_host,
                path: self.path,
                counts: std::sync::Mutex::new(Vec::new()),
            }),
            _mem: self.mem,
            receiver: Arc::new(Mutex::new(self.receiver)),
            stop: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
        }))
    }
}

struct Common {
    ctx: Context,
    peers: Vec<PeerInfo>,
    host_ranks: Vec<Vec<usize>>,
    my_host: usize,
    path: Path,
    /// Each thread's counts of puts and bytes (one writer each).
    counts: Mutex<Vec<Arc<[AtomicU64; 2]>>>,
}

/// The UCX fabric of one process.
struct UcxFabric {
    shared: Arc<Common>,
    /// Progressed by the receiver thread and by idle workers
    /// ([`Fabric::poll`]), one at a time. Declared before the memory
    /// registration, so it goes first.
    receiver: Arc<Mutex<Worker>>,
    _mem: MemRegion,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Fabric for UcxFabric {
    fn thread(&self, index: usize) -> Result<Box<dyn ThreadFabric>, String> {
        let worker = Worker::new(&self.shared.ctx).map_err(text)?;
        let hosts = self.shared.host_ranks.len();
        let counts: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        self.shared.counts.lock().unwrap_or_else(|e| e.into_inner()).push(counts.clone());
        Ok(Box::new(UcxThread {
            in_flight: VecDeque::new(),
            idle_calls: 0,
            index,
            counts,
            common: self.shared.clone(),
            eps: (0..hosts).map(|_| None).collect(),
            next: 1,
            worker: Box::new(worker),
        }))
    }

    fn start(&self, wake: Box<dyn Fn() + Send + Sync>) {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.is_some() {
            return;
        }
        let receiver = self.receiver.clone();
        let stop = self.stop.clone();
        let h = std::thread::Builder::new()
            .name("gossamer-fabric".into())
            .spawn(move || {
                let mut idle = 0u32;
                // Whether to sleep on the transports' wake-up descriptor
                // (GOSSAMER_UCX_EVENTS=1, and the transports give one); if
                // not, idle polling pauses.
                let mut events = events_wanted();
                while !stop.load(Ordering::Relaxed) {
                    if poll(&receiver) {
                        wake();
                        idle = 0;
                        continue;
                    }
                    idle += 1;
                    if idle < 64 {
                        std::thread::yield_now();
                    } else if events {
                        // Sleep until the network brings something: no
                        // core spent while idle, and no pause to wait out
                        // when a request arrives. The timeout only bounds
                        // how long `close` waits for this thread.
                        let r = receiver.lock().unwrap_or_else(|e| e.into_inner());
                        if let Err(e) = r.wait_for_events(RECEIVER_WAIT) {
                            tracing::debug!("no UCX wake-up events ({e}); polling with pauses instead");
                            events = false;
                        }
                    } else {
                        // Two cores and TCP: polling without pause would
                        // starve the kernel's network processing.
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            })
            .expect("cannot start the fabric thread");
        *thread = Some(h);
    }

    fn poll(&self) -> bool {
        poll(&self.receiver)
    }

    fn counters(&self) -> (u64, u64) {
        let c = self.shared.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.iter().fold((0, 0), |(p, b), x| (p + x[0].load(Ordering::Relaxed), b + x[1].load(Ordering::Relaxed)))
    }

    fn close(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

/// Drains the receiver unless another thread is at it (never waits for
/// it: a thread that waited would make the holder pay a wake-up on its way
/// out, on the path of whatever it just took in).
fn poll(receiver: &Mutex<Worker>) -> bool {
    match receiver.try_lock() {
        Ok(r) => drain(&r),
        Err(std::sync::TryLockError::Poisoned(e)) => drain(&e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => false,
    }
}

/// Progresses the receiver until nothing more arrives; true if anything did.
fn drain(receiver: &Worker) -> bool {
    if receiver.progress() == 0 {
        return false;
    }
    while receiver.progress() > 0 {}
    true
}

/// With nothing in flight, a thread's worker is progressed at one call of
/// [`ThreadFabric::progress`] in this many.
const IDLE_PROGRESS_EVERY: u32 = 64;

/// A remote host as one thread sees it: its endpoint and the key of the
/// process it puts to.
struct Route {
    // Field order: the key and endpoint go before the worker does.
    rkey: RemoteKey,
    ep: Endpoint,
    base: u64,
}

/// One worker thread's UCX state. The sends in flight borrow the worker,
/// an endpoint, its key, bytes of the region and (active messages) their
/// header, scatter list and the payload buffers they own; they are stored
/// here with those borrows stretched to `'static`, which is sound because:
/// the worker is boxed and the routes live in a boxed slice that never
/// grows (their addresses never change, even when this struct moves); a
/// route, once made, is never replaced or removed; the region stays mapped
/// for the process's life; a header, scatter list and buffers are kept
/// beside their request and go after it; and fields drop in declaration
/// order, so every send is finished (or cancelled) before the routes and
/// the worker go.
struct UcxThread {
    in_flight: VecDeque<InFlight>,
    /// Calls of `progress` with nothing in flight.
    idle_calls: u32,
    index: usize,
    counts: Arc<[AtomicU64; 2]>,
    common: Arc<Common>,
    eps: Box<[Option<Route>]>,
    next: Ticket,
    worker: Box<Worker>,
}

/// A send, or a put of one, in flight.
struct InFlight {
    ticket: Ticket,
    // Field order: the request goes before what it borrows.
    req: Request<'static>,
    _message: Option<AmMessage>,
    /// Buffers the send reads, owned by it.
    _keep: Vec<Vec<u8>>,
}

/// The header and scatter list of an active message in flight (on the
/// heap, where they stay while the message moves with its request).
struct AmMessage {
    header: Vec<u8>,
    parts: Vec<IoPart<'static>>,
}

impl UcxThread {
    /// The rank of the process of `host` that this thread sends to: the
    /// same one for all of its sends there, spread over the host's
    /// processes by thread.
    fn lander(&self, host: usize) -> usize {
        let ranks = &self.common.host_ranks[host];
        ranks[self.index % ranks.len()]
    }

    fn route(&mut self, host: usize) -> Result<&Route, String> {
        if self.eps[host].is_none() {
            if host == self.common.my_host {
                return Err("a put to our own host".into());
            }
            let p = self.lander(host);
            let peer = &self.common.peers[p];
            let ep = self.worker.connect(&peer.address).map_err(text)?;
            let rkey = ep.unpack_rkey(&self.worker, &peer.rkey, peer.base, peer.len as usize).map_err(text)?;
            self.eps[host] = Some(Route { rkey, ep, base: peer.base });
        }
        Ok(self.eps[host].as_ref().expect("just made"))
    }

    fn reap(&mut self) {
        while let Some(f) = self.in_flight.front_mut() {
            match self.worker.is_done(&mut f.req) {
                Ok(false) => break,
                Ok(true) => {
                    self.in_flight.pop_front();
                }
                Err(e) => panic!("gossamer: a send to another host failed: {e}"),
            }
        }
    }
}

impl ThreadFabric for UcxThread {
    fn send(&mut self, host: usize, pieces: &[Piece], keep: Vec<Vec<u8>>) -> Result<Ticket, String> {
        assert!(!pieces.is_empty() && pieces.len() <= MAX_PIECES, "gossamer: a send of {} pieces", pieces.len());
        let path = self.common.path;
        assert!(keep.is_empty() || path == Path::Am, "gossamer: buffers handed to a send of puts");
        let route = self.route(host)?;
        let base = route.base;
        // SAFETY: see `UcxThread`: the route and the worker stay where they
        // are, unchanged, until every send is finished.
        let (ep, rkey, worker): (&'static Endpoint, &'static RemoteKey, &'static Worker) = unsafe {
            (&*(&route.ep as *const Endpoint), &*(&route.rkey as *const RemoteKey), &*(&*self.worker as *const Worker))
        };
        // SAFETY: each piece's source lies in our region, mapped for the
        // process's life, or in a buffer of the caller's; the caller leaves
        // it alone (and alive) until `done` says the send is complete.
        let bytes = |p: &Piece| -> &'static [u8] { unsafe { std::slice::from_raw_parts(p.src, p.len) } };
        let t = self.next;
        self.next += 1;
        let mut ops = 0u64;
        match path {
            Path::Put => {
                for (i, p) in pieces.iter().enumerate() {
                    if i > 0 && i + 1 == pieces.len() {
                        // The slot lands after everything it names.
                        worker.fence().map_err(text)?;
                    }
                    let req = ep.put(worker, bytes(p), base + p.offset as u64, rkey).map_err(text)?;
                    ops += 1;
                    if !req.is_complete() {
                        self.in_flight.push_back(InFlight { ticket: t, req, _message: None, _keep: Vec::new() });
                    }
                }
            }
            Path::Am => {
                let header = am::header(pieces);
                let parts = pieces.iter().map(|p| IoPart::new(bytes(p))).collect();
                let message = AmMessage { header, parts };
                // SAFETY: the header and the scatter list lie on the heap,
                // where they stay (vectors never changed again) while the
                // message is kept beside the request, until the request is
                // finished.
                let (h, ps): (&'static [u8], &'static [IoPart<'static>]) = unsafe {
                    (
                        std::slice::from_raw_parts(message.header.as_ptr(), message.header.len()),
                        std::slice::from_raw_parts(message.parts.as_ptr(), message.parts.len()),
                    )
                };
                let req = ep.am_send(worker, AM_LAND, h, ps).map_err(text)?;
                ops = 1;
                if !req.is_complete() {
                    self.in_flight.push_back(InFlight { ticket: t, req, _message: Some(message), _keep: keep });
                }
            }
        }
        let len: usize = pieces.iter().map(|p| p.len).sum();
        // One writer per counter: plain loads and stores.
        self.counts[0].store(self.counts[0].load(Ordering::Relaxed) + ops, Ordering::Relaxed);
        self.counts[1].store(self.counts[1].load(Ordering::Relaxed) + len as u64, Ordering::Relaxed);
        Ok(t)
    }

    fn done(&mut self, ticket: Ticket) -> bool {
        self.reap();
        self.in_flight.front().is_none_or(|f| f.ticket > ticket)
    }

    fn progress(&mut self) -> bool {
        // With nothing in flight, a thread's worker has little to do (what
        // comes to it: connection set-up, and acknowledgements of puts),
        // and over TCP each progress is an `epoll_wait`: progress it every
        // `IDLE_PROGRESS_EVERY` calls only (one-way 64 KiB payloads between
        // 2 simulated hosts spent a tenth of both cores there).
        if self.in_flight.is_empty() {
            self.idle_calls = self.idle_calls.wrapping_add(1);
            if self.idle_calls % IDLE_PROGRESS_EVERY != 0 {
                return false;
            }
        }
        let n = self.worker.progress();
        if !self.in_flight.is_empty() {
            self.reap();
        }
        n > 0
    }

    fn busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    fn gathers(&self) -> bool {
        self.common.path == Path::Am
    }

    fn lands_in(&self, host: usize) -> Option<usize> {
        (self.common.path == Path::Am).then(|| self.lander(host))
    }
}
