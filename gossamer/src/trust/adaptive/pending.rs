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

use std::cell::Cell;
use std::marker::PhantomData;

/// Counters per thread (a power of two).
const BUCKETS: usize = 1024;

/// Delegated calls between two checks of the delegate window's progress.
const CHECK_EVERY: u32 = 64;

thread_local! {
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
