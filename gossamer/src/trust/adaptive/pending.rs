//! Per-thread counts of delegated requests still outstanding to adaptive
//! properties: a thread may run a closure in place only when none of its
//! delegated requests to that property is still outstanding, so that its
//! requests take effect in the order it issued them.
//!
//! Both ends run on the issuing thread: a [`Ticket`] is taken when a
//! request is delegated and dropped when its answer (or its callback) is
//! done with on that thread. The count is per thread, which is stricter
//! than per fiber: per-fiber order follows. Properties share a fixed array
//! of counters by a hash of their address: a count is exact per counter,
//! and a property whose counter another one shares may see requests as
//! outstanding that are not its own (it then waits, holds or delegates,
//! which is always allowed), never the reverse.
//!
//! A call that would run in place but finds requests of its thread to the
//! property still outstanding is *held* instead of delegated (see
//! [`hold`]): it waits on its thread, in issue order, until the answers
//! are in, and then runs in place. Delegating it would keep the thread's
//! count above zero for as long as it keeps requests in flight (a client
//! with a window of `apply_then` calls always has some), so that its calls
//! would stay delegated in lock mode for good. A later call to a property
//! with held calls is held behind them. When the count of a property
//! whose calls are held drops to zero, a fiber of the thread issues them
//! (`flush`): in place where the mode allows, delegated otherwise.
//!
//! Each thread also keeps, per trustee, whether it is *avoiding* it: after
//! it saw the trustee fall behind (its thread preempted or busy, on an
//! oversubscribed machine), it runs its calls to that trustee's adaptive
//! properties in place for a while, whatever their mode says, instead of
//! each property trying delegation on its own and stalling the thread's
//! requests behind a trustee that is not running. A call in place is
//! always allowed (every access holds the lock); only per-client order
//! restricts it, and that is checked as before. The stretch doubles with
//! each slow finding in a row and is forgotten once the thread sees the
//! trustee keep up.

use std::any::Any;
use std::cell::Cell;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::runtime::context;
use crate::runtime::worker::Worker;

/// Counters per thread (a power of two).
const BUCKETS: usize = 1024;
const _: () = assert!(BUCKETS.is_power_of_two());

/// Delegated calls between two checks of the delegate window's progress.
const CHECK_EVERY: u32 = 64;

/// Trustees a thread tracks (by trustee number modulo this; trustees that
/// share an entry share the decision, which is always allowed).
const TRUSTEES: usize = 64;

/// Calls in place after a first slow finding; doubled per finding in a
/// row, up to [`MAX_STRIKES`] doublings.
const AVOID_CALLS: u32 = 1 << 13;
const MAX_STRIKES: u8 = 9;

thread_local! {
    static AVOID: [Cell<u32>; TRUSTEES] = const { [const { Cell::new(0) }; TRUSTEES] };
    static STRIKES: [Cell<u8>; TRUSTEES] = const { [const { Cell::new(0) }; TRUSTEES] };
    static CALLS: Cell<u32> = const { Cell::new(0) };
    static PENDING: [Counts; BUCKETS] = const { [const { Counts::new() }; BUCKETS] };
    /// A fiber to issue held calls has been started and has not run yet.
    static FLUSH_DUE: Cell<bool> = const { Cell::new(false) };
}

/// One counter of a thread: delegated requests outstanding, and calls held
/// behind them, of the properties that share it.
struct Counts {
    pending: Cell<u32>,
    held: Cell<u32>,
}

impl Counts {
    const fn new() -> Counts {
        Counts { pending: Cell::new(0), held: Cell::new(0) }
    }
}

#[inline]
fn bucket(key: usize) -> usize {
    // Fibonacci hashing (the top bits of the product with 2^64 / phi), on
    // the address folded with itself shifted: properties made together lie
    // at a fixed stride, which a mask of some bits would fold onto a
    // fraction of the counters, and which the product alone spreads
    // unevenly at some strides. One multiplication: this runs on every
    // call (once: a delegated call's ticket takes the counter its route
    // found).
    let x = key as u64;
    ((x ^ (x >> 5)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - BUCKETS.trailing_zeros())) as usize
}

