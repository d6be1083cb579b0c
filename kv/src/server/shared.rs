//! State shared by all connection workers (across threads): settings, the
//! stop flag, each worker's wake-up handle and inbox, connection counts,
//! per-worker counters and the connection registry behind `stats conns`.
//! Nothing here is on a request's path except the worker's own counters and
//! its connections' [`ConnInfo`], which only their owner writes (plain
//! atomic stores, no lock).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mio::net::TcpStream;
use mio::Waker;

use crate::clock;
use crate::config::Config;

/// Counters of one connection worker. Only that worker writes them (a load
/// and a store, no read-modify-write); `stats` reads them from anywhere.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Bytes read from clients.
    pub bytes_read: AtomicU64,
    /// Bytes written to clients.
    pub bytes_written: AtomicU64,
    /// flush_all commands.
    pub cmd_flush: AtomicU64,
    /// Stores refused as too large.
    pub store_too_large: AtomicU64,
    /// Times a connection was set aside to let others run.
    pub conn_yields: AtomicU64,
}

/// Adds `n` to a single-writer counter.
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Values of [`WorkerCounters`] at a point in time.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CounterValues {
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// flush_all commands.
    pub cmd_flush: u64,
    /// Stores refused as too large.
    pub store_too_large: u64,
    /// Connection yields.
    pub conn_yields: u64,
}

impl CounterValues {
    fn read(c: &WorkerCounters) -> CounterValues {
        CounterValues {
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            cmd_flush: c.cmd_flush.load(Ordering::Relaxed),
            store_too_large: c.store_too_large.load(Ordering::Relaxed),
            conn_yields: c.conn_yields.load(Ordering::Relaxed),
        }
    }

    /// Adds `o`, counter by counter.
    pub fn add(&mut self, o: &CounterValues) {
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.cmd_flush += o.cmd_flush;
        self.store_too_large += o.store_too_large;
        self.conn_yields += o.conn_yields;
    }

    fn minus(&self, o: &CounterValues) -> CounterValues {
        CounterValues {
            bytes_read: self.bytes_read.wrapping_sub(o.bytes_read),
            bytes_written: self.bytes_written.wrapping_sub(o.bytes_written),
            cmd_flush: self.cmd_flush.wrapping_sub(o.cmd_flush),
            store_too_large: self.store_too_large.wrapping_sub(o.store_too_large),
            conn_yields: self.conn_yields.wrapping_sub(o.conn_yields),
        }
    }
}

/// memcached's connection states, as `stats conns` names them. A connection
/// reports the one that matches what it is doing (see [`Resting::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConnState {
    /// A listening socket.
    Listening,
    /// Nothing received yet, or set aside with input left for another turn.
    NewCmd,
    /// Waiting for input (memcached passes through it on its way to `Read`).
    Waiting,
    /// Idle: waiting for the rest of a command line, or for the next one.
    Read,
    /// Parsing and dispatching commands.
    ParseCmd,
    /// Writing a single reply (memcached's; this server uses `Mwrite`).
    Write,
    /// Waiting for the data block of a command whose line has arrived.
    Nread,
    /// Discarding the data block of a refused store.
    Swallow,
    /// Closing.
    Closing,
    /// Replies are rendered and wait for the socket to take them.
    Mwrite,
    /// Closed.
    Closed,
    /// A `watch` connection (not supported here).
    Watch,
    /// Requests are out at the shards' trustees and their replies are not
    /// all back (memcached's state for replies waiting on background I/O).
    IoQueue,
}

impl ConnState {
    const ALL: [ConnState; 13] = [
        ConnState::Listening,
        ConnState::NewCmd,
        ConnState::Waiting,
        ConnState::Read,
        ConnState::ParseCmd,
        ConnState::Write,
        ConnState::Nread,
        ConnState::Swallow,
        ConnState::Closing,
        ConnState::Mwrite,
        ConnState::Closed,
        ConnState::Watch,
        ConnState::IoQueue,
    ];

    /// memcached's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            ConnState::Listening => "conn_listening",
            ConnState::NewCmd => "conn_new_cmd",
            ConnState::Waiting => "conn_waiting",
            ConnState::Read => "conn_read",
            ConnState::ParseCmd => "conn_parse_cmd",
            ConnState::Write => "conn_write",
            ConnState::Nread => "conn_nread",
            ConnState::Swallow => "conn_swallow",
            ConnState::Closing => "conn_closing",
            ConnState::Mwrite => "conn_mwrite",
            ConnState::Closed => "conn_closed",
            ConnState::Watch => "conn_watch",
            ConnState::IoQueue => "conn_io_queue",
        }
    }

    fn from_u8(v: u8) -> ConnState {
        ConnState::ALL.get(usize::from(v)).copied().unwrap_or(ConnState::Closed)
    }
}

