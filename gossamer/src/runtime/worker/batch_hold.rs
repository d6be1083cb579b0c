//! Locks a trustee keeps for the rest of the batch it serves.
//!
//! A trustee that serves a delegated request on a property guarded by a
//! lock (an adaptive property, see `trust::adaptive`) may keep that lock
//! after the request, instead of releasing it at once, and reuse it for the
//! next requests of the batch to the same property: a run of requests then
//! takes the lock once. The worker opens a batch before it serves a client's
//! slot and closes it after, before it publishes the answers; closing
//! releases every lock kept. Outside a batch nothing is kept.
//!
//! At most [`KEPT`] locks are kept at once; a request to a property beyond
//! them takes and releases its lock as before. A lock is kept with the
//! function that releases it, so this module knows nothing of the lock's
//! type. The thread that keeps a lock may need it outright before the
//! batch ends (to drop the property's value, or to change its policy, from
//! a request of the same batch): [`BatchHolds::take_over`] hands it over.

use std::cell::Cell;
use std::ptr;

/// The most locks a trustee keeps at once within one batch.
pub(crate) const KEPT: usize = 8;

/// Releases the lock at the address given.
pub(crate) type Release = unsafe fn(*const ());

/// The locks kept by one worker within the batch it serves.
pub(crate) struct BatchHolds {
    open: Cell<bool>,
    len: Cell<usize>,
    kept: [Cell<(*const (), Option<Release>)>; KEPT],
    /// The lock of the request running now, if it was kept (null: none):
    /// it guards a value a closure is using, so it may not be handed over.
    active: Cell<*const ()>,
}

/// An open batch: closes it when dropped (see [`BatchHolds::open`]).
#[must_use = "the batch closes, and its locks are released, when this guard is dropped"]
pub(crate) struct Batch<'a>(Option<&'a BatchHolds>);

impl Drop for Batch<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(h) = self.0 {
            h.close();
        }
    }
}

/// What [`BatchHolds::take_over`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TakeOver {
    /// This thread did not keep the lock.
    NotKept,
    /// This thread kept it; it is now the caller's, to release as usual.
    Taken,
    /// This thread keeps it for a closure running on its value now: the
    /// caller is inside that closure.
    InUse,
}

impl Default for BatchHolds {
    fn default() -> Self {
        BatchHolds {
            open: Cell::new(false),
            len: Cell::new(0),
            kept: std::array::from_fn(|_| Cell::new((ptr::null(), None))),
            active: Cell::new(ptr::null()),
        }
    }
}

