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
//! outstanding that are not its own (it then waits or delegates, which is
//! always allowed), never the reverse.
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

use std::cell::Cell;
use std::marker::PhantomData;

/// Counters per thread (a power of two).
const BUCKETS: usize = 1024;

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
    static PENDING: [Cell<u32>; BUCKETS] = const { [const { Cell::new(0) }; BUCKETS] };
}

#[inline]
fn bucket(key: usize) -> usize {
    // Nodes are cache-line aligned: the low bits carry nothing.
    ((key >> 6) ^ (key >> 16)) & (BUCKETS - 1)
}

/// True when the calling thread may have a delegated request to the
/// property `key` outstanding (certainly, if it has one).
#[inline]
pub(crate) fn outstanding(key: usize) -> bool {
    PENDING.try_with(|p| p[bucket(key)].get() != 0).unwrap_or(false)
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
    #[inline]
    pub(crate) fn take(key: usize) -> Ticket {
        let bucket = bucket(key);
        let _ = PENDING.try_with(|p| p[bucket].set(p[bucket].get() + 1));
        Ticket { bucket, _here: PhantomData }
    }
}

impl Drop for Ticket {
    #[inline]
    fn drop(&mut self) {
        // At thread exit the counts may be gone already: nothing to count.
        let _ = PENDING.try_with(|p| p[self.bucket].set(p[self.bucket].get().saturating_sub(1)));
    }
}
