//! The connection worker: one fiber per worker thread that owns a `mio`
//! poller and that worker's connections.
//!
//! Each round it polls sockets (without blocking), reads and parses what
//! arrived, delegates every request with `apply_then`, then yields: the
//! worker thread then flushes the requests to their trustees, serves the
//! requests other workers sent to its own shard, and runs the
//! then-callbacks of answered requests, which put the replies in order.
//! Back in the fiber, it writes out the replies of every batch (what one
//! connection's turn parsed) whose replies are all rendered, each batch
//! with one write.
//!
//! A fiber must never block its thread while the thread has work, since
//! the thread is also a trustee. So a worker blocks in its poller only when
//! it has nothing to do: no input, no replies to write, and no request in
//! flight, or only requests in flight to trustees that are themselves
//! connection workers (they wake it when they answer; see [`super::wake`]).
//! It first keeps polling for `--idle-spin-us` (nothing in flight) or
//! `--wait-spin-us` (waiting for answers), yielding the core between
//! rounds. A worker with requests outstanding on a sleeping worker's shard
//! wakes it through its `mio::Waker`, and a sleep never lasts more than
//! [`SLEEP_MAX`] in any case.

use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gossamer::Parker;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use super::admin;
use super::conn::{Conn, Turn};
use super::dispatch::Env;
use super::local::{ConnShared, Local};
use super::placement::Placement;
use super::shards::Shards;
use super::shared::{ConnState, Shared};
use super::wake;
use crate::clock;
use crate::protocol::text::Limits;

/// Token of the worker's waker.
pub const WAKER: Token = Token(usize::MAX);
/// Longest time a worker blocks in its poller.
pub const SLEEP_MAX: Duration = Duration::from_millis(50);
/// How long shutdown waits for requests in flight.
const DRAIN_MAX: Duration = Duration::from_secs(2);
/// Reply to a connection over the limit.
const TOO_MANY: &[u8] = b"ERROR Too many open connections\r\n";

fn listener_token(i: usize) -> Token {
    Token(usize::MAX - 1 - i)
}

/// Everything a connection worker starts with.
pub struct Init {
    /// The worker's index among its process's connection workers.
    pub index: usize,
    /// The global thread id of the process's first connection worker: the
    /// connection workers of a process are its first threads, so worker
    /// `index` runs on thread `base + index`.
    pub base: usize,
    /// Its poller; the waker in `shared.peers[index]` belongs to it.
    pub poll: Poll,
    /// Listening sockets (worker 0 only).
    pub listeners: Vec<TcpListener>,
    /// The process's state.
    pub shared: Arc<Shared>,
    /// The shards and agents of the program.
    pub placement: Placement,
    /// Serve requests for this thread's own shard in place.
    pub local_first: bool,
}

struct Reactor {
    index: usize,
    base: usize,
    /// Parking mode (a multi-process program): how this worker sleeps.
    parker: Option<Parker>,
    poll: Poll,
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
    shards: Shards,
    local: Rc<Local>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    backlog: Vec<usize>,
    scratch: Vec<usize>,
    next_target: usize,
    /// Accepting stopped at the open-file limit: try again each round
    /// (memcached retries on a timer) until it works, since the
    /// listener's readiness is edge-triggered and is not reported again
    /// for the connections already waiting.
    accept_paused: bool,
    limits: Limits,
    spin: Duration,
    wait_spin: Duration,
}

/// Runs a connection worker until the server stops.
pub fn run(init: Init) {
    let threads = init.placement.threads();
    let (parker, unparker) = match &init.shared.watcher {
        Some(w) => {
            let (p, u) = Parker::new();
            match w.register(init.index, init.poll.as_raw_fd(), u.clone()) {
                Ok(()) => (Some(p), Some(u)),
                Err(e) => {
                    // Without the watcher, polling without blocking still
                    // serves everyone, at the cost of a busy core.
                    tracing::error!("cannot watch connection worker {}: {e}; it will not sleep", init.index);
                    (None, None)
                }
            }
        }
        None => (None, None),
    };
    let mut r = Reactor {
        index: init.index,
        base: init.base,
        parker,
        poll: init.poll,
        listeners: init.listeners,
        limits: Limits { item_size_max: init.shared.config.item_size_max },
        spin: Duration::from_micros(init.shared.config.idle_spin_us),
        wait_spin: Duration::from_micros(init.shared.config.wait_spin_us),
        shared: init.shared,
        shards: Shards::new(init.placement, init.base + init.index, init.local_first),
        local: Rc::new(Local::new(threads, unparker)),
        conns: Vec::new(),
        free: Vec::new(),
        backlog: Vec::new(),
        scratch: Vec::new(),
        next_target: 0,
        accept_paused: false,
    };
    for (i, l) in r.listeners.iter_mut().enumerate() {
        if let Err(e) = r.poll.registry().register(l, listener_token(i), Interest::READABLE) {
            tracing::error!("cannot poll the listening socket: {e}");
        }
    }
    r.main_loop();
    r.shutdown();
}

