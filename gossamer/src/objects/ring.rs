//! A broadcast ring: one writer, many readers, messages of any size, each
//! read once by every reader, with back-pressure when a reader falls
//! `capacity` messages behind.
//!
//! As in LOCO's ring, the writer pushes: each reader has an *inbox*
//! property on its own thread, and a write is one asynchronous request to
//! each inbox (batched with the writer's other requests to that thread), so
//! a reader reads with the local shortcut and no message. The writer holds
//! a *credit* property on its own thread with the room left in every inbox;
//! a reader returns credit in batches of half its capacity, and the writer
//! waits (suspending its fiber only) when some inbox is full.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::runtime::context;
use crate::{entrust_on, Transferable, Trust};

/// The room the writer may still fill in each reader's inbox.
#[derive(Serialize, Deserialize)]
struct Credits {
    free: Vec<u64>,
    #[serde(skip)]
    fiber: Option<u32>,
}

impl Credits {
    fn refill(&mut self, reader: usize, n: u64) {
        self.free[reader] += n;
        if let Some(f) = self.fiber.take() {
            if let Some(w) = context::current() {
                w.make_ready(f);
            }
        }
    }
}

/// One reader's messages, on its thread.
#[derive(Serialize, Deserialize)]
#[serde(bound = "M: Transferable")]
struct Inbox<M> {
    items: VecDeque<M>,
    closed: bool,
    #[serde(skip)]
    fiber: Option<u32>,
    /// Messages read since credit was last returned.
    taken: u64,
    ack_every: u64,
    reader: usize,
    credits: Trust<Credits>,
}

impl<M: Transferable> Inbox<M> {
    fn wake(&mut self) {
        if let Some(f) = self.fiber.take() {
            if let Some(w) = context::current() {
                w.make_ready(f);
            }
        }
    }

    fn push(&mut self, m: M) {
        self.items.push_back(m);
        self.wake();
    }

    fn close(&mut self) {
        self.closed = true;
        self.wake();
    }
}

/// What a read found.
#[derive(Serialize, Deserialize)]
enum Read<M> {
    Message(M),
    Closed,
    Wait,
}

/// The writing end of a [`ring`]: it lives on the thread that made the
/// ring and writes from there. Dropping it closes the ring: readers get
/// `None` once they have read everything written before.
pub struct RingWriter<M: Transferable + Clone> {
    credits: Trust<Credits>,
    inboxes: Vec<Trust<Inbox<M>>>,
    written: u64,
}

/// One reader's end of a [`ring`]: it reads on the reader's thread (send it
/// there, in a `spawn_with` argument or with [`spawn_to`](crate::objects::spawn_to)
/// on [`inbox_thread`](RingReader::inbox_thread)).
#[derive(Serialize, Deserialize)]
#[serde(bound = "M: Transferable")]
pub struct RingReader<M: Transferable> {
    inbox: Trust<Inbox<M>>,
}

/// A broadcast ring from the calling thread to readers on `readers` (global
/// thread ids, one reader each, any process), each able to fall up to
/// `capacity` messages behind the writer. Returns the writer and the
/// readers' ends, in the order of `readers`.
///
/// ```
/// # gossamer::Runtime::builder().workers(3).build().unwrap().block_on(|| {
/// use gossamer::objects::{ring, RingReader};
/// let (mut writer, readers) = ring::<Vec<u8>>(&[1, 2], 4);
/// let fibers: Vec<_> = readers
///     .into_iter()
///     .enumerate()
///     .map(|(i, r)| gossamer::spawn_with(i + 1, |mut r: RingReader<Vec<u8>>| {
///         let mut total = 0;
///         while let Some(m) = r.read() { total += m.len(); }
///         total
///     }, r))
///     .collect();
/// for n in 0..100 {
///     writer.write(vec![7u8; n]); // waits while a reader is 4 behind
/// }
/// drop(writer); // closes the ring
/// for f in fibers {
///     assert_eq!(f.join().unwrap(), (0..100).sum::<usize>());
/// }
/// # });
/// ```
///
/// # Panics
/// Outside the runtime's threads, in delegated context, if `capacity` is 0
/// or a thread is named twice.
pub fn ring<M: Transferable + Clone>(readers: &[usize], capacity: usize) -> (RingWriter<M>, Vec<RingReader<M>>) {
    assert!(capacity > 0, "gossamer: a ring needs room for at least one message");
    let mut sorted = readers.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), readers.len(), "gossamer: a ring has one reader per thread");
    let capacity = capacity as u64;
    let credits = crate::local_trustee().entrust(Credits { free: vec![capacity; readers.len()], fiber: None });
    let inboxes: Vec<Trust<Inbox<M>>> = readers
        .iter()
        .enumerate()
        .map(|(reader, &t)| {
            let inbox = Inbox {
                items: VecDeque::new(),
                closed: false,
                fiber: None,
                taken: 0,
                ack_every: (capacity / 2).max(1),
                reader,
                credits: credits.clone(),
            };
            entrust_on(t, inbox)
        })
        .collect();
    let ends = inboxes.iter().map(|i| RingReader { inbox: i.clone() }).collect();
    (RingWriter { credits, inboxes, written: 0 }, ends)
}

