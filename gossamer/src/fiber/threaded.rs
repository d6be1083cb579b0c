//! Miri fallback: every fiber is an OS thread, and a baton (mutex plus
//! condition variable) makes sure only one of a worker's fibers, or the
//! worker itself, runs at a time. Slow, but it keeps the scheduling semantics.

use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex};

use super::Hooks;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Turn {
    Scheduler,
    Fiber,
    Done,
}

struct Baton {
    turn: Mutex<Turn>,
    cv: Condvar,
    /// The scheduler context to install on the fiber thread when it runs.
    context: Mutex<Ctx>,
    hooks: Hooks,
}

impl Baton {
    fn pass(&self, to: Turn) {
        *self.turn.lock().unwrap() = to;
        self.cv.notify_all();
    }
    fn wait_while(&self, t: Turn) -> Turn {
        let mut g = self.turn.lock().unwrap();
        while *g == t {
            g = self.cv.wait(g).unwrap();
        }
        *g
    }
}

thread_local! {
    static CURRENT: Cell<Option<*const Baton>> = const { Cell::new(None) };
}

pub(crate) struct StackPool(Hooks);

impl StackPool {
    pub(crate) fn new(_stack_size: usize, _limit: usize, hooks: Hooks) -> Self {
        StackPool(hooks)
    }
}

pub(crate) struct Fiber {
    baton: Arc<Baton>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The scheduler context handed to a fiber thread.
struct Ctx(*const ());
// SAFETY: only installed as the fiber thread's context while the worker
// thread it belongs to waits on the baton.
unsafe impl Send for Ctx {}

struct SendBox(Box<dyn FnOnce()>);
// SAFETY: the body runs on the fiber thread only while the worker thread that
// created it is blocked on the baton, so it never runs concurrently with it.
unsafe impl Send for SendBox {}

impl Fiber {
    pub(crate) fn new(pool: &mut StackPool, body: Box<dyn FnOnce()>) -> Box<Fiber> {
        let baton = Arc::new(Baton {
            turn: Mutex::new(Turn::Scheduler),
            cv: Condvar::new(),
            context: Mutex::new(Ctx(std::ptr::null())),
            hooks: pool.0,
        });
        let b = baton.clone();
        let body = SendBox(body);
        let thread = std::thread::spawn(move || {
            let body = body;
            b.wait_while(Turn::Scheduler);
            (b.hooks.set_context)(b.context.lock().unwrap().0);
            CURRENT.with(|c| c.set(Some(Arc::as_ptr(&b))));
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body.0));
            CURRENT.with(|c| c.set(None));
            b.pass(Turn::Done);
            if let Err(p) = r {
                std::panic::resume_unwind(p);
            }
        });
        Box::new(Fiber { baton, thread: Some(thread) })
    }

    pub(crate) fn recycle(self, _pool: &mut StackPool) {}

    /// Ends a fiber the runtime stopped with (see the coroutine back end):
    /// here the fiber's thread is simply left waiting.
    pub(crate) fn abandon(self: Box<Self>) {}

    pub(crate) fn resume(&mut self) -> bool {
        *self.baton.context.lock().unwrap() = Ctx((self.baton.hooks.context)());
        self.baton.pass(Turn::Fiber);
        let t = self.baton.wait_while(Turn::Fiber);
        if t == Turn::Done {
            if let Some(h) = self.thread.take() {
                let _ = h.join();
            }
            true
        } else {
            false
        }
    }
}

pub(crate) fn in_fiber() -> bool {
    CURRENT.with(|c| c.get().is_some())
}

pub(crate) fn suspend() {
    let b = CURRENT.with(|c| c.get()).expect("gossamer: suspend() outside a fiber");
    // SAFETY: the baton is kept alive by the `Fiber` that owns this thread,
    // which cannot be dropped while its fiber runs.
    let b = unsafe { &*b };
    b.pass(Turn::Scheduler);
    b.wait_while(Turn::Scheduler);
    (b.hooks.set_context)(b.context.lock().unwrap().0);
}
