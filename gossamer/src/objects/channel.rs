//! Bounded channels across the program: multi-producer single-consumer
//! ([`channel`]) and multi-producer multi-consumer ([`mpmc_channel`]).
//!
//! The queue is a property on one thread (by default the creating one, so
//! that a receiver there takes items with the local shortcut, no message).
//! Ends are trusts to it: they are `Send`, and they serialize (as trust
//! tokens) into `spawn_with` or `apply_with` arguments, so they reach any
//! thread of any process. `send` on a full queue and `recv` on an empty one
//! suspend only the calling fiber: it leaves a bell (a property on its own
//! thread) in the queue, and the operation that frees room or brings an
//! item rings it.
//!
//! The ends' lifetimes are trusts' lifetimes too: the senders share one
//! "senders alive" property whose drop (after the last sender, wherever it
//! was) closes the sending side, and likewise for receivers.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::bell::{self, Bell};
use crate::runtime::context;
use crate::{entrust_on, Transferable, Trust};

/// `send` failed: every receiver is gone. The value comes back.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("sending on a channel whose receivers are all gone")]
pub struct SendError<T>(pub T);

/// `recv` failed: every sender is gone and the queue is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("receiving on an empty channel whose senders are all gone")]
pub struct RecvError;

/// `try_recv` found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    /// The queue is empty for now.
    #[error("the channel is empty")]
    Empty,
    /// The queue is empty and every sender is gone.
    #[error("the channel is empty and its senders are all gone")]
    Disconnected,
}

/// The queue, on its trustee.
#[derive(Serialize, Deserialize)]
#[serde(bound = "T: Transferable")]
struct Queue<T> {
    items: VecDeque<T>,
    capacity: usize,
    senders_gone: bool,
    receivers_gone: bool,
    /// Bells of fibers waiting for an item, and for room.
    recv_waiting: VecDeque<Trust<Bell>>,
    send_waiting: VecDeque<Trust<Bell>>,
}

/// What a push attempt did.
#[derive(Serialize, Deserialize)]
enum Push<T> {
    Done,
    /// No receiver is left: the value comes back.
    Closed(T),
    /// Full: the value comes back (and the bell, if one came, is queued).
    Full(T),
}

/// What a pop attempt did.
#[derive(Serialize, Deserialize)]
enum Pop<T> {
    Item(T),
    Closed,
    /// Empty (and the bell, if one came, is queued).
    Empty,
}

impl<T: Transferable> Queue<T> {
    fn push(&mut self, v: T, bell: Option<Trust<Bell>>) -> Push<T> {
        if self.receivers_gone {
            return Push::Closed(v);
        }
        if self.items.len() >= self.capacity {
            self.send_waiting.extend(bell);
            return Push::Full(v);
        }
        self.items.push_back(v);
        if let Some(b) = self.recv_waiting.pop_front() {
            bell::ring(&b);
        }
        Push::Done
    }

    fn pop(&mut self, bell: Option<Trust<Bell>>) -> Pop<T> {
        match self.items.pop_front() {
            Some(v) => {
                if let Some(b) = self.send_waiting.pop_front() {
                    bell::ring(&b);
                }
                Pop::Item(v)
            }
            None if self.senders_gone => Pop::Closed,
            None => {
                self.recv_waiting.extend(bell);
                Pop::Empty
            }
        }
    }

    fn close_senders(&mut self) {
        self.senders_gone = true;
        self.recv_waiting.drain(..).for_each(|b| bell::ring(&b));
    }

    fn close_receivers(&mut self) {
        self.receivers_gone = true;
        self.items.clear();
        self.send_waiting.drain(..).for_each(|b| bell::ring(&b));
    }
}

/// Shared by all senders (or all receivers): dropped after the last of
/// them, it closes its side of the queue.
#[derive(Serialize, Deserialize)]
#[serde(bound = "T: Transferable")]
struct Side<T: Transferable> {
    queue: Option<Trust<Queue<T>>>,
    senders: bool,
}

impl<T: Transferable> Drop for Side<T> {
    fn drop(&mut self) {
        let Some(q) = self.queue.take() else { return };
        // At shutdown the runtime drops what is left by itself.
        if context::current().is_some_and(|w| !w.cleaning.get()) {
            if self.senders {
                q.apply_with_then(|q, ()| q.close_senders(), (), |()| {});
            } else {
                q.apply_with_then(|q, ()| q.close_receivers(), (), |()| {});
            }
        }
    }
}