/// What a connection holds between turns, from which [`Resting::state`]
/// tells what memcached would be doing in its place.
#[derive(Debug, Clone, Copy)]
pub struct Resting<'a> {
    /// Some input has arrived.
    pub started: bool,
    /// Input waiting for more bytes to make a command.
    pub unparsed: &'a [u8],
    /// The connection speaks the binary protocol.
    pub binary: bool,
    /// Bytes of a refused value are still to be discarded.
    pub swallow: bool,
    /// Set aside with input left, for another turn.
    pub yielded: bool,
    /// Reply slots not yet rendered (requests out at the shards).
    pub waiting: usize,
    /// Rendered bytes the socket has not taken.
    pub unwritten: usize,
}

impl Resting<'_> {
    /// The state: a command line (or binary header) that has arrived with
    /// its data still missing is `conn_nread`; a partial line, or nothing,
    /// is `conn_read`, where memcached is once it has parsed what it had; a
    /// connection that has received nothing yet, or gave up its turn with
    /// input left, is `conn_new_cmd`.
    pub fn state(&self) -> ConnState {
        let line = if self.binary { self.unparsed.len() >= 24 } else { memchr::memchr(b'\n', self.unparsed).is_some() };
        if self.swallow {
            ConnState::Swallow
        } else if self.waiting > 0 {
            ConnState::IoQueue
        } else if self.unwritten > 0 {
            ConnState::Mwrite
        } else if self.yielded || !self.started {
            ConnState::NewCmd
        } else if line {
            ConnState::Nread
        } else {
            ConnState::Read
        }
    }
}

/// Formats a socket address as memcached does in `stats conns`.
pub fn conn_addr(addr: Option<SocketAddr>) -> String {
    match addr {
        Some(SocketAddr::V4(a)) => format!("tcp:{}:{}", a.ip(), a.port()),
        Some(SocketAddr::V6(a)) => format!("tcp6:[{}]:{}", a.ip(), a.port()),
        None => "<AF 0>".into(),
    }
}

/// What `stats conns` shows of one client connection. The addresses are
/// fixed at accept; the worker that owns the connection stores the state,
/// the time of the last command and the read buffer size with plain relaxed
/// stores (it is their only writer), and `stats` reads them from any thread.
#[derive(Debug)]
pub struct ConnInfo {
    /// The socket's file descriptor (the id memcached prints).
    pub fd: RawFd,
    /// The client's address, `tcp:IP:PORT`.
    pub addr: String,
    /// The local address it connected to, `tcp:IP:PORT`.
    pub listen_addr: String,
    state: AtomicU8,
    last_cmd: AtomicU32,
    read_buf: AtomicUsize,
}

impl ConnInfo {
    /// Describes a newly accepted `stream`.
    pub fn new(stream: &TcpStream) -> ConnInfo {
        ConnInfo {
            fd: stream.as_raw_fd(),
            addr: conn_addr(stream.peer_addr().ok()),
            listen_addr: conn_addr(stream.local_addr().ok()),
            state: AtomicU8::new(ConnState::NewCmd as u8),
            last_cmd: AtomicU32::new(clock::now()),
            read_buf: AtomicUsize::new(0),
        }
    }

    /// Notes the connection's state.
    #[inline]
    pub fn set_state(&self, s: ConnState) {
        if self.state.load(Ordering::Relaxed) != s as u8 {
            self.state.store(s as u8, Ordering::Relaxed);
        }
    }

    /// Notes a command (memcached's `last_cmd_time`).
    #[inline]
    pub fn command(&self) {
        let now = clock::now();
        if self.last_cmd.load(Ordering::Relaxed) != now {
            self.last_cmd.store(now, Ordering::Relaxed);
        }
    }

    /// Notes the state between turns and the size of the read buffer.
    #[inline]
    pub fn publish(&self, s: ConnState, read_buf: usize) {
        self.set_state(s);
        if self.read_buf.load(Ordering::Relaxed) != read_buf {
            self.read_buf.store(read_buf, Ordering::Relaxed);
        }
    }

