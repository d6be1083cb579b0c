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
    use std::sync::atomic::{AtomicI64, Ordering};

    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_GLOBAL_EXPEDITED: libc::c_long = 1 << 1;
    const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_long = 1 << 2;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    /// The command the sleeper issues.
    static HEAVY: AtomicI64 = AtomicI64::new(0);

    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier takes plain integers and touches no memory of ours.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long, 0 as libc::c_long) }
    }

    /// Registers for the expedited barrier: private to this process, or
    /// global when workers of other processes share our slots.
    pub(super) fn register(global: bool) -> bool {
        let supported = membarrier(MEMBARRIER_CMD_QUERY);
        let (cmd, reg) = if global {
            (MEMBARRIER_CMD_GLOBAL_EXPEDITED, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED)
        } else {
            (MEMBARRIER_CMD_PRIVATE_EXPEDITED, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
        };
        let ok = supported >= 0 && supported & cmd != 0 && membarrier(reg) == 0;
        if ok {
            HEAVY.store(cmd, Ordering::Relaxed);
        }
        ok
    }

    pub(super) fn heavy() -> bool {
        membarrier(HEAVY.load(Ordering::Relaxed)) == 0
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
mod sys {
    pub(super) fn register(_global: bool) -> bool {
        false
    }
    pub(super) fn heavy() -> bool {
        false
    }
}

/// Sets up asymmetric fences once per process. `global`: the program has
/// several processes sharing slots, so the barrier must reach them all
/// (decided by the first runtime of the process).
pub(crate) fn init(global: bool) {
    INIT.get_or_init(|| {
        let ok = std::env::var_os("GOSSAMER_NO_MEMBARRIER").is_none() && sys::register(global);
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
