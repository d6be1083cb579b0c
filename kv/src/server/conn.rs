//! One client connection: its socket, read buffer and protocol state.
//!
//! The socket is non-blocking and registered edge-triggered, so a read
//! goes on until the kernel says `WouldBlock`. Commands are parsed and
//! dispatched as soon as they are complete; the connection stops taking
//! commands, and reading its socket, while too many replies wait (in
//! flight or unwritten), and after a bounded amount of input per turn, so
//! one busy client cannot starve the others.
//!
//! Memory per connection is bounded as memcached bounds it, by not reading
//! a client that does not read its replies: once [`MAX_WAITING`] replies
//! wait or [`MAX_ANSWERED`] bytes of answers are unwritten, no command is
//! parsed and the socket is not read until the client has taken enough.
//! What the connection then holds is its read buffer (at most
//! 2 × [`READ_BATCH`] of pipelined input, or one command with its value),
//! the answered replies (the bound, plus those of the command that crossed
//! it), and the answers to the requests still in flight (fewer than
//! [`MAX_WAITING`] plus one command's).

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::rc::Rc;
use std::sync::Arc;

use mio::net::TcpStream;

use super::admin::watch::{Watcher, Watchers};
use super::dispatch::{self, Env, Flow};
use super::local::ConnShared;
use super::shared::{bump, ConnInfo, ConnState, Resting, WorkerCounters};
use crate::protocol::{binary, text, Protocol};

/// Initial read buffer (memcached's is 16 KiB too).
const READ_BUF: usize = 16 * 1024;
/// Reads per turn before other connections get theirs.
const READS_PER_TURN: usize = 8;
/// Unparsed input that is enough to go parsing.
pub const READ_BATCH: usize = 64 * 1024;
/// Reply slots waiting (in flight, or answered behind an earlier one)
/// before the connection stops taking commands.
pub const MAX_WAITING: usize = 1024;
/// Bytes of answered, unwritten replies before the connection stops taking
/// commands.
pub const MAX_ANSWERED: usize = 256 * 1024;
/// Capacity of an output buffer past which it is given back once mostly
/// written.
const OUT_KEEP: usize = 4 * MAX_ANSWERED;

/// What a turn left to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Nothing until the next event.
    Done,
    /// Input may be left: come back next round.
    Again,
}

/// A client connection.
pub struct Conn {
    /// The socket.
    pub stream: TcpStream,
    /// What then-callbacks reach.
    pub shared: Rc<ConnShared>,
    rbuf: Vec<u8>,
    head: usize,
    tail: usize,
    proto: Option<Protocol>,
    swallow: usize,
    /// The socket may have more input (no `WouldBlock` seen since the last
    /// readiness event).
    pub readable: bool,
    /// The client closed its side.
    pub read_closed: bool,
    /// No more commands will be taken (quit, fatal protocol error).
    pub stopped: bool,
    /// The socket failed: close at once.
    pub broken: bool,
    /// Too many replies wait; taking commands resumes when they drain.
    pub blocked: bool,
    /// Already on the worker's list for another turn.
    pub in_backlog: bool,
    /// What `stats conns` shows of it.
    pub info: Arc<ConnInfo>,
    /// The connection is a log watcher: its input is ignored and a writer
    /// thread sends the log lines.
    watching: Option<Arc<Watcher>>,
    /// A watcher whose writer starts once the replies before it are out.
    watch_pending: Option<(Arc<Watcher>, Arc<Watchers>)>,
}

impl Conn {
    /// A connection on `stream`.
    pub fn new(stream: TcpStream, shared: Rc<ConnShared>, info: Arc<ConnInfo>) -> Conn {
        shared.fd.set(stream.as_raw_fd());
        Conn {
            stream,
            shared,
            // Allocated at the first read: a burst of new connections
            // costs no memory until they send something.
            rbuf: Vec::new(),
            head: 0,
            tail: 0,
            proto: None,
            swallow: 0,
            readable: true,
            read_closed: false,
            stopped: false,
            broken: false,
            blocked: false,
            in_backlog: false,
            info,
            watching: None,
            watch_pending: None,
        }
    }

    /// Hands the socket to the log watcher the connection has become, once
    /// every reply before it has been written.
    fn start_watch(&mut self) {
        let idle = {
            let out = self.shared.out.borrow();
            out.waiting() == 0 && out.unwritten() == 0
        };
        if !idle {
            return;
        }
        let Some((w, watchers)) = self.watch_pending.take() else { return };
        match self.stream.as_fd().try_clone_to_owned() {
            Ok(fd) => watchers.spawn_writer(w, std::net::TcpStream::from(fd)),
            Err(e) => {
                tracing::warn!("cannot start a log watcher: {e}");
                w.close();
            }
        }
    }

    /// Whether the connection is a log watcher.
    pub fn is_watching(&self) -> bool {
        self.watching.is_some()
    }

    /// Tells `stats conns` what the connection is doing between turns.
    pub fn publish(&self) {
        if self.watching.is_some() {
            self.info.publish(ConnState::Watch, self.rbuf.len());
            return;
        }
        let out = self.shared.out.borrow();
        let state = Resting {
            started: self.proto.is_some(),
            unparsed: &self.rbuf[self.head..self.tail],
            binary: self.proto == Some(Protocol::Binary),
            swallow: self.swallow > 0,
            yielded: self.in_backlog,
            waiting: out.waiting(),
            unwritten: out.unwritten(),
        };
        self.info.publish(state.state(), self.rbuf.len());
    }

