//! State shared by all connection workers (across threads): settings, the
//! stop flag, each worker's wake-up handle and inbox, connection counts and
//! per-worker counters. Nothing here is on a request's path except the
//! worker's own counters, which only their owner writes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use mio::net::TcpStream;
use mio::Waker;

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
#[derive(Debug, Default, Clone, Copy)]
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

    fn add(&mut self, o: &CounterValues) {
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

/// Server-wide state.
pub struct Shared {
    /// The settings.
    pub config: Config,
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
    /// Counter values at the last `stats reset`.
    baseline: Mutex<CounterValues>,
}

impl Shared {
    /// Shared state for `peers.len()` connection workers.
    pub fn new(config: Config, addrs: Vec<SocketAddr>, peers: Vec<Peer>) -> Shared {
        Shared {
            verbosity: AtomicU32::new(u32::from(config.verbose)),
            config,
            addrs,
            stop: AtomicBool::new(false),
            peers,
            curr_connections: AtomicUsize::new(0),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            baseline: Mutex::new(CounterValues::default()),
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

    /// Asks every connection worker to stop.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for p in &self.peers {
            let _ = p.waker.wake();
        }
    }
}
