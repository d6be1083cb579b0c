//! How Trust<T> clients issue and wait: per-thread completion counters for
//! `apply_then` issuers, the loop that keeps a window of requests in
//! flight, the back-off of a waiting issuer, and the yield that keeps a
//! blocking client from monopolising its thread through the local shortcut.
//!
//! `then` callbacks run later on the issuing thread, so they count into
//! thread-locals: no callback captures anything, and the issuing fiber (one
//! per client thread) reads the counters between bursts.

use std::cell::Cell;

thread_local! {
    static DONE: Cell<u64> = const { Cell::new(0) };
    static SUM: Cell<u64> = const { Cell::new(0) };
    static WRITES: Cell<u64> = const { Cell::new(0) };
    static BAD: Cell<u64> = const { Cell::new(0) };
}

/// What the callbacks of one thread counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Completed requests.
    pub done: u64,
    /// Sum of the values read back (wrapping).
    pub sum: u64,
    /// Completed writes.
    pub writes: u64,
    /// Answers that failed their check.
    pub bad: u64,
}

/// Zeroes this thread's counters.
pub fn reset() {
    DONE.set(0);
    SUM.set(0);
    WRITES.set(0);
    BAD.set(0);
}

/// This thread's counters.
pub fn snapshot() -> Tally {
    Tally { done: DONE.get(), sum: SUM.get(), writes: WRITES.get(), bad: BAD.get() }
}

/// Completed requests so far on this thread.
#[inline(always)]
pub fn done() -> u64 {
    DONE.get()
}

/// A read-back value arrived.
#[inline(always)]
pub fn complete(value: u64) {
    DONE.set(DONE.get() + 1);
    SUM.set(SUM.get().wrapping_add(value));
}

/// A read arrived; `ok` says whether it passed its check.
#[inline(always)]
pub fn complete_read(ok: bool) {
    DONE.set(DONE.get() + 1);
    BAD.set(BAD.get() + !ok as u64);
}

/// A write arrived; `ok` says whether it passed its check.
#[inline(always)]
pub fn complete_write(ok: bool) {
    DONE.set(DONE.get() + 1);
    WRITES.set(WRITES.get() + ok as u64);
    BAD.set(BAD.get() + !ok as u64);
}

/// Fiber yields without progress after which a waiting issuer also yields
/// the OS thread.
const PATIENCE: u32 = 64;

/// How an issuing fiber waits for answers.
///
/// A fiber that only yields keeps its worker busy: the worker never reaches
/// its idle path, so it never gives its core to another thread — which may
/// be the very trustee it waits for, when the cores are oversubscribed.
/// After [`PATIENCE`] fruitless yields the issuer therefore also yields the
/// OS thread (cheap when nothing else wants the core).
#[derive(Default)]
pub struct Backoff {
    idle: u32,
}

impl Backoff {
    /// Yields the fiber, and the thread if `progress` has been false for a while.
    #[inline]
    pub fn wait(&mut self, progress: bool) {
        if progress {
            self.idle = 0;
        } else {
            self.idle += 1;
        }
        gossamer::yield_now();
        if self.idle > PATIENCE {
            std::thread::yield_now();
        }
    }
}

/// Issues requests with `issue` until `stopped()`, keeping at most
/// `window` of them in flight, yielding after each burst so that the
/// thread flushes, serves and polls; then waits for every answer. `issue`
/// returns false when it issued nothing (which ends the burst). Returns how
/// many were issued. Call from the only issuing fiber of its thread, after
/// `reset`.
pub fn pump(window: usize, stopped: impl Fn() -> bool, mut issue: impl FnMut() -> bool) -> u64 {
    let window = window as u64;
    let mut issued = 0u64;
    let mut backoff = Backoff::default();
    let mut seen = 0;
    while !stopped() {
        let d = done();
        for _ in issued - d..window {
            if !issue() {
                break;
            }
            issued += 1;
        }
        backoff.wait(d != seen);
        seen = d;
    }
    while done() < issued {
        let d = done();
        backoff.wait(d != seen);
        seen = d;
    }
    issued
}

/// One client's run of asynchronous requests: [`reset`], then [`pump`],
/// then the check that every request's callback ran. Returns how many were
/// issued and what the callbacks counted.
pub fn pump_checked(
    window: usize,
    stopped: impl Fn() -> bool,
    issue: impl FnMut() -> bool,
) -> Result<(u64, Tally), String> {
    reset();
    let issued = pump(window, stopped, issue);
    let t = snapshot();
    if t.done != issued {
        return Err(format!("{} callbacks ran for {issued} requests", t.done));
    }
    Ok((issued, t))
}

/// Consecutive local operations after which a blocking client yields.
const LOCAL_RUN: u32 = 32;

/// Keeps a fiber that calls `apply` on trusts of its own thread from
/// monopolising the thread.
///
/// `apply` on a local trust runs the closure directly and never suspends, so
/// a fiber whose keys keep landing on its own trustee would run until the
/// measurement ends while the thread's other fibers and every other
/// thread's requests to this trustee wait. The client loop therefore yields
/// after [`LOCAL_RUN`] local operations in a row.
#[derive(Default)]
pub struct LocalRun {
    run: u32,
}

impl LocalRun {
    #[inline(always)]
    pub fn after(&mut self, local: bool) {
        if !local {
            self.run = 0;
            return;
        }
        self.run += 1;
        if self.run >= LOCAL_RUN {
            self.run = 0;
            gossamer::yield_now();
        }
    }
}
