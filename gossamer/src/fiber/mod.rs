//! Stackful fibers: the user-level threads that let one OS thread keep many
//! delegation requests in flight.
//!
//! A [`Fiber`] runs a closure on its own stack. The scheduler drives it with
//! [`Fiber::resume`]; code running inside it gives the thread back with
//! [`suspend`]. Fibers never move between OS threads.
//!
//! Two back ends sit behind the same interface:
//! * normally, `corosensei` coroutines on pooled stacks, each with a guard
//!   page below it: running off the end faults there, and the process ends
//!   with a message naming the fiber stack size and `Builder::stack_size`
//!   and an abort, as std ends a thread that overflows its stack
//!   (`overflow`);
//! * under Miri (which cannot run hand-written context switches), one OS
//!   thread per fiber with a baton passed through a mutex and condition
//!   variable, so the channel and runtime code can still be checked by Miri.

/// What the scheduler above lends its fibers. The fiber layer knows nothing
/// of the runtime that drives it; the runtime passes these when it makes a
/// thread's [`StackPool`].
#[derive(Clone, Copy)]
pub(crate) struct Hooks {
    /// Reports a panic that a fiber body let escape; the fiber ends there
    /// and the panic never unwinds into the scheduler.
    pub(crate) report_panic: fn(Box<dyn std::any::Any + Send>),
    /// Reads the thread's scheduler context, an opaque pointer that the
    /// thread-per-fiber fallback carries to the thread that runs a fiber.
    #[cfg_attr(not(miri), allow(dead_code))]
    pub(crate) context: fn() -> *const (),
    /// Installs a context read with `context` on the calling thread.
    #[cfg_attr(not(miri), allow(dead_code))]
    pub(crate) set_context: fn(*const ()),
}

#[cfg(not(miri))]
mod coro;
#[cfg(not(miri))]
mod overflow;
#[cfg(not(miri))]
pub(crate) use coro::{in_fiber, suspend, Fiber, StackPool};

#[cfg(miri)]
mod threaded;
#[cfg(miri)]
pub(crate) use threaded::{in_fiber, suspend, Fiber, StackPool};