/// The calling thread's counter of a property: found once per call (the
/// hash of the property's address), read as often as the call needs.
#[derive(Clone, Copy)]
pub(crate) struct Counter(usize);

impl Counter {
    #[inline]
    pub(crate) fn of(key: usize) -> Counter {
        Counter(bucket(key))
    }

    #[inline]
    fn read(self, f: impl FnOnce(&Counts) -> bool) -> bool {
        PENDING.try_with(|p| f(&p[self.0])).unwrap_or(false)
    }

    /// True when the thread may have a delegated request to the property
    /// outstanding, or a call to it held (certainly, if it has one).
    #[inline]
    pub(crate) fn outstanding(self) -> bool {
        self.read(|c| c.pending.get() != 0 || c.held.get() != 0)
    }

    /// True when the thread holds a call to the property (or to one that
    /// shares its counter): a new call goes behind it.
    #[inline]
    pub(crate) fn held(self) -> bool {
        self.read(|c| c.held.get() != 0)
    }

    /// True when the thread has delegated requests to the property
    /// outstanding (held calls aside): a held call may not run in place yet.
    #[inline]
    pub(crate) fn delegated(self) -> bool {
        self.read(|c| c.pending.get() != 0)
    }
}

/// True every [`CHECK_EVERY`]-th delegated call of this thread.
#[inline]
pub(crate) fn check_due() -> bool {
    CALLS
        .try_with(|c| {
            let n = c.get().wrapping_add(1);
            c.set(n);
            n % CHECK_EVERY == 0
        })
        .unwrap_or(false)
}

/// True while this thread avoids delegating to trustee `t`; counts the
/// call against the stretch.
#[inline]
pub(crate) fn avoiding(t: usize) -> bool {
    AVOID
        .try_with(|a| {
            let c = &a[t % TRUSTEES];
            let n = c.get();
            if n == 0 {
                return false;
            }
            c.set(n - 1);
            true
        })
        .unwrap_or(false)
}

/// This thread found trustee `t` falling behind: avoid it for a stretch,
/// twice as long as the last one if that was a finding too.
pub(crate) fn trustee_slow(t: usize) {
    let _ = STRIKES.try_with(|s| {
        let s = &s[t % TRUSTEES];
        let n = s.get();
        s.set((n + 1).min(MAX_STRIKES));
        let _ = AVOID.try_with(|a| a[t % TRUSTEES].set(AVOID_CALLS << n));
    });
}

/// This thread found trustee `t` keeping up: the next finding starts the
/// stretches afresh.
pub(crate) fn trustee_keeps_up(t: usize) {
    let _ = STRIKES.try_with(|s| s[t % TRUSTEES].set(0));
}

/// One outstanding delegated request of this thread to one property; it
/// is counted until dropped. Not `Send`: it is dropped where it was taken.
pub(crate) struct Ticket {
    bucket: usize,
    _here: PhantomData<*const ()>,
}

impl Ticket {
    /// Counts one more outstanding request under `counter`.
    #[inline]
    pub(crate) fn take(counter: Counter) -> Ticket {
        let bucket = counter.0;
        let _ = PENDING.try_with(|p| p[bucket].pending.set(p[bucket].pending.get() + 1));
        Ticket { bucket, _here: PhantomData }
    }
}

impl Drop for Ticket {
    #[inline]
    fn drop(&mut self) {
        // At thread exit the counts may be gone already: nothing to count.
        let due = PENDING
            .try_with(|p| {
                let c = &p[self.bucket];
                let n = c.pending.get().saturating_sub(1);
                c.pending.set(n);
                n == 0 && c.held.get() != 0
            })
            .unwrap_or(false);
        if due {
            schedule_flush();
        }
    }
}

