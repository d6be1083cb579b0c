//! `Barrier`: a reusable barrier over any set of threads of the program
//! (all of them by default), built from trusts, with the transitive
//! semantics LOCO argues for.
//!
//! One *coordinator* property (on the first participant) counts arrivals;
//! every participant thread has a *gate* property of its own. A fiber
//! arrives with one asynchronous request to the coordinator and waits on
//! its gate with the local shortcut; the last arrival's closure, on the
//! coordinator, opens every gate with one asynchronous request each. So a
//! phase costs two one-way messages on the critical path, and waiting
//! suspends only the fiber.
//!
//! *Transitive semantics*: before arriving, a fiber makes sure that every
//! request its thread issued earlier towards any participant thread (an
//! `apply_then`, say) has run: requests from one thread to one trustee run
//! in issue order, so one no-op round trip to each participant that still
//! has requests of this thread in flight suffices (none when nothing is in
//! flight). Hence, after `wait` returns anywhere, everything any
//! participant issued before its `wait` towards any participant is done.
//!
//! *One fiber per thread per phase*: a fiber claims its thread's gate as
//! the first step of `wait` and gives it up only when it passes, so a
//! second fiber of the thread arriving at any moment in between — while
//! the first waits, and also after the gate opened for it but before it
//! ran — is refused with a panic, before it arrives. The gate wakes its
//! fiber only while that fiber is suspended on it (a flag set by the
//! fiber's last check, with no suspension point between the check and
//! the suspension), so a wake never reaches a fiber waiting for
//! something else.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::runtime::context;
use crate::{entrust_on, Trust};

/// The arrival counter, on the first participant.
#[derive(Serialize, Deserialize)]
struct Coordinator {
    parties: usize,
    arrived: usize,
    generation: u64,
    gates: Vec<Trust<Gate>>,
}

impl Coordinator {
    fn arrive(&mut self) {
        self.arrived += 1;
        if self.arrived == self.parties {
            self.arrived = 0;
            self.generation += 1;
            for g in &self.gates {
                g.apply_with_then(|g, generation| g.open(generation), self.generation, |()| {});
            }
        }
    }
}

/// One participant thread's side of the barrier.
#[derive(Default, Serialize, Deserialize)]
struct Gate {
    /// The last phase the coordinator completed.
    opened: u64,
    /// The phases this thread has passed.
    passed: u64,
    /// The fiber of this thread inside `wait`, from its first step until
    /// it passes.
    #[serde(skip)]
    waiter: Option<u32>,
    /// Whether that fiber is suspended on the gate (only then may `open`
    /// wake it).
    #[serde(skip)]
    asleep: bool,
}

impl Gate {
    fn open(&mut self, generation: u64) {
        self.opened = self.opened.max(generation);
        if std::mem::take(&mut self.asleep) {
            if let (Some(f), Some(w)) = (self.waiter, context::current()) {
                w.make_ready(f);
            }
        }
    }
}

