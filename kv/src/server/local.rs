//! State of one connection worker that its then-callbacks share with it.
//!
//! Then-callbacks run on the worker's own thread (between its fiber's
//! yields, or at once for the local shard), so this is single-threaded
//! state behind `Rc` and `Cell`. Callbacks never run while the worker holds
//! a borrow: the worker only borrows between delegation calls.

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;

use gossamer::Unparker;

use super::admin::detail::Hold;
use super::admin::watch::Watcher;
use super::outq::{OutQueue, Reply};

/// Per-worker bookkeeping: requests in flight per trustee, and the
/// connections with something to write.
pub struct Local {
    outstanding: Box<[Cell<u32>]>,
    total: Cell<u32>,
    ready: RefCell<Vec<usize>>,
    /// In parking mode: the worker's fiber is parked, and what wakes it.
    parked: Cell<bool>,
    unparker: Option<Unparker>,
}

impl Local {
    /// Bookkeeping for a program of `workers` threads; `unparker` wakes
    /// the worker when it parks (parking mode).
    pub fn new(workers: usize, unparker: Option<Unparker>) -> Local {
        Local {
            outstanding: (0..workers).map(|_| Cell::new(0)).collect(),
            total: Cell::new(0),
            ready: RefCell::new(Vec::new()),
            parked: Cell::new(false),
            unparker,
        }
    }

    /// The worker parks (true) or runs again (false).
    pub fn set_parked(&self, parked: bool) {
        self.parked.set(parked);
    }

    /// Wakes the worker if it is parked: something is ready for it.
    fn wake(&self) {
        if self.parked.get() {
            if let Some(u) = &self.unparker {
                u.unpark();
            }
        }
    }

    /// A request to a shard on worker `w` was issued.
    pub fn begin(&self, w: usize) {
        self.outstanding[w].set(self.outstanding[w].get() + 1);
        self.total.set(self.total.get() + 1);
    }

    /// A request to a shard on worker `w` was answered.
    pub fn end(&self, w: usize) {
        self.outstanding[w].set(self.outstanding[w].get() - 1);
        self.total.set(self.total.get() - 1);
    }

    /// Requests in flight to worker `w`.
    pub fn outstanding(&self, w: usize) -> u32 {
        self.outstanding[w].get()
    }

    /// Requests in flight in total.
    pub fn total(&self) -> u32 {
        self.total.get()
    }

    /// Takes the list of connections to service, leaving `into` (cleared)
    /// in its place to reuse its allocation.
    pub fn take_ready(&self, into: &mut Vec<usize>) {
        into.clear();
        std::mem::swap(&mut *self.ready.borrow_mut(), into);
    }

    /// Whether some connection waits to be serviced.
    pub fn has_ready(&self) -> bool {
        !self.ready.borrow().is_empty()
    }
}

/// The part of a connection that then-callbacks reach.
pub struct ConnShared {
    /// The connection's slot in its worker.
    pub slot: usize,
    /// Replies in request order.
    pub out: RefCell<OutQueue>,
    /// The worker's bookkeeping.
    pub local: Rc<Local>,
    /// Requests issued and not yet answered.
    pub pending: Cell<usize>,
    /// The socket's descriptor (for log lines), -1 until known.
    pub fd: Cell<RawFd>,
    /// A log watcher the connection has just become (its connection
    /// starts the watcher's writer).
    pub watch: Cell<Option<Arc<Watcher>>>,
    /// Detail counts kept in command order around `stats detail dump`.
    pub detail: RefCell<Hold>,
    queued: Cell<bool>,
    dead: Cell<bool>,
}

impl ConnShared {
    /// State for the connection in `slot`.
    pub fn new(slot: usize, local: Rc<Local>) -> ConnShared {
        ConnShared {
            slot,
            out: RefCell::new(OutQueue::default()),
            local,
            pending: Cell::new(0),
            fd: Cell::new(-1),
            watch: Cell::new(None),
            detail: RefCell::new(Hold::default()),
            queued: Cell::new(false),
            dead: Cell::new(false),
        }
    }

    /// Completes reply slot `seq` and asks the worker to service the
    /// connection.
    pub fn complete(&self, seq: u64, reply: Reply) {
        self.out.borrow_mut().complete(seq, reply);
        self.mark_ready();
    }

    /// Adds a ready reply.
    pub fn push(&self, reply: Reply) {
        self.out.borrow_mut().push(reply);
        self.mark_ready();
    }

    /// Queues the connection for servicing (once per round).
    pub fn mark_ready(&self) {
        if !self.dead.get() && !self.queued.replace(true) {
            self.local.ready.borrow_mut().push(self.slot);
            self.local.wake();
        }
    }

    /// The worker took the connection off the ready list.
    pub fn unqueue(&self) {
        self.queued.set(false);
    }

    /// The connection is closed; late callbacks must not queue it.
    pub fn kill(&self) {
        self.dead.set(true);
    }
}
