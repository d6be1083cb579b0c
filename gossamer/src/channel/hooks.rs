//! What the channel asks of the scheduler above it while it encodes and
//! decodes messages: which fiber is running, entering delegated context
//! for the user's serialization code, and where a panic of a value's `Drop`
//! is reported; and of the fabric, which payloads from another host landed
//! beside the region instead of in it. The channel knows nothing of the
//! runtime or the fabric; the runtime installs these once, when it starts
//! its first worker. Until then (the channel's own unit tests) every thread
//! counts as outside any runtime, and every payload lies in the region.

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
    /// The payload the fabric kept beside the region for the bytes at an
    /// address of the region and a length, if it kept one (see
    /// `fabric::landed::take`).
    pub(crate) take_landed: TakeLanded,
}

/// See [`Hooks::take_landed`].
pub(crate) type TakeLanded = fn(usize, usize) -> Result<Option<Vec<u8>>, &'static str>;

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

/// The payload that landed beside the region for the `len` bytes at
/// address `at` of the region, if one did (it is then the reader's, and
/// the region does not hold those bytes), or why those bytes cannot be
/// read. Outside the runtime, `None`: the region holds every payload.
pub(crate) fn take_landed(at: usize, len: usize) -> Result<Option<Vec<u8>>, &'static str> {
    match HOOKS.get() {
        Some(h) => (h.take_landed)(at, len),
        None => Ok(None),
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
