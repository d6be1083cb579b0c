//! Which worker, if any, the current OS thread belongs to.

use std::cell::Cell;
use std::ptr;

use super::worker::Worker;

thread_local! {
    static WORKER: Cell<*const Worker> = const { Cell::new(ptr::null()) };
}

/// The worker running on this thread.
#[inline]
pub(crate) fn current() -> Option<&'static Worker> {
    let p = WORKER.with(|w| w.get());
    // SAFETY: the pointer is set by the worker thread for the duration of
    // its loop (and cleared before the `Worker` is dropped), so it is valid
    // whenever code runs on this thread under that worker.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Makes `w` this thread's worker until the returned guard is dropped.
///
/// The guard, not a matching call, clears the context: on every way out of
/// the worker's loop, unwinding included, the context is cleared before
/// the `Worker` goes, so code that runs later on the thread (thread-local
/// destructors, say) never finds a dangling worker.
#[must_use = "the context is cleared when the guard is dropped"]
pub(crate) fn enter(w: &Worker) -> Entered<'_> {
    let prev = WORKER.with(|c| c.replace(w));
    Entered { prev, _worker: std::marker::PhantomData }
}

/// Restores the previous context when dropped (see [`enter`]).
pub(crate) struct Entered<'a> {
    prev: *const Worker,
    _worker: std::marker::PhantomData<&'a Worker>,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        WORKER.with(|c| c.set(self.prev));
    }
}

/// The raw context, for the Miri fiber fallback that runs fibers on helper
/// threads and must carry the context over.
#[allow(dead_code)]
pub(crate) fn raw() -> *const Worker {
    WORKER.with(|w| w.get())
}

#[allow(dead_code)]
pub(crate) fn set_raw(v: *const Worker) {
    WORKER.with(|w| w.set(v));
}
