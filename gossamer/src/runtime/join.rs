//! Spawning fibers and joining them.
//!
//! Two rules keep joins sound:
//! * **A wake never crosses runtimes.** A joiner records its runtime (its
//!   `Shared`), worker and fiber; the completion makes that fiber ready on
//!   that worker directly only when it runs on a worker of the same
//!   runtime, and otherwise hands the wake to the joiner's own runtime
//!   through its injection queue. A fiber of one runtime may so join a
//!   fiber of another, and a fiber number is never looked up in a runtime
//!   it does not belong to (where it would name an unrelated fiber, one
//!   waiting for a latch, say).
//! * **No user code unwinds into the runtime.** A fiber's end stores its
//!   result, wakes its joiner (a task's `Waker` is user code) and, for a
//!   detached fiber, drops the result or panic payload (whose `Drop` is
//!   user code): all inside `catch_unwind`, a panic there reported like any
//!   unhandled panic.

use std::any::Any;
use std::future::{Future, IntoFuture};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::{self, Thread};

use super::context;
use super::shared::Shared;
use crate::error::{JoinError, Panicked};
use crate::fiber;

enum Joiner {
    None,
    Fiber { runtime: Arc<Shared>, worker: usize, fiber: u32 },
    Thread(Thread),
    Task(Waker),
}

struct State<R> {
    result: Option<thread::Result<R>>,
    joiner: Joiner,
}

/// Owned permission to wait for a fiber's result, like
/// `std::thread::JoinHandle`. Dropping it detaches the fiber.
///
/// `.await` on it ([`IntoFuture`]) waits for the same result without
/// blocking, so a task of any executor can await a fiber
/// (`gossamer::block_on(handle.into_future())` waits for it anywhere):
///
/// ```
/// # fn main() {
/// let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
/// let h = rt.handle();
/// let tokio_rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let r = tokio_rt.block_on(async move { h.spawn(|| 6 * 7).await });
/// assert_eq!(r.unwrap(), 42);
/// # }
/// ```
pub struct JoinHandle<R> {
    state: Arc<Mutex<State<R>>>,
}

/// Wraps `f` into a fiber body that records its result for the handle.
pub(crate) fn pair<F, R>(f: F) -> (JoinHandle<R>, impl FnOnce() + Send + 'static)
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let state = Arc::new(Mutex::new(State { result: None, joiner: Joiner::None }));
    let mut unrun = Unrun(Some(state.clone()));
    let body = move || {
        let s2 = unrun.0.take().expect("a fiber body runs once");
        let r = catch_unwind(AssertUnwindSafe(f));
        // The result's owner, the joiner's waker and a detached fiber's
        // result are user code: nothing of it unwinds out of the fiber.
        if let Err(p) = catch_unwind(AssertUnwindSafe(move || {
            complete(&s2, r);
            drop(s2);
        })) {
            report("the end of a fiber", p);
        }
        drop(unrun);
    };
    (JoinHandle { state }, body)
}

impl<R> JoinHandle<R> {
    /// Waits for the fiber and returns its result, or the panic that ended
    /// it. From a fiber this suspends only the fiber (the fiber joined may
    /// belong to another runtime: the wake-up comes through this fiber's
    /// own runtime); from a thread outside the runtime it blocks the
    /// thread.
    ///
    /// # Panics
    /// In delegated context, where nothing may block.
    pub fn join(self) -> Result<R, JoinError> {
        let me = context::current();
        if let Some(w) = me {
            w.check_may_block();
        }
        loop {
            {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(r) = s.result.take() {
                    return r.map_err(Panicked::new);
                }
                s.joiner = match me {
                    Some(w) => Joiner::Fiber { runtime: w.shared.clone(), worker: w.index, fiber: w.current_fiber() },
                    None => Joiner::Thread(thread::current()),
                };
            }
            match me {
                Some(_) => fiber::suspend(),
                None => thread::park(),
            }
        }
    }

    /// True once the fiber has finished.
    pub fn is_finished(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).result.is_some()
    }
}

impl<R> IntoFuture for JoinHandle<R> {
    type Output = Result<R, JoinError>;
    type IntoFuture = JoinFuture<R>;

    fn into_future(self) -> JoinFuture<R> {
        JoinFuture { state: Some(self.state) }
    }
}