/// The sending end of a channel; clone it for more producers, send it (or
/// a clone) to any thread of any process.
#[derive(Serialize, Deserialize)]
#[serde(bound = "T: Transferable")]
pub struct Sender<T: Transferable> {
    queue: Trust<Queue<T>>,
    alive: Trust<Side<T>>,
}

/// The receiving end of a [`channel`]: one consumer (it can move, to any
/// thread of any process, but not be cloned).
#[derive(Serialize, Deserialize)]
#[serde(bound = "T: Transferable")]
pub struct Receiver<T: Transferable> {
    queue: Trust<Queue<T>>,
    alive: Trust<Side<T>>,
}

/// A receiving end of an [`mpmc_channel`]: clone it for more consumers;
/// each item goes to exactly one of them.
#[derive(Serialize, Deserialize)]
#[serde(bound = "T: Transferable")]
pub struct MultiReceiver<T: Transferable> {
    queue: Trust<Queue<T>>,
    alive: Trust<Side<T>>,
}

impl<T: Transferable> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender { queue: self.queue.clone(), alive: self.alive.clone() }
    }
}

impl<T: Transferable> Clone for MultiReceiver<T> {
    fn clone(&self) -> Self {
        MultiReceiver { queue: self.queue.clone(), alive: self.alive.clone() }
    }
}

/// A new queue with its senders' and receivers' sides.
type Parts<T> = (Trust<Queue<T>>, Trust<Side<T>>, Trust<Side<T>>);

fn make<T: Transferable>(thread: usize, capacity: usize) -> Parts<T> {
    assert!(capacity > 0, "gossamer: a channel needs room for at least one item");
    let q = Queue {
        items: VecDeque::new(),
        capacity,
        senders_gone: false,
        receivers_gone: false,
        recv_waiting: VecDeque::new(),
        send_waiting: VecDeque::new(),
    };
    let queue = entrust_on(thread, q);
    // Made empty and filled in place: a side that travels serialized would
    // otherwise close the queue when the sent original drops here.
    let side = |senders| {
        let s = entrust_on(thread, Side { queue: None, senders });
        s.apply_with(|s, q| s.queue = Some(q), queue.clone());
        s
    };
    let (senders, receivers) = (side(true), side(false));
    (queue, senders, receivers)
}

/// A bounded multi-producer single-consumer channel holding up to
/// `capacity` items, its queue on the calling thread.
///
/// ```
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// let (tx, rx) = gossamer::objects::channel::<String>(4);
/// let producer = gossamer::spawn_with(1, |tx: gossamer::objects::Sender<String>| {
///     for i in 0..10 {
///         tx.send(format!("item {i}")).unwrap(); // waits while the queue is full
///     }
/// }, tx);
/// for i in 0..10 {
///     assert_eq!(rx.recv().unwrap(), format!("item {i}")); // the local shortcut
/// }
/// producer.join().unwrap();
/// assert!(rx.recv().is_err()); // the only sender is gone
/// # });
/// ```
///
/// # Panics
/// Outside the runtime's threads, or if `capacity` is 0.
pub fn channel<T: Transferable>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    channel_on(crate::runtime::context::worker().index, capacity)
}

/// As [`channel`], with the queue on thread `thread` of any process (put it
/// where the consumer runs).
///
/// # Panics
/// As [`channel`]; in delegated context if `thread` is in another process.
pub fn channel_on<T: Transferable>(thread: usize, capacity: usize) -> (Sender<T>, Receiver<T>) {
    let (queue, s, r) = make(thread, capacity);
    (Sender { queue: queue.clone(), alive: s }, Receiver { queue, alive: r })
}

/// A bounded multi-producer multi-consumer channel holding up to `capacity`
/// items, its queue on the calling thread.
///
/// ```
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// use gossamer::objects::{mpmc_channel, MultiReceiver};
/// let (tx, rx) = mpmc_channel::<u64>(8);
/// let consumers: Vec<_> = (0..2)
///     .map(|t| gossamer::spawn_with(t, |rx: MultiReceiver<u64>| {
///         let mut sum = 0;
///         while let Ok(v) = rx.recv() { sum += v; }
///         sum
///     }, rx.clone()))
///     .collect();
/// drop(rx);
/// for v in 1..=100 { tx.send(v).unwrap(); }
/// drop(tx);
/// let total: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
/// assert_eq!(total, 5050);
/// # });
/// ```
///
/// # Panics
/// As [`channel`].
pub fn mpmc_channel<T: Transferable>(capacity: usize) -> (Sender<T>, MultiReceiver<T>) {
    mpmc_channel_on(crate::runtime::context::worker().index, capacity)
}

