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

pub(crate) fn enter(w: &Worker) {
    WORKER.with(|c| c.set(w));
}

pub(crate) fn leave() {
    WORKER.with(|c| c.set(ptr::null()));
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
