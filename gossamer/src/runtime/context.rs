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

/// The worker running on this thread, for calls that only make sense on one.
///
/// # Panics
/// Outside the runtime's threads.
#[track_caller]
pub(crate) fn worker() -> &'static Worker {
    current().expect(
        "gossamer: this call must be made on a thread of the runtime (inside Runtime::block_on or a spawned fiber)",
    )
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
/// threads and must carry the context over (see `fiber::Hooks`).
pub(crate) fn raw() -> *const () {
    WORKER.with(|w| w.get()).cast()
}

/// Installs a context read with [`raw`] on this thread.
pub(crate) fn set_raw(v: *const ()) {
    WORKER.with(|w| w.set(v.cast()));
}

/// The hooks through which the channel consults this thread's worker.
pub(crate) fn channel_hooks() -> crate::channel::hooks::Hooks {
    crate::channel::hooks::Hooks {
        current_fiber: || current().map(|w| w.current_fiber()),
        enter_delegated: || current().map(|w| w.set_delegated(true)),
        leave_delegated: |prev| {
            if let Some(w) = current() {
                w.set_delegated(prev);
            }
        },
        report_panic: |what, p| match current() {
            Some(w) => w.report_panic(what, p),
            None => crate::error::drop_payload(p),
        },
        take_landed: crate::fabric::landed::take,
    }
}

/// Reports a panic that escaped a fiber body of this thread's worker.
pub(crate) fn report_fiber_panic(p: Box<dyn std::any::Any + Send>) {
    match current() {
        Some(w) => w.report_panic("fiber", p),
        None => crate::error::drop_payload(p),
    }
}