impl BatchHolds {
    /// Starts a batch: until the guard is dropped, locks may be kept; the
    /// guard's drop (also on unwinding) releases them. Inside a batch
    /// already open, the batch goes on until the outer guard's drop.
    #[inline]
    pub(crate) fn open(&self) -> Batch<'_> {
        Batch((!self.open.replace(true)).then_some(self))
    }

    /// Ends the batch, releasing every lock kept.
    #[inline]
    fn close(&self) {
        self.open.set(false);
        self.active.set(ptr::null());
        let n = self.len.replace(0);
        for c in &self.kept[..n] {
            let (p, release) = c.replace((ptr::null(), None));
            if let Some(release) = release {
                // SAFETY: `keep`'s contract: the lock at `p` is held by
                // this thread, and its memory lives until it is released
                // here or handed over by `take_over`, which removed it.
                unsafe { release(p) };
            }
        }
    }

    /// Where this thread keeps the lock at `lock`, if it does.
    #[inline]
    fn find(&self, lock: *const ()) -> Option<usize> {
        self.kept[..self.len.get()].iter().position(|c| c.get().0 == lock)
    }

    /// Takes the lock at `lock` for a request the trustee serves now: reuses
    /// it if this thread keeps it, else takes it with `acquire` and keeps
    /// it if it can (inside a batch, fewer than [`KEPT`] kept, and not
    /// nested in another request). The lock is marked as in use until
    /// [`done`](BatchHolds::done). Returns whether it is kept: then the
    /// batch's end releases it, not the caller.
    ///
    /// # Safety
    /// `acquire` takes the lock for this thread, `release(lock)` releases
    /// it, and its memory stays valid until it is released: whoever frees
    /// it first takes it over (see [`take_over`](BatchHolds::take_over)).
    #[inline]
    pub(crate) unsafe fn serve(&self, lock: *const (), acquire: impl FnOnce(), release: Release) -> bool {
        let free = self.active.get().is_null();
        if free && self.open.get() && self.find(lock).is_some() {
            self.active.set(lock);
            return true;
        }
        acquire();
        let n = self.len.get();
        let keep = free && self.open.get() && n < KEPT;
        if keep {
            self.kept[n].set((lock, Some(release)));
            self.len.set(n + 1);
        }
        if free {
            self.active.set(lock);
        }
        keep
    }

    /// The request served under the lock at `lock` is done with it (a kept
    /// lock stays kept).
    #[inline]
    pub(crate) fn done(&self, lock: *const ()) {
        if self.active.get() == lock {
            self.active.set(ptr::null());
        }
    }

    /// Hands the lock at `lock` over to the caller if this thread keeps it
    /// and no request it serves is using it.
    pub(crate) fn take_over(&self, lock: *const ()) -> TakeOver {
        if self.active.get() == lock {
            return TakeOver::InUse;
        }
        let Some(i) = self.find(lock) else {
            return TakeOver::NotKept;
        };
        let n = self.len.get();
        self.kept[i].set(self.kept[n - 1].get());
        self.kept[n - 1].set((ptr::null(), None));
        self.len.set(n - 1);
        TakeOver::Taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Releases an `AtomicU32` lock (1: held, 0: free).
    unsafe fn release(p: *const ()) {
        // SAFETY: the tests keep only live `AtomicU32`s.
        unsafe { &*(p as *const AtomicU32) }.store(0, Ordering::Release);
    }

    fn addr(l: &AtomicU32) -> *const () {
        l as *const AtomicU32 as *const ()
    }

    /// Serves one request under `l`; returns whether the lock was kept and
    /// how often it was taken.
    fn serve(h: &BatchHolds, l: &AtomicU32) -> (bool, u32) {
        let mut taken = 0;
        let acquire = || {
            assert_eq!(l.swap(1, Ordering::Acquire), 0, "took a held lock");
            taken += 1;
        };
        // SAFETY: `acquire` takes the lock, `release` releases it, and the
        // locks outlive every batch of the tests.
        let kept = unsafe { h.serve(addr(l), acquire, release) };
        (kept, taken)
    }

    #[test]
    fn kept_locks_are_reused_within_a_batch_and_released_when_it_closes() {
        let h = BatchHolds::default();
        let locks: Vec<AtomicU32> = (0..KEPT + 1).map(|_| AtomicU32::new(0)).collect();
        // Outside a batch nothing is kept.
        assert_eq!(serve(&h, &locks[0]), (false, 1));
        h.done(addr(&locks[0]));
        locks[0].store(0, Ordering::Release);

        let batch = h.open();
        for l in &locks[..KEPT] {
            assert_eq!(serve(&h, l), (true, 1), "kept");
            h.done(addr(l));
            assert_eq!(serve(&h, l), (true, 0), "a kept lock is reused, not taken again");
            h.done(addr(l));
        }
        // Full: the ninth is the caller's to release.
        assert_eq!(serve(&h, &locks[KEPT]), (false, 1));
        h.done(addr(&locks[KEPT]));
        locks[KEPT].store(0, Ordering::Release);
        assert!(locks[..KEPT].iter().all(|l| l.load(Ordering::Relaxed) == 1));
        drop(batch);
        assert!(locks.iter().all(|l| l.load(Ordering::Relaxed) == 0), "closing releases every kept lock");
        assert_eq!(h.take_over(addr(&locks[0])), TakeOver::NotKept);
    }

    #[test]
    fn a_kept_lock_is_handed_over_unless_a_request_uses_it() {
        let h = BatchHolds::default();
        let (a, b, c) = (AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0));
        let batch = h.open();
        drop(h.open()); // nested: the outer batch goes on
        assert_eq!(serve(&h, &a), (true, 1));
        h.done(addr(&a));
        assert_eq!(serve(&h, &b), (true, 1));
        // `b` is in use, `a` is not; a request nested in `b`'s takes its
        // own lock and does not keep it.
        assert_eq!(h.take_over(addr(&b)), TakeOver::InUse);
        assert_eq!(h.take_over(addr(&a)), TakeOver::Taken);
        assert_eq!(h.take_over(addr(&a)), TakeOver::NotKept);
        assert_eq!(serve(&h, &c), (false, 1));
        h.done(addr(&c));
        assert_eq!(h.take_over(addr(&b)), TakeOver::InUse, "the nested request's end leaves b in use");
        h.done(addr(&b));
        drop(batch);
        assert_eq!(a.load(Ordering::Relaxed), 1, "a lock handed over is not released by the batch");
        assert_eq!(b.load(Ordering::Relaxed), 0);
        assert_eq!(c.load(Ordering::Relaxed), 1, "a lock not kept is the caller's to release");
    }

    #[test]
    fn a_request_served_outside_a_batch_is_in_use_too() {
        let h = BatchHolds::default();
        let a = AtomicU32::new(0);
        assert_eq!(serve(&h, &a), (false, 1));
        assert_eq!(h.take_over(addr(&a)), TakeOver::InUse);
        h.done(addr(&a));
        assert_eq!(h.take_over(addr(&a)), TakeOver::NotKept);
    }
}
