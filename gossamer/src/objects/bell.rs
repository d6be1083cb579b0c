//! A bell: a property on a waiting fiber's own thread. The fiber checks it
//! with the local shortcut and suspends; whoever wants it to go on (on any
//! thread of any process) delegates [`Bell::ring`] to it, which makes the
//! fiber ready again. Only plain loads and stores on the fiber's thread, no
//! atomics: the wake-up is an ordinary request.

use serde::{Deserialize, Serialize};

use crate::runtime::context;
use crate::Trust;

/// How many times the bell rang, and who waits for the next ring.
#[derive(Default, Serialize, Deserialize)]
pub(crate) struct Bell {
    rung: u64,
    /// The waiting fiber, on the bell's own thread (meaningless elsewhere,
    /// hence never serialized).
    #[serde(skip)]
    fiber: Option<u32>,
}

impl Bell {
    /// Counts a ring and wakes the waiting fiber (on the bell's trustee).
    pub(crate) fn ring(&mut self) {
        self.rung += 1;
        if let Some(f) = self.fiber.take() {
            if let Some(w) = context::current() {
                w.make_ready(f);
            }
        }
    }
}

/// A bell for the calling fiber, on its own thread.
pub(crate) fn new_bell() -> Trust<Bell> {
    crate::local_trustee().entrust(Bell::default())
}

/// Rings `bell` from anywhere (delegated context included), without waiting.
pub(crate) fn ring(bell: &Trust<Bell>) {
    bell.apply_with_then(|b, ()| b.ring(), (), |()| {});
}

/// Suspends the calling fiber until `bell` (on this thread) has rung more
/// than `seen` times; returns the count.
///
/// # Panics
/// If the bell is on another thread, or in delegated context.
pub(crate) fn wait(bell: &Trust<Bell>, seen: u64) -> u64 {
    assert!(bell.is_local(), "gossamer: a fiber waits only on a bell of its own thread");
    let w = context::current().expect("gossamer: waiting outside the runtime");
    w.check_may_block();
    let fiber = w.current_fiber();
    loop {
        let rung = bell.apply(move |b| {
            if b.rung > seen {
                b.fiber = None;
            } else {
                b.fiber = Some(fiber);
            }
            b.rung
        });
        if rung > seen {
            return rung;
        }
        crate::fiber::suspend();
    }
}