impl Reactor {
    fn main_loop(&mut self) {
        let mut events = Events::with_capacity(1024);
        let mut quiet_since: Option<Instant> = None;
        loop {
            clock::tick();
            if self.shared.stop.load(Ordering::Acquire) {
                return;
            }
            let work = !self.backlog.is_empty() || self.local.has_ready();
            let mut sleep = false;
            if work {
                quiet_since = None;
            } else {
                let since = *quiet_since.get_or_insert_with(Instant::now);
                let spin = if self.local.total() == 0 { self.spin } else { self.wait_spin };
                if since.elapsed() >= spin {
                    if self.parker.is_some() {
                        self.park();
                    } else if self.may_sleep() {
                        sleep = self.prepare_sleep();
                    }
                }
            }
            let polled = self.poll.poll(&mut events, Some(if sleep { SLEEP_MAX } else { Duration::ZERO }));
            if sleep {
                self.shared.peers[self.index].sleeping.store(false, Ordering::SeqCst);
                clock::tick();
            }
            if let Err(e) = polled {
                if e.kind() != ErrorKind::Interrupted {
                    tracing::error!("poll failed: {e}");
                }
            }
            let mut did = !events.is_empty();
            if self.accept_paused {
                for i in 0..self.listeners.len() {
                    self.accept(i);
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {}
                    Token(t) if t >= usize::MAX - self.listeners.len() => self.accept(usize::MAX - 1 - t),
                    Token(slot) => {
                        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { continue };
                        if ev.is_writable() {
                            conn.shared.mark_ready();
                        }
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            conn.readable = true;
                            self.service(slot);
                        }
                    }
                }
            }
            for stream in self.shared.peers[self.index].take_inbox() {
                did = true;
                self.add(stream);
            }
            if !self.backlog.is_empty() {
                let backlog = std::mem::take(&mut self.backlog);
                for slot in backlog {
                    if let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) {
                        c.in_backlog = false;
                        self.service(slot);
                    }
                }
            }
            // Let the worker thread flush our requests, serve its shard and
            // run the callbacks of answered requests.
            gossamer::yield_now();
            self.notify_served();
            did |= self.write_ready();
            self.wake_peers();
            if did {
                quiet_since = None;
            } else if self.local.total() > 0 && !sleep {
                // Only waiting for other trustees: let them (or the
                // clients) have the core if they are short of one.
                std::thread::yield_now();
            }
        }
    }

    /// Whether blocking in the poller is allowed: nothing in flight, or
    /// only requests to trustees whose connection workers will wake us
    /// (those of this process; a trustee in another process cannot reach
    /// our waker, so requests there keep us polling).
    fn may_sleep(&self) -> bool {
        let ours = self.base..self.base + self.shared.peers.len();
        self.local.total() == 0 || self.local.total() == ours.clone().map(|w| self.local.outstanding(w)).sum::<u32>()
    }

    /// Parking mode: sleeps until the watcher sees I/O for this worker or a
    /// reply is ready (see [`super::watcher`]); meanwhile the thread serves
    /// delegated requests and sleeps on the runtime's doorbell.
    fn park(&mut self) {
        let Some(watcher) = &self.shared.watcher else { return };
        if let Err(e) = watcher.arm(self.index) {
            tracing::error!("cannot watch connection worker {}: {e}", self.index);
            return;
        }
        // Nothing else runs on this thread until the park: a reply that
        // completes from here on finds the flag and unparks us.
        self.local.set_parked(true);
        if !self.local.has_ready() && !self.shared.stop.load(Ordering::Acquire) {
            if let Some(p) = &self.parker {
                p.park();
            }
        }
        self.local.set_parked(false);
        clock::tick();
    }

    /// Announces that this worker is about to block and has a last look.
    /// Returns false (and takes the announcement back) if that found work.
    fn prepare_sleep(&mut self) -> bool {
        let me = &self.shared.peers[self.index];
        me.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let total = self.local.total();
        gossamer::yield_now();
        let served = self.notify_served();
        self.wake_peers();
        let me = &self.shared.peers[self.index];
        if served || self.local.total() != total || self.local.has_ready() || me.has_inbox.load(Ordering::SeqCst) {
            me.sleeping.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Wakes the sleeping workers whose requests this thread has just
    /// answered. Returns whether it answered any.
    fn notify_served(&self) -> bool {
        let mask = wake::take_served() & !wake::bit(self.base + self.index);
        if mask == 0 {
            return false;
        }
        fence(Ordering::SeqCst);
        for (w, peer) in self.shared.peers.iter().enumerate() {
            if w != self.index && mask & wake::bit(self.base + w) != 0 && peer.sleeping.load(Ordering::SeqCst) {
                if let Err(e) = peer.waker.wake() {
                    tracing::warn!("cannot wake worker {w}: {e}");
                }
            }
        }
        true
    }

    /// Gives connection `slot` a turn at its input.
    fn service(&mut self, slot: usize) {
        let env = Env {
            shards: &self.shards,
            shared: &self.shared,
            counters: &self.shared.peers[self.index].counters,
            limits: self.limits,
        };
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        conn.info.set_state(ConnState::ParseCmd);
        let turn = conn.service(&env);
        // What this turn parsed is one batch: its replies leave together,
        // once the last of them is rendered. A batch that ends in the
        // value of a refused store goes on until the value is skipped, as
        // memcached answers such a store only once it has swallowed it.
        if !conn.swallowing() {
            conn.shared.out.borrow_mut().end_batch();
        }
        if turn == Turn::Again && !conn.in_backlog {
            conn.in_backlog = true;
            self.backlog.push(slot);
        }
        conn.publish();
        conn.shared.mark_ready();
    }

    /// Writes out the replies of the connections that have some, resumes
    /// those no longer held back, and closes the finished ones.
    fn write_ready(&mut self) -> bool {
        let mut ready = std::mem::take(&mut self.scratch);
        self.local.take_ready(&mut ready);
        let any = !ready.is_empty();
        for &slot in &ready {
            let counters = &self.shared.peers[self.index].counters;
            let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { continue };
            conn.shared.unqueue();
            conn.flush(counters);
            conn.publish();
            if conn.blocked && !conn.backpressured() {
                conn.blocked = false;
                self.service(slot);
            }
            if self.conns[slot].as_ref().is_some_and(Conn::finished) {
                self.close(slot);
            }
        }
        self.scratch = ready;
        any
    }

    /// Wakes sleeping workers that hold requests of ours.
    fn wake_peers(&self) {
        if self.local.total() == 0 {
            return;
        }
        fence(Ordering::SeqCst);
        for (w, peer) in self.shared.peers.iter().enumerate() {
            if w != self.index && self.local.outstanding(self.base + w) > 0 && peer.sleeping.load(Ordering::SeqCst) {
                if let Err(e) = peer.waker.wake() {
                    tracing::warn!("cannot wake worker {w}: {e}");
                }
            }
        }
    }

    /// Accepts the connections waiting on listener `i`: first takes them
    /// all off the kernel's queue, so that a burst finds room in the
    /// backlog while the worker is busy, then sets each up.
    fn accept(&mut self, i: usize) {
        let mut accepted = Vec::new();
        loop {
            match self.listeners[i].accept() {
                Ok(s) => {
                    self.accept_paused = false;
                    accepted.push(s);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.accept_paused = false;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    if !self.accept_paused {
                        tracing::warn!("accept failed: {e}; raise the open-file limit (ulimit -n) or lower -c");
                    }
                    self.accept_paused = true;
                    break;
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    break;
                }
            }
        }
        for (mut stream, addr) in accepted {
            let sh = &self.shared;
            if sh.curr_connections.load(Ordering::Relaxed) >= sh.config.max_connections {
                let _ = stream.write(TOO_MANY);
                sh.rejected_connections.fetch_add(1, Ordering::Relaxed);
                tracing::info!(%addr, "refused a connection over the limit of {}", sh.config.max_connections);
                continue;
            }
            sh.curr_connections.fetch_add(1, Ordering::Relaxed);
            sh.total_connections.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
            tracing::debug!(%addr, "new connection");
            let target = self.next_target % sh.peers.len();
            self.next_target = self.next_target.wrapping_add(1);
            if target == self.index {
                self.add(stream);
            } else {
                sh.peers[target].hand_over(stream);
            }
        }
    }

    fn add(&mut self, mut stream: TcpStream) {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        if let Err(e) = self.poll.registry().register(&mut stream, Token(slot), Interest::READABLE | Interest::WRITABLE)
        {
            tracing::warn!("cannot poll a new connection: {e}");
            self.free.push(slot);
            self.shared.curr_connections.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let shared = Rc::new(ConnShared::new(slot, self.local.clone()));
        let info = self.shared.register_conn(self.index, slot, &stream);
        if self.shared.admin.observing() {
            admin::hooks::conn_new(&self.shared, stream.peer_addr().ok(), info.fd);
        }
        self.conns[slot] = Some(Conn::new(stream, shared, info));
        self.service(slot);
    }

    fn close(&mut self, slot: usize) {
        let Some(mut conn) = self.conns[slot].take() else { return };
        self.shared.unregister_conn(self.index, slot);
        if self.shared.admin.observing() {
            admin::hooks::conn_close(
                &self.shared,
                conn.stream.peer_addr().ok(),
                conn.broken || conn.is_watching() || conn.shared.out.borrow().close_error,
                conn.info.fd,
            );
        }
        conn.shared.kill();
        let _ = self.poll.registry().deregister(&mut conn.stream);
        drop(conn);
        self.free.push(slot);
        self.shared.curr_connections.fetch_sub(1, Ordering::Relaxed);
    }

    fn shutdown(&mut self) {
        for slot in 0..self.conns.len() {
            self.close(slot);
        }
        self.listeners.clear();
        let start = Instant::now();
        while self.local.total() > 0 && start.elapsed() < DRAIN_MAX {
            gossamer::yield_now();
        }
    }
}