    /// Whether the connection is skipping the value of a refused store.
    pub fn swallowing(&self) -> bool {
        self.swallow > 0
    }

    /// Whether enough replies wait that no more commands should be taken.
    pub fn backpressured(&self) -> bool {
        let out = self.shared.out.borrow();
        out.waiting() >= MAX_WAITING || out.answered() >= MAX_ANSWERED
    }

    /// Reads and handles input for one turn.
    pub fn service(&mut self, env: &Env<'_>) -> Turn {
        for _ in 0..READS_PER_TURN {
            if self.stopped || self.broken {
                return Turn::Done;
            }
            if !self.process(env) {
                return Turn::Done;
            }
            if !self.readable || self.read_closed {
                return Turn::Done;
            }
            self.fill(env.counters);
        }
        bump(&env.counters.conn_yields, 1);
        Turn::Again
    }

    /// Reads until `WouldBlock`, end of input, or a batch worth parsing.
    fn fill(&mut self, counters: &WorkerCounters) {
        if self.rbuf.is_empty() {
            self.rbuf = vec![0; READ_BUF];
        }
        loop {
            if self.tail == self.rbuf.len() {
                if self.head > 0 {
                    self.rbuf.copy_within(self.head..self.tail, 0);
                    self.tail -= self.head;
                    self.head = 0;
                } else {
                    let len = self.rbuf.len() * 2;
                    self.rbuf.resize(len, 0);
                }
            }
            match self.stream.read(&mut self.rbuf[self.tail..]) {
                Ok(0) => {
                    self.read_closed = true;
                    self.readable = false;
                    return;
                }
                Ok(n) => {
                    self.tail += n;
                    bump(&counters.bytes_read, n as u64);
                    if self.tail - self.head >= READ_BATCH {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.readable = false;
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!("read error: {e}");
                    self.broken = true;
                    self.readable = false;
                    return;
                }
            }
        }
    }

    /// Parses and dispatches the buffered commands. Returns false when it
    /// stopped because too many replies wait.
    fn process(&mut self, env: &Env<'_>) -> bool {
        loop {
            if self.swallow > 0 {
                let n = self.swallow.min(self.tail - self.head);
                self.head += n;
                self.swallow -= n;
                if self.swallow > 0 {
                    return true;
                }
            }
            if self.watching.is_some() {
                // memcached stops reading a watcher's input.
                self.head = self.tail;
            }
            if self.head == self.tail {
                self.head = 0;
                self.tail = 0;
                if self.rbuf.len() > 4 * READ_BUF {
                    self.rbuf = vec![0; READ_BUF];
                }
                return true;
            }
            if self.stopped {
                return true;
            }
            if self.backpressured() {
                self.blocked = true;
                return false;
            }
            let input = &self.rbuf[self.head..self.tail];
            let proto = *self.proto.get_or_insert_with(|| Protocol::detect(input[0]));
            let (consumed, swallow, flow) = match proto {
                Protocol::Text => match text::parse(input, &env.limits) {
                    None => return true,
                    Some(p) => {
                        self.info.command();
                        (p.consumed, p.swallow, dispatch::text(env, &self.shared, p.command))
                    }
                },
                Protocol::Binary => match binary::parse(input, env.limits.item_size_max) {
                    None => return true,
                    Some(p) => {
                        self.info.command();
                        (p.consumed, p.swallow, dispatch::binary(env, &self.shared, p.frame))
                    }
                },
            };
            self.head += consumed;
            self.swallow = swallow;
            if let Some(w) = self.shared.watch.take() {
                self.watching = Some(w.clone());
                self.watch_pending = Some((w, env.shared.admin.watchers.clone()));
                self.start_watch();
            }
            if flow == Flow::Stop {
                self.stopped = true;
            }
        }
    }

    /// Writes the replies of finished batches (see [`super::outq`]) until
    /// done or `WouldBlock`: one `write` when the socket takes it all.
    pub fn flush(&mut self, counters: &WorkerCounters) {
        let mut out = self.shared.out.borrow_mut();
        loop {
            let bytes = out.writable();
            if bytes.is_empty() {
                break;
            }
            match self.stream.write(bytes) {
                Ok(0) => {
                    self.broken = true;
                    return;
                }
                Ok(n) => {
                    out.consume(n);
                    bump(&counters.bytes_written, n as u64);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!("write error: {e}");
                    self.broken = true;
                    return;
                }
            }
        }
        out.trim(OUT_KEEP);
        drop(out);
        if self.watch_pending.is_some() {
            self.start_watch();
        }
    }

    /// Whether the connection should be closed now.
    pub fn finished(&self) -> bool {
        if self.broken {
            return true;
        }
        let out = self.shared.out.borrow();
        if out.close {
            return out.unwritten() == 0;
        }
        if self.read_closed && self.swallow > 0 {
            // The client left in the middle of a refused value: as
            // memcached does, close without the replies held back for it.
            return self.shared.pending.get() == 0 && out.writable().is_empty();
        }
        // The client closed its side: done once everything it sent is
        // answered (an incomplete last command never will be).
        self.read_closed && !self.blocked && self.shared.pending.get() == 0 && out.is_idle()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(w) = &self.watching {
            w.close();
        }
    }
}