/// Gives up a fiber's claim on its gate if `wait` unwinds before it passed.
struct Claim<'a> {
    gate: &'a Trust<Gate>,
    fiber: u32,
    passed: bool,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.passed {
            let fiber = self.fiber;
            // The gate is on this thread: this runs at once, without
            // suspending, also while unwinding.
            self.gate.apply_then(
                move |g| {
                    if g.waiter == Some(fiber) {
                        g.waiter = None;
                        g.asleep = false;
                    }
                },
                |()| {},
            );
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Inner {
    threads: Vec<usize>,
    gates: Vec<Trust<Gate>>,
    coordinator: Trust<Coordinator>,
}

/// A reusable barrier over a set of threads of the program.
///
/// Each participant thread calls [`wait`](Barrier::wait) once per phase
/// (from one fiber at a time); all return once all have arrived. Handles
/// are cheap to clone and travel to other processes as serialized values
/// (in a `spawn_with` argument, say).
///
/// ```
/// # gossamer::Runtime::builder().workers(3).build().unwrap().block_on(|| {
/// use gossamer::objects::Barrier;
/// let barrier = Barrier::new(); // all 3 threads
/// let counter = gossamer::trustee(0).entrust(0u64);
/// let fibers: Vec<_> = (1..3)
///     .map(|t| {
///         gossamer::spawn_with(t, |(b, c): (Barrier, gossamer::Trust<u64>)| {
///             for phase in 1..=5u64 {
///                 c.apply_then(|v| *v += 1, |()| {}); // completes before the barrier
///                 b.wait();
///                 assert!(c.apply(|v| *v) >= 2 * phase);
///                 b.wait();
///             }
///         }, (barrier.clone(), counter.clone()))
///     })
///     .collect();
/// for _ in 1..=5 {
///     barrier.wait();
///     barrier.wait();
/// }
/// fibers.into_iter().for_each(|f| f.join().unwrap());
/// assert_eq!(counter.apply(|v| *v), 10);
/// # });
/// ```
#[derive(Clone)]
pub struct Barrier {
    inner: Arc<Inner>,
}

impl Barrier {
    /// A barrier over every thread of the program.
    ///
    /// # Panics
    /// Outside the runtime's threads, or in delegated context (it entrusts
    /// properties on other processes, which waits for them).
    pub fn new() -> Barrier {
        Barrier::over(0..crate::threads())
    }

    /// A barrier over the given threads (global thread ids; duplicates are
    /// ignored).
    ///
    /// # Panics
    /// As [`new`](Barrier::new); if `threads` is empty or names a thread
    /// the program does not have.
    pub fn over(threads: impl IntoIterator<Item = usize>) -> Barrier {
        let mut threads: Vec<usize> = threads.into_iter().collect();
        threads.sort_unstable();
        threads.dedup();
        assert!(!threads.is_empty(), "gossamer: a barrier needs at least one thread");
        let gates: Vec<Trust<Gate>> = threads.iter().map(|&t| entrust_on(t, Gate::default())).collect();
        let coordinator = entrust_on(
            threads[0],
            Coordinator { parties: threads.len(), arrived: 0, generation: 0, gates: gates.clone() },
        );
        tracing::debug!(parties = threads.len(), "barrier made");
        Barrier { inner: Arc::new(Inner { threads, gates, coordinator }) }
    }

    /// The participant threads.
    pub fn threads(&self) -> &[usize] {
        &self.inner.threads
    }

    /// Waits until every participant has called `wait` for this phase, and
    /// returns the phase's number (1, 2, …). Only the calling fiber waits;
    /// its thread serves meanwhile.
    ///
    /// # Panics
    /// If the calling thread is not a participant, if another fiber of this
    /// thread is already waiting at this barrier, or in delegated context.
    pub fn wait(&self) -> u64 {
        let w = context::current().expect("gossamer: Barrier::wait outside the runtime");
        w.check_may_block();
        let inner = &*self.inner;
        let Ok(me) = inner.threads.binary_search(&w.index) else {
            panic!("gossamer: thread {} is not a participant of this barrier ({:?})", w.index, inner.threads)
        };
        let gate = &inner.gates[me];
        let fiber = w.current_fiber();
        // Claim the gate before anything else, until this fiber passes.
        let claimed = gate.apply(move |g| match g.waiter {
            Some(f) if f != fiber => false,
            _ => {
                g.waiter = Some(fiber);
                true
            }
        });
        assert!(
            claimed,
            "gossamer: two fibers of one thread wait at the same barrier; each participant thread arrives once per phase"
        );
        let mut claim = Claim { gate, fiber, passed: false };
        // Transitive semantics: what this thread issued towards the other
        // participants has run before we arrive.
        for (i, &t) in inner.threads.iter().enumerate() {
            if t != w.index && w.has_outstanding(t) {
                inner.gates[i].apply_with(|_, ()| (), ());
            }
        }
        inner.coordinator.apply_with_then(|c, ()| c.arrive(), (), |()| {});
        loop {
            // The gate is on this thread (local shortcut): nothing suspends
            // between setting `asleep` and the suspension below.
            let passed = gate.apply(move |g| {
                if g.opened > g.passed {
                    g.passed += 1;
                    g.waiter = None;
                    g.asleep = false;
                    Some(g.passed)
                } else {
                    g.asleep = true;
                    None
                }
            });
            if let Some(phase) = passed {
                claim.passed = true;
                return phase;
            }
            crate::fiber::suspend();
        }
    }
}

impl Default for Barrier {
    fn default() -> Self {
        Barrier::new()
    }
}

impl std::fmt::Debug for Barrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Barrier").field("threads", &self.inner.threads).finish()
    }
}

impl Serialize for Barrier {
    /// Writes the handle's trusts as tokens (see `Trust`'s serialization).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.inner.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Barrier {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Inner::deserialize(d).map(|inner| Barrier { inner: Arc::new(inner) })
    }
}
