//! Asymmetric memory fences for the sleep/wake handshake.
//!
//! A worker about to sleep stores its `sleeping` flag and then checks its
//! slots; a publisher stores a slot flag and then checks `sleeping`. Each
//! side needs a full fence between its store and its load, or both could
//! miss the other (store buffering). Publishing is the hot path and
//! sleeping is rare, so the cost goes to the sleeper: with Linux's
//! `membarrier(PRIVATE_EXPEDITED)` the sleeper forces a full barrier on
//! every running thread of the process, and publishers need only a compiler
//! fence. Where `membarrier` is unavailable both sides use a real fence,
//! which on x86 is a locked instruction, kept out of line so that the hot
//! path's machine code stays free of it.

use std::sync::atomic::{compiler_fence, fence, AtomicBool, Ordering};
use std::sync::OnceLock;

static ASYMMETRIC: AtomicBool = AtomicBool::new(false);
static INIT: OnceLock<bool> = OnceLock::new();

#[cfg(all(target_os = "linux", not(miri)))]
mod sys {
    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier takes plain integers and touches no memory of ours.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long, 0 as libc::c_long) }
    }

    pub(super) fn register() -> bool {
        let supported = membarrier(MEMBARRIER_CMD_QUERY);
        supported >= 0
            && supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0
            && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    pub(super) fn heavy() -> bool {
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
mod sys {
    pub(super) fn register() -> bool {
        false
    }
    pub(super) fn heavy() -> bool {
        false
    }
}

/// Sets up asymmetric fences once per process (idempotent).
pub(crate) fn init() {
    INIT.get_or_init(|| {
        let ok = std::env::var_os("GOSSAMER_NO_MEMBARRIER").is_none() && sys::register();
        ASYMMETRIC.store(ok, Ordering::SeqCst);
        ok
    });
}

/// Whether publishers get away with a compiler fence (`membarrier` works).
pub(crate) fn asymmetric() -> bool {
    ASYMMETRIC.load(Ordering::Relaxed)
}

/// The publisher's side: between storing a slot flag and loading `sleeping`.
#[inline(always)]
pub(crate) fn light() {
    if ASYMMETRIC.load(Ordering::Relaxed) {
        compiler_fence(Ordering::SeqCst);
    } else {
        full_fence();
    }
}

/// The sleeper's side: between storing `sleeping` and checking the slots.
pub(crate) fn heavy() {
    if !(ASYMMETRIC.load(Ordering::Relaxed) && sys::heavy()) {
        full_fence();
    }
}

#[cold]
#[inline(never)]
fn full_fence() {
    fence(Ordering::SeqCst);
}
