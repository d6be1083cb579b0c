//! Futures for delegation from any executor: [`ApplyFuture`], what
//! [`Trust::apply_async`](super::Trust::apply_async) returns, and
//! [`block_on`], to wait for a future in a fiber or a plain thread.
//!
//! From a thread outside the runtime (a tokio worker, say) a request is a
//! heap node — the closure, the property's address, a completion cell —
//! pushed onto its trustee's submission stack with one compare-and-swap
//! (`runtime::shared::Submissions`). The trustee takes the whole stack in
//! one swap as part of its loop, runs the closures in submission order and
//! completes each cell: the result is stored and the task's waker woken.
//! Nothing blocks on either side, so a task may keep any number of
//! requests in flight. On a worker thread of the runtime the request goes
//! through the worker's own batched slots instead, as `try_apply_then`,
//! whose callback completes the cell.
//!
//! The completion cell is shared by the future and the runtime (an `Arc`).
//! Dropping the future marks the cell cancelled: a closure that has not
//! started is then dropped unrun (with what it owns), one that runs or has
//! run keeps its effect, and its result is dropped with the cell.

use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use super::property::PropertyCell;
use crate::runtime::context;
use crate::runtime::shared::SubNode;
use crate::runtime::worker::Worker;

/// The future is storing its waker.
const LOCKED: usize = 1;
/// A waker is stored.
const WAKER: usize = 2;
/// The result is stored (or the request was abandoned: no result).
const DONE: usize = 4;
/// The future was dropped before the result came.
const CANCELLED: usize = 8;

const SHUT_DOWN: &str = "gossamer: the runtime shut down before the trustee answered";

/// A one-shot completion cell: a result written once by the runtime, and
/// the waker of the task that waits for it.
///
/// Protocol: the future writes the waker only while it holds `LOCKED`
/// (taken by compare-and-swap from a state without `DONE`); the completer
/// writes the result, then sets `DONE`, and takes the waker only if it saw
/// `WAKER` without `LOCKED`. The future reads the result only after seeing
/// `DONE`.
pub(crate) struct Done<U> {
    state: AtomicUsize,
    waker: UnsafeCell<Option<Waker>>,
    result: UnsafeCell<Option<thread::Result<U>>>,
}

// SAFETY: the cells are accessed under the protocol above; the result and
// waker move between threads, hence `U: Send` (a waker is `Send + Sync`).
unsafe impl<U: Send> Send for Done<U> {}
// SAFETY: as above.
unsafe impl<U: Send> Sync for Done<U> {}

impl<U> Done<U> {
    pub(crate) fn new() -> Self {
        Done { state: AtomicUsize::new(0), waker: UnsafeCell::new(None), result: UnsafeCell::new(None) }
    }

    fn cancelled(&self) -> bool {
        self.state.load(Ordering::Relaxed) & CANCELLED != 0
    }

    /// Stores the result (`None`: abandoned at shutdown) and wakes the
    /// waiting task, if any. Called once.
    pub(crate) fn complete(&self, r: Option<thread::Result<U>>) {
        // SAFETY: only the completer writes the result, once, before
        // `DONE`; the future reads it only after `DONE`.
        unsafe { *self.result.get() = r };
        let prev = self.state.fetch_or(DONE, Ordering::AcqRel);
        if prev & (LOCKED | WAKER | CANCELLED) == WAKER {
            // SAFETY: the future stored a waker and can no longer take the
            // lock (`DONE` is set): the slot is ours.
            if let Some(w) = unsafe { (*self.waker.get()).take() } {
                w.wake();
            }
        }
    }

    fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) & DONE != 0
    }
}

/// What an [`ApplyFuture`] waits on: a bare cell, or a request from
/// outside the runtime that holds one.
trait Pending<U>: Send + Sync {
    fn done(&self) -> &Done<U>;
}

impl<U: Send> Pending<U> for Done<U> {
    fn done(&self) -> &Done<U> {
        self
    }
}