    /// The state last noted.
    pub fn state(&self) -> ConnState {
        ConnState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Whole seconds since the last command (or the accept), at relative
    /// time `now`.
    pub fn idle_secs(&self, now: u32) -> u32 {
        now.saturating_sub(self.last_cmd.load(Ordering::Relaxed))
    }

    /// Bytes of the connection's read buffer.
    pub fn read_buf(&self) -> usize {
        self.read_buf.load(Ordering::Relaxed)
    }
}

/// The connections of one worker, by slot. Only its worker changes it, on
/// accept and close; `stats` reads it from other threads. The mutex is
/// therefore taken on accept, close and `stats` only, never for a request.
type Registry = Mutex<Vec<Option<Arc<ConnInfo>>>>;

/// A listening socket as `stats conns` shows it.
#[derive(Debug, Clone)]
pub struct ListenInfo {
    /// Its file descriptor.
    pub fd: RawFd,
    /// Its address, `tcp:IP:PORT`.
    pub addr: String,
}

/// What other threads may do to one connection worker.
pub struct Peer {
    /// Set while the worker blocks in its poller; whoever has requests
    /// outstanding on this worker's shard must then wake it.
    pub sleeping: AtomicBool,
    /// Interrupts the worker's poller.
    pub waker: Waker,
    /// Connections accepted elsewhere and handed to this worker.
    pub inbox: Mutex<Vec<TcpStream>>,
    /// The inbox is not empty.
    pub has_inbox: AtomicBool,
    /// This worker's counters.
    pub counters: WorkerCounters,
    /// This worker's connections, for `stats conns`.
    conns: Registry,
}

impl Peer {
    /// A peer whose poller `waker` interrupts.
    pub fn new(waker: Waker) -> Peer {
        Peer {
            sleeping: AtomicBool::new(false),
            waker,
            inbox: Mutex::new(Vec::new()),
            has_inbox: AtomicBool::new(false),
            counters: WorkerCounters::default(),
            conns: Mutex::new(Vec::new()),
        }
    }

    /// Hands a connection to this worker.
    pub fn hand_over(&self, stream: TcpStream) {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner()).push(stream);
        self.has_inbox.store(true, Ordering::Release);
        if let Err(e) = self.waker.wake() {
            tracing::warn!("cannot wake a connection worker: {e}");
        }
    }

