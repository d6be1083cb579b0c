//! Sleeping and waking a worker through its doorbell's futex word. The
//! word lives in the (possibly shared) region, so a thread of one process
//! can wake a thread of another. Elsewhere than Linux, and under Miri, the
//! thread's own park/unpark is used (one process only).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

#[cfg(all(target_os = "linux", not(miri)))]
mod imp {
    use super::*;

    pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: FUTEX_WAIT reads the word at this valid, aligned address
        // and sleeps while it equals `expected`, for at most `ts`. Not
        // PRIVATE: the word may be in memory shared between processes.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec);
        }
    }

    pub(crate) fn wake(word: &AtomicU32, _thread: Option<&std::thread::Thread>) {
        // SAFETY: FUTEX_WAKE only uses the address as a key.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
mod imp {
    use super::*;

    pub(crate) fn wait(_word: &AtomicU32, _expected: u32, timeout: Duration) {
        std::thread::park_timeout(timeout);
    }

    pub(crate) fn wake(_word: &AtomicU32, thread: Option<&std::thread::Thread>) {
        if let Some(t) = thread {
            t.unpark();
        }
    }
}

/// The current value of a futex word, read before checking for work.
#[inline]
pub(crate) fn ticket(word: &AtomicU32) -> u32 {
    word.load(Ordering::Acquire)
}

/// Sleeps until the word differs from `ticket`, a wake, or the timeout.
pub(crate) fn wait(word: &AtomicU32, ticket: u32, timeout: Duration) {
    imp::wait(word, ticket, timeout)
}

/// Changes the word and wakes its sleeper. `thread` is the sleeper's handle
/// when it is a thread of this process (used where futexes are not).
#[cold]
pub(crate) fn wake(word: &AtomicU32, thread: Option<&std::thread::Thread>) {
    word.store(word.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
    imp::wake(word, thread)
}
