//! Where a worker's time goes, for the dedicated-trustee controller: one
//! loop pass in `SAMPLE` is timed (three clock reads), its time split into
//! serving the request slots and the client side (fibers, issuing and
//! completing requests); passes that found nothing to do count as idle.
//! The totals, scaled by `SAMPLE`, are published to the worker's entry in
//! the runtime's tuning table with plain stores.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::Worker;

/// One pass in this many is timed.
const SAMPLE: u32 = 8;

/// A dedicated trustee that served in its last pass runs its fibers only
/// every this many passes (they cannot move to another thread, and must
/// not starve).
pub(super) const DEDICATED_FIBER_TURN: u32 = 8;

#[derive(Default)]
pub(super) struct Meter {
    pass: Cell<u32>,
    serve_ns: Cell<u64>,
    client_ns: Cell<u64>,
    /// Whether the last pass served a batch.
    pub(super) served_last: Cell<bool>,
}

impl Meter {
    /// Starts a pass: its number, and the time if it is sampled.
    #[inline]
    pub(super) fn begin(&self) -> (u32, Option<Instant>) {
        let p = self.pass.get().wrapping_add(1);
        self.pass.set(p);
        (p, (p % SAMPLE == 0).then(Instant::now))
    }
}

impl Worker {
    /// Ends a sampled pass that started at `start` and served from
    /// `serve.0` to `serve.1`; `served`: it served a batch; `busy`: it did
    /// anything at all.
    #[cold]
    pub(super) fn meter_pass(&self, start: Instant, serve: (Instant, Instant), served: bool, busy: bool) {
        if !busy {
            return;
        }
        let m = &self.meter;
        let total = start.elapsed().as_nanos() as u64;
        let serving = if served { serve.1.duration_since(serve.0).as_nanos() as u64 } else { 0 };
        let client = total.saturating_sub(serving);
        m.serve_ns.set(m.serve_ns.get() + serving * u64::from(SAMPLE));
        m.client_ns.set(m.client_ns.get() + client * u64::from(SAMPLE));
        let tune = self.shared.tune(self.index);
        tune.serve_ns.store(m.serve_ns.get(), Ordering::Relaxed);
        tune.fiber_ns.store(m.client_ns.get(), Ordering::Relaxed);
    }
}
