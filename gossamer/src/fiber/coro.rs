//! Fibers on `corosensei` coroutines with a per-thread pool of stacks.

use std::cell::Cell;
use std::ptr;

use corosensei::stack::{DefaultStack, Stack};

use super::{overflow, Hooks};
use corosensei::{Coroutine, CoroutineResult, Yielder};

type Co = Coroutine<(), (), (), DefaultStack>;

thread_local! {
    /// The yielder of the fiber that is running on this thread, or null while
    /// the scheduler itself runs.
    static CURRENT: Cell<*const Yielder<(), ()>> = const { Cell::new(ptr::null()) };
    /// True while [`Fiber::abandon`] resumes a fiber to unwind it.
    static CANCELLING: Cell<bool> = const { Cell::new(false) };
}

/// The panic that unwinds a fiber abandoned at shutdown from the point where
/// it was suspended.
pub(crate) const ABANDONED: &str = "gossamer: the runtime shut down while this fiber was suspended (it did not \
finish within Builder::shutdown_timeout); it is unwound from where it waited";

/// A pool of fiber stacks owned by one worker thread. Creating a fiber from a
/// pooled stack costs nanoseconds; mapping a fresh one costs microseconds.
/// Made on its worker thread, which it also prepares for reporting fiber
/// stack overflows (see `overflow`).
pub(crate) struct StackPool {
    stack_size: usize,
    free: Vec<DefaultStack>,
    limit: usize,
    hooks: Hooks,
    _alt: overflow::AltStack,
}

impl StackPool {
    pub(crate) fn new(stack_size: usize, limit: usize, hooks: Hooks) -> Self {
        overflow::install();
        StackPool { stack_size, free: Vec::new(), limit, hooks, _alt: overflow::AltStack::ensure() }
    }

    fn take(&mut self) -> DefaultStack {
        match self.free.pop() {
            Some(s) => s,
            None => DefaultStack::new(self.stack_size)
                .unwrap_or_else(|e| panic!("gossamer: cannot map a fiber stack of {} bytes: {e}", self.stack_size)),
        }
    }

    fn give(&mut self, stack: DefaultStack) {
        if self.free.len() < self.limit {
            self.free.push(stack);
        }
    }
}

/// One fiber, always boxed: the scheduler moves only the pointer, and the
/// fiber's yielder cell keeps a fixed address. Dropping an unfinished fiber
/// unwinds its stack, running the destructors of everything alive on it.
pub(crate) struct Fiber {
    co: Option<Co>,
    /// Whether the fiber has run at all (user frames may be on its stack).
    started: bool,
    /// The lowest address of its stack mapping: the guard page.
    stack_low: usize,
    /// The stack size the runtime was built with, for the overflow report.
    stack_size: usize,
    /// Where the fiber records its yielder on first entry.
    yielder: Cell<*const Yielder<(), ()>>,
}

impl Fiber {
    pub(crate) fn new(pool: &mut StackPool, body: Box<dyn FnOnce()>) -> Box<Fiber> {
        let mut fiber = Box::new(Fiber {
            co: None,
            started: false,
            stack_low: 0,
            stack_size: pool.stack_size,
            yielder: Cell::new(ptr::null()),
        });
        let slot = SendPtr(&fiber.yielder as *const Cell<*const Yielder<(), ()>>);
        let stack = pool.take();
        let report_panic = pool.hooks.report_panic;
        fiber.stack_low = stack.limit().get();
        let co = Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
            let slot = slot;
            // SAFETY: `slot` points into the box of this fiber's `Fiber`,
            // which owns the coroutine and so outlives it; the box never
            // moves its contents.
            unsafe { (*slot.0).set(y) };
            CURRENT.with(|c| c.set(y));
            // A fiber body is user code, or holds some (a callback): a
            // panic that it lets escape ends the fiber here, reported,
            // and never unwinds through the scheduler into the loop.
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
                report_panic(p);
            }
        });
        fiber.co = Some(co);
        fiber
    }

    /// Runs the fiber until it suspends (`false`) or finishes (`true`).
    /// The thread's current-fiber record is restored by a guard, so also
    /// when a panic unwinds out of the fiber.
    pub(crate) fn resume(&mut self) -> bool {
        struct Restore(*const Yielder<(), ()>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let co = self.co.as_mut().expect("resumed a finished fiber");
        self.started = true;
        let _restore = Restore(CURRENT.with(|c| c.replace(self.yielder.get())));
        let _running = overflow::Running::enter(self.stack_low, self.stack_size);
        let r = co.resume(());
        matches!(r, CoroutineResult::Return(()))
    }

    /// Ends a fiber that will never be resumed normally: the runtime
    /// stopped with it unfinished.
    ///
    /// A fiber that never ran is dropped (its closure with it). One that
    /// ran is resumed once more, and the call it was suspended in panics
    /// with [`ABANDONED`] (as `resume_unwind`, without the panic hook): it unwinds as an ordinary panic, on its own
    /// stack, as the current fiber of its worker, so destructors on the way
    /// run in a normal fiber context (an `apply` to a property of this
    /// thread still works) rather than inside `corosensei`'s forced unwind,
    /// where any blocking call would be a panic in a destructor during
    /// cleanup and abort the process. A destructor that blocks while it
    /// unwinds suspends the fiber again; it can never be resumed, and its
    /// stack may hold values that must not be freed without their
    /// destructors (pinned ones), so that fiber is leaked, stack and all,
    /// as a thread is at process exit.
    pub(crate) fn abandon(mut self: Box<Self>) {
        if !self.started || self.co.as_ref().is_none_or(|co| co.done()) {
            return;
        }
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                CANCELLING.with(|c| c.set(false));
            }
        }
        CANCELLING.with(|c| c.set(true));
        let _clear = Clear;
        if !self.resume() {
            tracing::warn!("a fiber abandoned at shutdown blocked again while unwinding; it is leaked");
            // Kept reachable from a static: leaked on purpose, as leak
            // checkers can see.
            static LEAKED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
            LEAKED.lock().unwrap_or_else(|e| e.into_inner()).push(Box::into_raw(self) as usize);
        }
    }

    /// Gives a finished fiber's stack back to the pool.
    pub(crate) fn recycle(mut self, pool: &mut StackPool) {
        if let Some(co) = self.co.take() {
            if co.done() {
                pool.give(co.into_stack());
            }
        }
    }
}

struct SendPtr<T>(*const T);

/// True while a fiber (not the scheduler) runs on this thread.
pub(crate) fn in_fiber() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// Suspends the running fiber, returning control to the scheduler that
/// resumed it. Panics when called outside a fiber.
pub(crate) fn suspend() {
    let y = CURRENT.with(|c| c.get());
    assert!(!y.is_null(), "gossamer: suspend() outside a fiber");
    // SAFETY: `CURRENT` holds the yielder of the running fiber, set on entry
    // and on every resume; it lives on that fiber's stack, which is live.
    unsafe { (*y).suspend(()) };
    // After the resume, `Fiber::resume` has set CURRENT back to us.
    if CANCELLING.with(|c| c.get()) {
        // Resumed by `Fiber::abandon`: unwind from the wait. Without the
        // panic hook (no message per fiber on stderr, where the program's
        // own last words go); the shutdown logs the abandoned fibers, and
        // a joiner gets the payload.
        std::panic::resume_unwind(Box::new(ABANDONED));
    }
}
