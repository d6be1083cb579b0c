//! Who must wake whom, so that a connection worker may block in its poller
//! even while it waits for answers.
//!
//! A worker about to block sets its `sleeping` flag, issues a full fence,
//! and then lets its thread serve and poll once more before it blocks; a
//! worker that has made something available to a sleeper (a request for
//! the sleeper's shard, or the answer to one of the sleeper's requests)
//! issues a full fence and then reads the flag. Either the sleeper sees
//! the new work in its last look, or the other side sees the flag and
//! wakes it through its `mio::Waker` (Dekker's pattern).
//!
//! To know whose answers it has just published, a trustee notes the origin
//! of every request it runs in a per-thread mask (this module). The mask is
//! read by the trustee's own connection worker after its thread has served
//! a batch, by which time the answers are published. Workers are named by
//! their global thread ids; a bit may stand for several (from 63 on, or a
//! worker of another process), which costs at most a needless wake-up.
//!
//! This is how a server of one process sleeps. Workers of a multi-process
//! program park instead (see [`super::watcher`]): other processes cannot
//! reach a `mio::Waker`.

use std::cell::Cell;

thread_local! {
    static SERVED: Cell<u64> = const { Cell::new(0) };
}

/// The mask bit of the worker on global thread `w` (threads from 63 on
/// share the last bit).
pub fn bit(w: usize) -> u64 {
    1u64 << w.min(63)
}

/// Runs on the trustee: a request from the worker on global thread
/// `origin` was served.
#[inline]
pub fn note_served(origin: usize) {
    SERVED.with(|c| c.set(c.get() | bit(origin)));
}

/// Takes the mask of workers served on this thread since the last call.
pub fn take_served() -> u64 {
    SERVED.with(|c| c.replace(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask() {
        assert_eq!(take_served(), 0);
        note_served(1);
        note_served(70);
        let m = take_served();
        assert_eq!(m, bit(1) | bit(63));
        assert_eq!(take_served(), 0);
    }
}