/// A call held on its thread behind the thread's outstanding requests to
/// its property (see the module documentation).
pub(crate) trait HeldCall {
    /// Issues the call on `w` if it may go now (in place only once the
    /// thread's requests to the property are answered; delegated at once,
    /// behind them), in
    /// delegated context (nothing it runs may suspend the issuing fiber);
    /// otherwise gives it back, to stay held.
    fn issue(self: Box<Self>, w: &Worker) -> Result<(), Box<dyn HeldCall>>;
}

/// The held calls of one thread, in issue order, with their counters.
type Queue = VecDeque<(usize, Box<dyn HeldCall>)>;

/// Holds `call` to the property `key`, behind the calling worker's
/// outstanding requests to it and its calls held before. Only on a worker.
pub(crate) fn hold(w: &Worker, key: usize, call: Box<dyn HeldCall>) {
    let b = bucket(key);
    PENDING.with(|p| p[b].held.set(p[b].held.get() + 1));
    with_queue(w, |q| q.push_back((b, call)));
    // Nothing outstanding any more (an answer came while the caller
    // decided): no answer would start the issue.
    if !PENDING.with(|p| p[b].pending.get() != 0) {
        schedule_flush();
    }
}

fn with_queue<R>(w: &Worker, f: impl FnOnce(&mut Queue) -> R) -> R {
    let mut slot = w.held_calls.borrow_mut();
    let any = slot.get_or_insert_with(|| Box::new(Queue::new()) as Box<dyn Any>);
    f(any.downcast_mut::<Queue>().expect("gossamer: held calls of another kind"))
}

/// Starts a fiber of this worker that issues the held calls, unless one is
/// started already.
fn schedule_flush() {
    let Some(w) = context::current() else { return };
    if w.cleaning.get() || FLUSH_DUE.with(|d| d.replace(true)) {
        return;
    }
    w.spawn_boxed(Box::new(flush));
}

/// Issues, in order, every held call that may go now: per counter, up to
/// the first that must still wait (the ones behind it wait too).
fn flush() {
    FLUSH_DUE.with(|d| d.set(false));
    let Some(w) = context::current() else { return };
    let mut queue = with_queue(w, std::mem::take);
    let mut kept = Queue::new();
    let mut blocked = [0u64; BUCKETS / 64];
    while let Some((b, call)) = queue.pop_front() {
        if blocked[b / 64] & (1 << (b % 64)) != 0 {
            kept.push_back((b, call));
            continue;
        }
        // Counted as held no longer while it runs: a call its callback
        // makes goes behind the calls still held only.
        PENDING.with(|p| p[b].held.set(p[b].held.get() - 1));
        let r = catch_unwind(AssertUnwindSafe(|| call.issue(w)));
        // What it queued on this thread's own trusts, outside its context.
        w.run_deferred();
        match r {
            Ok(Ok(())) => {}
            Ok(Err(call)) => {
                PENDING.with(|p| p[b].held.set(p[b].held.get() + 1));
                blocked[b / 64] |= 1 << (b % 64);
                kept.push_back((b, call));
            }
            Err(p) => w.report_panic("held call", p),
        }
    }
    // Calls held while this ran went behind the ones kept.
    with_queue(w, |q| {
        kept.append(q);
        *q = kept;
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Properties made together lie at a fixed stride: their counters
    /// must spread over the table about as random ones would (1000 keys in
    /// 1024 counters: about 640 distinct), not fold onto a fraction of it.
    #[test]
    fn keys_at_a_stride_spread_over_the_counters() {
        let strides = (1..=16).map(|k| 64 * k).chain([4096, 8192, 16384]);
        for (base, stride) in strides.flat_map(|s| [(0x7f3a_1200_0000usize, s), (0x55d1_e4a3_f0c0, s)]) {
            let mut seen = [false; BUCKETS];
            for i in 0..1000 {
                seen[bucket(base + i * stride)] = true;
            }
            let distinct = seen.iter().filter(|&&s| s).count();
            assert!(distinct > 580, "stride {stride}: {distinct} distinct counters of {BUCKETS}");
        }
    }
}
