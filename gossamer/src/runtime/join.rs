//! Spawning fibers and joining them.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::thread::{self, Thread};

use super::context;
use super::shared::Shared;
use crate::error::{JoinError, Panicked};
use crate::fiber;

enum Joiner {
    None,
    Fiber { runtime: u64, worker: usize, fiber: u32 },
    Thread(Thread),
}

struct State<R> {
    result: Option<thread::Result<R>>,
    joiner: Joiner,
}

/// Owned permission to wait for a fiber's result, like
/// `std::thread::JoinHandle`. Dropping it detaches the fiber.
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
