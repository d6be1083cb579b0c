//! What the channel asks of the scheduler above it while it encodes and
//! decodes messages: which fiber is running, entering delegated context
//! for the user's serialization code, and where a panic of a value's `Drop`
//! is reported. The channel knows nothing of the runtime; the runtime
//! installs these once, when it starts its first worker. Until then (the
//! channel's own unit tests) every thread counts as outside any runtime.

use std::any::Any;
use std::sync::OnceLock;

/// The runtime's answers, as plain functions of the calling thread.
#[derive(Clone, Copy)]
pub(crate) struct Hooks {
    /// The running fiber of this thread's worker; `None` outside the
    /// runtime.
    pub(crate) current_fiber: fn() -> Option<u32>,
    /// Puts this thread's worker in delegated context (no suspending) and
    /// returns its previous state, for `leave_delegated`; `None` outside the
    /// runtime.
    pub(crate) enter_delegated: fn() -> Option<bool>,
    /// Restores the state `enter_delegated` returned.
    pub(crate) leave_delegated: fn(bool),
    /// Reports a panic that reached no caller.
    pub(crate) report_panic: fn(&'static str, Box<dyn Any + Send>),
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Installs the runtime's hooks (the first call wins: there is one runtime
/// implementation, so every later call installs the same functions).
pub(crate) fn install(hooks: Hooks) {
    let _ = HOOKS.set(hooks);
}

/// The running fiber, `None` outside the runtime.
pub(crate) fn current_fiber() -> Option<u32> {
    HOOKS.get().and_then(|h| (h.current_fiber)())
}

/// Delegated context for as long as the guard lives (nothing outside the
/// runtime).
pub(crate) fn enter_delegated() -> DelegatedGuard {
    DelegatedGuard { prev: HOOKS.get().and_then(|h| (h.enter_delegated)()) }
}

/// Reports a panic that reached no caller (outside the runtime: drops its
/// payload, catching a panic of the payload's own `Drop`).
pub(crate) fn report_panic(what: &'static str, p: Box<dyn Any + Send>) {
    match HOOKS.get() {
        Some(h) => (h.report_panic)(what, p),
        None => crate::error::drop_payload(p),
    }
}

/// Leaves delegated context when dropped (see [`enter_delegated`]).
pub(crate) struct DelegatedGuard {
    prev: Option<bool>,
}

impl Drop for DelegatedGuard {
    fn drop(&mut self) {
        if let (Some(prev), Some(h)) = (self.prev, HOOKS.get()) {
            (h.leave_delegated)(prev);
        }
    }
}