/// A future of a fiber's result: what `.await` on a [`JoinHandle`] waits
/// on (`handle.into_future()`). Dropping it detaches the fiber.
#[must_use = "dropping a JoinFuture detaches the fiber"]
pub struct JoinFuture<R> {
    state: Option<Arc<Mutex<State<R>>>>,
}

impl<R> Future for JoinFuture<R> {
    type Output = Result<R, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let state = self.state.as_ref().expect("gossamer: a JoinFuture was polled after it returned its result");
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = s.result.take() {
            drop(s);
            self.state = None;
            return Poll::Ready(r.map_err(Panicked::new));
        }
        match &s.joiner {
            Joiner::Task(w) if w.will_wake(cx.waker()) => {}
            _ => s.joiner = Joiner::Task(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<R> std::fmt::Debug for JoinFuture<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinFuture").finish_non_exhaustive()
    }
}

/// A handle whose fiber runs in another process: the state is leaked as a
/// raw pointer that travels there and back, and is reclaimed by
/// [`finish_remote`].
pub(crate) fn remote_pair<R>() -> (JoinHandle<R>, *const ()) {
    let state = Arc::new(Mutex::new(State { result: None, joiner: Joiner::None }));
    let raw = Arc::into_raw(state.clone()).cast::<()>();
    (JoinHandle { state }, raw)
}

/// Completes a handle from [`remote_pair`] on the thread that spawned it.
///
/// # Safety
/// `raw` must come from `remote_pair::<R>`, completed once.
pub(crate) unsafe fn finish_remote<R>(raw: *const (), r: thread::Result<R>) {
    // SAFETY: per the contract, this reclaims the leaked strong count.
    let state = unsafe { Arc::from_raw(raw.cast::<Mutex<State<R>>>()) };
    complete(&state, r);
}

/// A fiber body's hold on its state: when the body is dropped without
/// running (the runtime stopped first), the joiner learns it as a panic
/// instead of waiting for ever.
struct Unrun<R>(Option<Arc<Mutex<State<R>>>>);

impl<R> Drop for Unrun<R> {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            let why: Box<dyn Any + Send> = Box::new("gossamer: the runtime shut down before this fiber ran");
            complete(&s, Err(why));
        }
    }
}

/// Records a fiber's result and wakes whoever joins it.
fn complete<R>(state: &Mutex<State<R>>, r: thread::Result<R>) {
    let joiner = {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        s.result = Some(r);
        std::mem::replace(&mut s.joiner, Joiner::None)
    };
    match joiner {
        Joiner::None => {}
        Joiner::Thread(t) => t.unpark(),
        Joiner::Task(w) => {
            if let Err(p) = catch_unwind(AssertUnwindSafe(move || w.wake())) {
                report("a waker of a JoinFuture", p);
            }
        }
        Joiner::Fiber { runtime, worker, fiber } => match context::current() {
            Some(w) if Arc::ptr_eq(&w.shared, &runtime) => {
                if w.index == worker {
                    w.make_ready(fiber);
                } else {
                    w.send_plain(worker, move || {
                        context::current().expect("runtime message outside a worker").make_ready(fiber);
                    });
                }
            }
            // Another runtime's fiber, or no worker at all: the joiner's
            // own runtime makes it ready, on its worker.
            _ => runtime.inject(
                worker,
                Box::new(move || {
                    if let Some(w) = context::current() {
                        w.make_ready(fiber);
                    }
                }),
            ),
        },
    }
}

/// Reports a panic of user code run at a fiber's end: counted by the
/// worker's runtime when there is one, logged otherwise; the payload is
/// dropped inside `catch_unwind`.
fn report(what: &str, p: Box<dyn Any + Send>) {
    match context::current() {
        Some(w) => w.report_panic(what, p),
        None => {
            tracing::error!("unhandled panic in {what}: {}", crate::error::panic_message(&*p));
            crate::error::drop_payload(p);
        }
    }
}

/// Starts `f` as a fiber on worker `t`, from anywhere.
pub(crate) fn spawn_at<F, R>(shared: &Shared, t: usize, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let (h, body) = pair(f);
    match context::current() {
        Some(w) if w.shared.id == shared.id => {
            if w.index == t {
                w.spawn_boxed(Box::new(body));
            } else {
                w.send(t, move || {
                    context::current().expect("runtime message outside a worker").spawn_boxed(Box::new(body));
                });
            }
        }
        _ => shared.inject(
            t,
            Box::new(move || {
                context::current().expect("injected task outside a worker").spawn_boxed(Box::new(body));
            }),
        ),
    }
    h
}