    /// Takes the connections handed over so far.
    pub fn take_inbox(&self) -> Vec<TcpStream> {
        if !self.has_inbox.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The state of one process of the server, shared by its connection
/// workers.
pub struct Shared {
    /// The settings.
    pub config: Config,
    /// This process's rank in the program (0 for a server of one process).
    pub rank: usize,
    /// Processes in the program.
    pub processes: usize,
    /// Addresses actually listened on.
    pub addrs: Vec<SocketAddr>,
    /// Set to stop the server.
    pub stop: AtomicBool,
    /// One per connection worker, indexed like the workers.
    pub peers: Vec<Peer>,
    /// Open client connections.
    pub curr_connections: AtomicUsize,
    /// Connections ever accepted.
    pub total_connections: AtomicU64,
    /// Connections refused over the limit.
    pub rejected_connections: AtomicU64,
    /// Verbosity set by the `verbosity` command.
    pub verbosity: AtomicU32,
    /// The listening sockets.
    pub listeners: Vec<ListenInfo>,
    /// Relative time at start-up.
    pub started: u32,
    /// memcached's `oldest_live` as the last flush_all set it (0: none).
    pub oldest_live: AtomicU32,
    /// Counter values at the last `stats reset`.
    baseline: Mutex<CounterValues>,
    /// In a multi-process program, the watcher the connection workers park
    /// with (see [`super::watcher`]); `None` for a server of one process,
    /// whose workers block in their pollers.
    pub watcher: Option<super::watcher::Watcher>,
    /// Detail stats, log watchers and the other administrative state.
    pub admin: super::admin::AdminState,
    /// The clock's timer and the shards' maintainers (see
    /// [`super::maintainer`]).
    pub maintenance: super::maintainer::Maintenance,
}

impl Shared {
    /// Shared state for `peers.len()` connection workers of process `rank`
    /// of `processes`, listening on `addrs` with sockets `listen_fds`.
    pub fn new(
        config: Config,
        (rank, processes): (usize, usize),
        addrs: Vec<SocketAddr>,
        listen_fds: Vec<RawFd>,
        peers: Vec<Peer>,
        watcher: Option<super::watcher::Watcher>,
    ) -> Shared {
        Shared {
            watcher,
            rank,
            processes,
            verbosity: AtomicU32::new(u32::from(config.verbose)),
            listeners: listen_fds
                .into_iter()
                .zip(&addrs)
                .map(|(fd, &a)| ListenInfo { fd, addr: conn_addr(Some(a)) })
                .collect(),
            started: clock::now(),
            oldest_live: AtomicU32::new(0),
            admin: super::admin::AdminState::new(&config),
            config,
            addrs,
            stop: AtomicBool::new(false),
            peers,
            curr_connections: AtomicUsize::new(0),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            baseline: Mutex::new(CounterValues::default()),
            maintenance: Default::default(),
        }
    }

    fn raw_counters(&self) -> CounterValues {
        let mut sum = CounterValues::default();
        for p in &self.peers {
            sum.add(&CounterValues::read(&p.counters));
        }
        sum
    }

    /// Worker counters summed, since the last reset.
    pub fn counters(&self) -> CounterValues {
        let base = *self.baseline.lock().unwrap_or_else(|e| e.into_inner());
        self.raw_counters().minus(&base)
    }

    /// `stats reset` for the worker counters.
    pub fn reset_counters(&self) {
        let now = self.raw_counters();
        *self.baseline.lock().unwrap_or_else(|e| e.into_inner()) = now;
        self.total_connections.store(0, Ordering::Relaxed);
        self.rejected_connections.store(0, Ordering::Relaxed);
    }

    /// Notes a flush_all with client delay `delay` for `stats settings`
    /// (memcached's `oldest_live`, as each shard sets it).
    pub fn note_flush(&self, delay: i64) {
        let now = clock::now();
        let oldest =
            if delay > 0 { clock::realtime(delay, now, clock::process_started()) } else { now }.saturating_sub(1);
        self.oldest_live.store(oldest, Ordering::Relaxed);
    }

    /// Registers connection `slot` of worker `worker`, accepted on `stream`.
    pub fn register_conn(&self, worker: usize, slot: usize, stream: &TcpStream) -> Arc<ConnInfo> {
        let info = Arc::new(ConnInfo::new(stream));
        let mut reg = lock(&self.peers[worker].conns);
        if reg.len() <= slot {
            reg.resize(slot + 1, None);
        }
        reg[slot] = Some(info.clone());
        info
    }

    /// Forgets connection `slot` of worker `worker` (before its socket is
    /// closed, so that its descriptor is not listed twice once reused).
    pub fn unregister_conn(&self, worker: usize, slot: usize) {
        if let Some(e) = lock(&self.peers[worker].conns).get_mut(slot) {
            *e = None;
        }
    }

    /// Every registered client connection, in no particular order. Takes
    /// each worker's registry lock in turn: this is the `stats` path, not a
    /// request's.
    pub fn connections(&self) -> Vec<Arc<ConnInfo>> {
        let mut all = Vec::new();
        for p in &self.peers {
            all.extend(lock(&p.conns).iter().flatten().cloned());
        }
        all
    }

    /// Asks every connection worker to stop.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for p in &self.peers {
            let _ = p.waker.wake();
        }
        self.maintenance.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rest(unparsed: &[u8]) -> Resting<'_> {
        Resting { started: true, unparsed, binary: false, swallow: false, yielded: false, waiting: 0, unwritten: 0 }
    }

    #[test]
    fn resting_states_are_memcacheds() {
        assert_eq!(Resting { started: false, ..rest(b"") }.state(), ConnState::NewCmd);
        assert_eq!(rest(b"").state(), ConnState::Read);
        assert_eq!(rest(b"get a").state(), ConnState::Read);
        assert_eq!(rest(b"set a 0 0 5\r\nab").state(), ConnState::Nread);
        assert_eq!(Resting { binary: true, ..rest(&[0x80; 10]) }.state(), ConnState::Read);
        assert_eq!(Resting { binary: true, ..rest(&[0x80; 30]) }.state(), ConnState::Nread);
        assert_eq!(Resting { swallow: true, ..rest(b"") }.state(), ConnState::Swallow);
        assert_eq!(Resting { waiting: 2, unwritten: 10, ..rest(b"") }.state(), ConnState::IoQueue);
        assert_eq!(Resting { unwritten: 10, ..rest(b"") }.state(), ConnState::Mwrite);
        assert_eq!(Resting { yielded: true, ..rest(b"get a\r\n") }.state(), ConnState::NewCmd);
        for s in ConnState::ALL {
            assert_eq!(ConnState::from_u8(s as u8), s);
            assert!(s.name().starts_with("conn_"));
        }
    }

    #[test]
    fn addresses_as_memcached_prints_them() {
        assert_eq!(conn_addr(Some("127.0.0.1:11211".parse().unwrap())), "tcp:127.0.0.1:11211");
        assert_eq!(conn_addr(Some("[::1]:11211".parse().unwrap())), "tcp6:[::1]:11211");
    }
}