/// A future for the result of a closure delegated to a trustee, from
/// [`Trust::apply_async`](crate::Trust::apply_async) or
/// [`Trust::apply_with_async`](crate::Trust::apply_with_async).
///
/// The request is sent when the future is created, not when it is first
/// polled: issue several, then await them, and they are all in flight at
/// once. Any executor can poll it (it only uses `std::task`); in a fiber,
/// wait for it with [`block_on`].
///
/// A panic in the closure is resumed by the poll that sees it. If the
/// runtime shuts down before the trustee answered, the poll panics saying
/// so.
///
/// **Cancellation.** Dropping the future at any point is safe. If the
/// closure has not started yet it never runs (it is dropped on the trustee,
/// with the argument it owns); if it has, its effect stays and its result
/// is dropped. Nothing leaks either way.
#[must_use = "the request is sent already; dropping the future only discards its result"]
pub struct ApplyFuture<U> {
    cell: Option<Arc<dyn Pending<U>>>,
}

impl<U: Send + 'static> ApplyFuture<U> {
    pub(crate) fn from_done(done: Arc<Done<U>>) -> Self {
        ApplyFuture { cell: Some(done) }
    }
}

impl<U> ApplyFuture<U> {
    /// True once the result is in (polling now returns it). False after
    /// the result was taken.
    pub fn is_finished(&self) -> bool {
        self.cell.as_ref().is_some_and(|c| c.done().is_done())
    }

    /// Takes the result; the cell has `DONE`.
    fn take(&mut self) -> U {
        let cell = self.cell.take().expect("checked by the caller");
        // SAFETY: `DONE` was seen with acquire ordering: the result is
        // written and nobody else touches it.
        let r = unsafe { (*cell.done().result.get()).take() };
        drop(cell);
        match r {
            Some(Ok(u)) => u,
            Some(Err(p)) => resume_unwind(p),
            None => panic!("{SHUT_DOWN}"),
        }
    }
}