/// As [`mpmc_channel`], with the queue on thread `thread` of any process.
///
/// # Panics
/// As [`channel_on`].
pub fn mpmc_channel_on<T: Transferable>(thread: usize, capacity: usize) -> (Sender<T>, MultiReceiver<T>) {
    let (queue, s, r) = make(thread, capacity);
    (Sender { queue: queue.clone(), alive: s }, MultiReceiver { queue, alive: r })
}

impl<T: Transferable> Sender<T> {
    /// Sends `v`, suspending the calling fiber while the queue is full.
    ///
    /// # Errors
    /// If every receiver is gone; the value comes back.
    ///
    /// # Panics
    /// Outside the runtime, or in delegated context.
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        let mut v = match self.queue.apply_with(|q, v| q.push(v, None), v) {
            Push::Done => return Ok(()),
            Push::Closed(v) => return Err(SendError(v)),
            Push::Full(v) => v,
        };
        // Slow path: wait for room with a bell of our own.
        let bell = bell::new_bell();
        let mut seen = 0;
        loop {
            match self.queue.apply_with(|q, (v, b)| q.push(v, Some(b)), (v, bell.clone())) {
                Push::Done => return Ok(()),
                Push::Closed(back) => return Err(SendError(back)),
                Push::Full(back) => v = back,
            }
            seen = bell::wait(&bell, seen);
        }
    }

    /// Sends `v` if there is room now.
    ///
    /// # Errors
    /// `Ok(Some(v))` hands the value back when the queue is full; `Err`
    /// when every receiver is gone.
    pub fn try_send(&self, v: T) -> Result<Option<T>, SendError<T>> {
        match self.queue.apply_with(|q, v| q.push(v, None), v) {
            Push::Done => Ok(None),
            Push::Closed(v) => Err(SendError(v)),
            Push::Full(v) => Ok(Some(v)),
        }
    }

    /// The thread that holds the queue.
    pub fn queue_thread(&self) -> usize {
        self.queue.trustee().index()
    }
}

/// Receives from `queue`, suspending while it is empty.
fn recv<T: Transferable>(queue: &Trust<Queue<T>>) -> Result<T, RecvError> {
    match queue.apply_with(|q, ()| q.pop(None), ()) {
        Pop::Item(v) => return Ok(v),
        Pop::Closed => return Err(RecvError),
        Pop::Empty => {}
    }
    let bell = bell::new_bell();
    let mut seen = 0;
    loop {
        match queue.apply_with(|q, b| q.pop(Some(b)), bell.clone()) {
            Pop::Item(v) => return Ok(v),
            Pop::Closed => return Err(RecvError),
            Pop::Empty => {}
        }
        seen = bell::wait(&bell, seen);
    }
}

fn try_recv<T: Transferable>(queue: &Trust<Queue<T>>) -> Result<T, TryRecvError> {
    match queue.apply_with(|q, ()| q.pop(None), ()) {
        Pop::Item(v) => Ok(v),
        Pop::Closed => Err(TryRecvError::Disconnected),
        Pop::Empty => Err(TryRecvError::Empty),
    }
}

impl<T: Transferable> Receiver<T> {
    /// Takes the next item, suspending the calling fiber (only) while the
    /// queue is empty.
    ///
    /// # Errors
    /// When the queue is empty and every sender is gone.
    ///
    /// # Panics
    /// Outside the runtime, or in delegated context.
    pub fn recv(&self) -> Result<T, RecvError> {
        recv(&self.queue)
    }

    /// Takes the next item if there is one.
    ///
    /// # Errors
    /// When the queue is empty ([`TryRecvError::Disconnected`] if every
    /// sender is gone too).
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        try_recv(&self.queue)
    }

    /// The thread that holds the queue.
    pub fn queue_thread(&self) -> usize {
        self.queue.trustee().index()
    }
}

impl<T: Transferable> MultiReceiver<T> {
    /// As [`Receiver::recv`]; each item goes to exactly one receiver.
    ///
    /// # Errors
    /// When the queue is empty and every sender is gone.
    pub fn recv(&self) -> Result<T, RecvError> {
        recv(&self.queue)
    }

    /// As [`Receiver::try_recv`].
    ///
    /// # Errors
    /// When the queue is empty.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        try_recv(&self.queue)
    }
}

impl<T: Transferable> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").field("queue", &self.queue).finish()
    }
}

impl<T: Transferable> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").field("queue", &self.queue).finish()
    }
}

impl<T: Transferable> std::fmt::Debug for MultiReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiReceiver").field("queue", &self.queue).finish()
    }
}
