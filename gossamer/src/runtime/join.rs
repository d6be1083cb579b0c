//! Spawning fibers and joining them.

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
    Fiber { runtime: u64, worker: usize, fiber: u32 },
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
    let s2 = state.clone();
    let body = move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        complete(&s2, r);
    };
    (JoinHandle { state }, body)
}

impl<R> JoinHandle<R> {
    /// Waits for the fiber and returns its result, or the panic that ended
    /// it. From a fiber this suspends only the fiber; from a thread outside
    /// the runtime it blocks the thread.
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
                    Some(w) => Joiner::Fiber { runtime: w.shared.id, worker: w.index, fiber: w.current_fiber() },
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
        Joiner::Task(w) => w.wake(),
        Joiner::Fiber { runtime, worker, fiber } => {
            let w = context::current().expect("fiber finished outside its runtime");
            debug_assert_eq!(w.shared.id, runtime);
            if w.index == worker {
                w.make_ready(fiber);
            } else {
                w.send_plain(worker, move || {
                    context::current().expect("runtime message outside a worker").make_ready(fiber);
                });
            }
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