impl<U> Future for ApplyFuture<U> {
    type Output = U;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<U> {
        let this = &mut *self;
        let cell = this.cell.as_ref().expect("gossamer: an ApplyFuture was polled after it returned its result");
        let d = cell.done();
        let mut s = d.state.load(Ordering::Acquire);
        loop {
            if s & DONE != 0 {
                return Poll::Ready(this.take());
            }
            match d.state.compare_exchange_weak(s, LOCKED, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        // SAFETY: we hold `LOCKED`: the completer does not touch the slot.
        let slot = unsafe { &mut *d.waker.get() };
        match slot {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        match d.state.compare_exchange(LOCKED, WAKER, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Poll::Pending,
            // The result came while we held the lock; it did not wake us.
            Err(_) => Poll::Ready(this.take()),
        }
    }
}

impl<U> Drop for ApplyFuture<U> {
    fn drop(&mut self) {
        if let Some(c) = &self.cell {
            c.done().state.fetch_or(CANCELLED, Ordering::Release);
        }
    }
}

impl<U> fmt::Debug for ApplyFuture<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApplyFuture").field("finished", &self.is_finished()).finish()
    }
}

/// A request from a thread outside the runtime: the submission node, the
/// completion cell, the property and the closure.
#[repr(C)]
struct Request<T, F, U> {
    node: SubNode,
    done: Done<U>,
    prop: *mut PropertyCell<T>,
    f: UnsafeCell<Option<F>>,
}

// SAFETY: the property is only touched on its trustee (in `run_request`),
// the closure is taken once, there; `F` and `U` move between threads.
unsafe impl<T, F: Send, U: Send> Send for Request<T, F, U> {}
// SAFETY: as above.
unsafe impl<T, F: Send, U: Send> Sync for Request<T, F, U> {}

impl<T, F: Send, U: Send> Pending<U> for Request<T, F, U> {
    fn done(&self) -> &Done<U> {
        &self.done
    }
}

/// Runs (`Some(worker)`, on the property's trustee) or abandons (`None`, at
/// shutdown) a submitted request, and releases the queue's reference.
unsafe fn run_request<T, F, U>(node: *mut SubNode, w: Option<&Worker>)
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: crate::trust::Transferable,
{
    // SAFETY: the node is the front of a `Request<T, F, U>` (`repr(C)`)
    // whose reference the queue holds (`Arc::into_raw` in `submit`).
    let req = unsafe { Arc::from_raw(node.cast_const().cast::<Request<T, F, U>>()) };
    // SAFETY: the closure is taken only here, once.
    let f = unsafe { (*req.f.get()).take() };
    match (w, f) {
        (Some(_), Some(f)) if !req.done.cancelled() => {
            let prop = req.prop;
            // SAFETY: on the property's trustee, which keeps it (see below).
            if unsafe { crate::trust::property::moved(prop.cast()) } {
                // The property moved: this trustee sends the request on.
                let w = crate::runtime::context::current().expect("gossamer: a submission run outside a worker");
                let done = req.clone();
                let then: crate::trust::migrate::Then<U> = Box::new(move |_, r| done.done.complete(Some(r)));
                let t = w.index;
                let f = crate::trust::migrate::Closure::new(f);
                return crate::trust::migrate::route(w, t, prop, f, crate::trust::migrate::Reply::Then(then), false);
            }
            // SAFETY: we are the property's trustee, in delegated context,
            // and the property is live: requests from outside keep it
            // (see `property`); a launched closure may hold it (checked).
            let r = match unsafe { crate::trust::property::check_reachable(prop.cast()) } {
                // SAFETY: reachable (checked just now): exclusive access.
                Ok(()) => catch_unwind(AssertUnwindSafe(|| f(unsafe { &mut *(*prop).value.get() }))),
                Err(why) => Err(Box::new(why) as Box<dyn std::any::Any + Send>),
            };
            req.done.complete(Some(r));
        }
        (Some(_), f) => {
            // Cancelled before it started: it never runs.
            drop(f);
            req.done.complete(None);
        }
        (None, f) => {
            drop(f);
            req.done.complete(None);
        }
    }
}

/// Submits `f` for the property at `prop` on local trustee `t` of `s`.
pub(crate) fn submit<T, F, U>(
    s: &crate::runtime::shared::Shared,
    t: usize,
    prop: *mut PropertyCell<T>,
    f: F,
) -> ApplyFuture<U>
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: crate::trust::Transferable,
{
    let req = Arc::new(Request {
        node: SubNode::new(run_request::<T, F, U>),
        done: Done::new(),
        prop,
        f: UnsafeCell::new(Some(f)),
    });
    let raw = Arc::into_raw(req.clone()).cast_mut().cast::<SubNode>();
    // SAFETY: a fresh node; the queue owns the reference made above.
    if !unsafe { s.submit(t, raw) } {
        // The trustee has stopped: abandon it here.
        // SAFETY: not queued, so this is the only run.
        unsafe { run_request::<T, F, U>(raw, None) };
    }
    ApplyFuture { cell: Some(req) }
}

/// Wakes a fiber parked in [`block_on`].
struct FiberWaker(crate::Unparker);

impl Wake for FiberWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Wakes a thread blocked in [`block_on`].
struct ThreadWaker(thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Waits for a future and returns its output: in a fiber, only the fiber
/// waits (its thread keeps running other fibers and serving as a trustee);
/// on a thread outside the runtime, the thread blocks. Any future works,
/// not only gossamer's, as long as it needs no particular executor's
/// reactor (a tokio timer or socket needs tokio's).
///
/// Unlike [`Runtime::block_on`](crate::Runtime::block_on), which runs a
/// closure as a fiber, this waits for a future where it is called.
///
/// ```
/// let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
/// let counter = rt.trustee(1).entrust(0u64);
/// let c = counter.clone();
/// rt.block_on(move || {
///     // Two requests in flight at once, then their results.
///     let a = c.apply_async(|v| { *v += 1; *v });
///     let b = c.apply_async(|v| { *v += 10; *v });
///     assert_eq!((gossamer::block_on(a), gossamer::block_on(b)), (1, 11));
/// });
/// // From a plain thread, too.
/// assert_eq!(gossamer::block_on(counter.apply_async(|v| *v)), 11);
/// ```
///
/// # Panics
/// In delegated context (inside a delegated closure or a then-callback),
/// where nothing may block.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    match context::current() {
        Some(w) => {
            w.check_may_block();
            let (parker, unparker) = crate::Parker::new();
            let waker = Waker::from(Arc::new(FiberWaker(unparker)));
            let mut cx = Context::from_waker(&waker);
            loop {
                if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                    return v;
                }
                parker.park();
            }
        }
        None => {
            let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
            let mut cx = Context::from_waker(&waker);
            loop {
                if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                    return v;
                }
                thread::park();
            }
        }
    }
}