impl<M: Transferable + Clone> RingWriter<M> {
    /// Writes `m` for every reader, suspending the calling fiber while some
    /// reader is `capacity` messages behind.
    ///
    /// # Panics
    /// On another thread than the one that made the ring, or in delegated
    /// context.
    pub fn write(&mut self, m: M) {
        assert!(self.credits.is_local(), "gossamer: a ring is written from the thread that made it");
        let w = context::current().expect("gossamer: RingWriter::write outside the runtime");
        w.check_may_block();
        let fiber = w.current_fiber();
        loop {
            let ok = self.credits.apply(move |c| {
                if c.free.iter().all(|&f| f > 0) {
                    c.free.iter_mut().for_each(|f| *f -= 1);
                    c.fiber = None;
                    true
                } else {
                    c.fiber = Some(fiber);
                    false
                }
            });
            if ok {
                break;
            }
            crate::fiber::suspend();
        }
        if let Some((last, rest)) = self.inboxes.split_last() {
            for inbox in rest {
                inbox.apply_with_then(|ib, m| ib.push(m), m.clone(), |()| {});
            }
            last.apply_with_then(|ib, m| ib.push(m), m, |()| {});
        }
        self.written += 1;
    }

    /// Messages written so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

impl<M: Transferable + Clone> Drop for RingWriter<M> {
    fn drop(&mut self) {
        if context::current().is_some_and(|w| !w.cleaning.get()) {
            for inbox in &self.inboxes {
                inbox.apply_with_then(|ib, ()| ib.close(), (), |()| {});
            }
        }
    }
}

impl<M: Transferable> RingReader<M> {
    /// The next message, in write order, suspending the calling fiber while
    /// none has arrived; `None` once the writer is gone and everything it
    /// wrote has been read.
    ///
    /// # Panics
    /// On another thread than the reader's (see
    /// [`inbox_thread`](RingReader::inbox_thread)), or in delegated context.
    pub fn read(&mut self) -> Option<M> {
        assert!(
            self.inbox.is_local(),
            "gossamer: a ring reader reads on its own thread ({}); start the reading fiber there",
            self.inbox.trustee().index()
        );
        let w = context::current().expect("gossamer: RingReader::read outside the runtime");
        w.check_may_block();
        let fiber = w.current_fiber();
        loop {
            let r = self.inbox.apply(move |ib| match ib.items.pop_front() {
                Some(m) => {
                    ib.taken += 1;
                    if ib.taken >= ib.ack_every {
                        let n = std::mem::take(&mut ib.taken);
                        ib.credits.apply_with_then(|c, (r, n)| c.refill(r, n), (ib.reader, n), |()| {});
                    }
                    Read::Message(m)
                }
                None if ib.closed => Read::Closed,
                None => {
                    ib.fiber = Some(fiber);
                    Read::Wait
                }
            });
            match r {
                Read::Message(m) => return Some(m),
                Read::Closed => return None,
                Read::Wait => crate::fiber::suspend(),
            }
        }
    }

    /// The thread this reader reads on.
    pub fn inbox_thread(&self) -> usize {
        self.inbox.trustee().index()
    }
}
