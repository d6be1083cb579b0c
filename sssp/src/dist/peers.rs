//! Every thread's handles on all parts, and the outbox through which a
//! thread sends batches to them.
//!
//! The parts' trusts are installed once per thread (a thread-local
//! directory) so that a step does not carry `parts` trusts each time, and
//! are removed before the program ends, so that every part is dropped.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use gossamer::{Transferable, Trust};

use super::packed::{Packed, Record};
use super::part::{Part, Relax};
use crate::graph::Arc;

thread_local! {
    static PEERS: RefCell<Option<Rc<Vec<Trust<Part>>>>> = const { RefCell::new(None) };
}

/// Installs the directory on the calling thread.
pub fn install(parts: Vec<Trust<Part>>) {
    PEERS.with(|p| *p.borrow_mut() = Some(Rc::new(parts)));
}

/// Removes it (dropping this thread's trusts).
pub fn uninstall() {
    PEERS.with(|p| p.borrow_mut().take());
}

/// The directory of the calling thread.
///
/// # Panics
/// If none is installed.
pub fn get() -> Rc<Vec<Trust<Part>>> {
    PEERS.with(|p| p.borrow().clone()).expect("gossamer-sssp: no parts installed on this thread")
}

/// What a batch does when it reaches its part.
pub trait Deliver: Transferable + Record {
    /// Applies `batch` to the part.
    fn deliver(part: &mut Part, batch: Vec<Self>);

    /// Applies a batch packed by another process.
    ///
    /// # Panics
    /// If the bytes are not whole records (the panic is reported to the
    /// sender's thread as a failed delegation).
    fn deliver_packed(part: &mut Part, batch: Packed) {
        match batch.unpack::<Self>() {
            Ok(b) => Self::deliver(part, b),
            Err(e) => panic!("gossamer-sssp: {e}"),
        }
    }
}

impl Deliver for Arc {
    fn deliver(part: &mut Part, batch: Vec<Self>) {
        part.receive(batch);
    }
}

impl Deliver for Relax {
    fn deliver(part: &mut Part, batch: Vec<Self>) {
        part.relax_all(&batch);
    }
}

/// Batches sent and not yet acknowledged before a sender waits.
const IN_FLIGHT: usize = 64;

/// Sends batches to parts as asynchronous delegation (`apply_with_then`)
/// and counts the acknowledgements, so a step ends only when everything it
/// sent has been applied: that is what makes the end of a round a global
/// quiescence point.
pub struct Outbox<M: Deliver> {
    peers: Rc<Vec<Trust<Part>>>,
    /// Parts in other processes (their batches travel packed).
    far: Vec<bool>,
    pending: Rc<Cell<usize>>,
    buffers: Vec<Vec<M>>,
    batch: usize,
    /// Batches sent.
    pub batches: u64,
    /// Items sent.
    pub items: u64,
}

impl<M: Deliver> Outbox<M> {
    /// An outbox over the installed directory, filling batches of `batch`.
    pub fn new(batch: usize) -> Self {
        let peers = get();
        let buffers = (0..peers.len()).map(|_| Vec::new()).collect();
        let topo = gossamer::topology();
        let far = (0..peers.len()).map(|t| topo.rank_of(t) != topo.rank).collect();
        Outbox { peers, far, pending: Rc::new(Cell::new(0)), buffers, batch, batches: 0, items: 0 }
    }

    /// Queues `m` for part `t`; sends the buffer when it is full.
    #[inline]
    pub fn push(&mut self, t: usize, m: M) {
        let b = &mut self.buffers[t];
        b.push(m);
        if b.len() >= self.batch {
            let full = std::mem::replace(b, Vec::with_capacity(self.batch));
            self.send(t, full);
        }
    }

    /// Sends a whole batch to part `t`.
    pub fn send(&mut self, t: usize, batch: Vec<M>) {
        if batch.is_empty() {
            return;
        }
        while self.pending.get() >= IN_FLIGHT {
            gossamer::yield_now();
        }
        self.batches += 1;
        self.items += batch.len() as u64;
        self.pending.set(self.pending.get() + 1);
        let pending = self.pending.clone();
        let done = move |()| pending.set(pending.get() - 1);
        if self.far[t] {
            // As plain bytes: a `Vec<u8>` is its own format across
            // processes, and moves into the request without a copy.
            let bytes = Packed::pack(&batch).0;
            self.peers[t].apply_with_then(|p, b: Vec<u8>| M::deliver_packed(p, Packed(b)), bytes, done);
        } else {
            self.peers[t].apply_with_then(|p, b: Vec<M>| M::deliver(p, b), batch, done);
        }
    }

    /// Sends every partial buffer and waits until all batches are applied.
    pub fn finish(&mut self) {
        for t in 0..self.buffers.len() {
            let b = std::mem::take(&mut self.buffers[t]);
            self.send(t, b);
        }
        while self.pending.get() > 0 {
            gossamer::yield_now();
        }
    }
}
