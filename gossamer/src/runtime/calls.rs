//! The calls a fiber makes on its own runtime: start fibers on this
//! process's threads, yield, and ask where it runs.

use super::context::{self, worker};
use super::JoinHandle;

/// Starts a fiber on the calling thread.
///
/// # Panics
/// Outside the runtime's threads.
pub fn spawn<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let w = worker();
    super::spawn_at_worker(w, w.index, f)
}

/// Starts a fiber on worker `thread` of this process. For a thread of any
/// process of a multi-process program, use [`spawn_with`](crate::spawn_with).
///
/// # Panics
/// Outside the runtime's threads, if there is no such worker, or if it runs
/// in another process.
pub fn spawn_on<F, R>(thread: usize, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let w = worker();
    assert!(thread < w.shared.n, "gossamer: no worker {thread} (the runtime has {})", w.shared.n);
    assert!(
        !w.shared.crosses(Some(w.index), thread),
        "gossamer: thread {thread} is in another process; start fibers there with gossamer::spawn_with, which \
         carries the closure's data as a serializable argument"
    );
    super::spawn_at_worker(w, thread, f)
}

/// Lets the other ready fibers of this thread run.
pub fn yield_now() {
    if let Some(w) = context::current() {
        w.yield_now();
    }
}

/// Index of the calling worker thread, if it is one.
pub fn current_thread() -> Option<usize> {
    context::current().map(|w| w.index)
}

/// The counters of the calling fiber's runtime, over this process's
/// workers, as [`Runtime::stats`](crate::Runtime::stats) gives them.
///
/// ```
/// let rt = gossamer::Runtime::builder().workers(2).build()?;
/// let stats = rt.block_on(gossamer::stats);
/// assert_eq!(stats.unhandled_panics, 0);
/// # Ok::<(), gossamer::Error>(())
/// ```
///
/// # Panics
/// Outside the runtime's threads.
pub fn stats() -> super::Stats {
    worker().shared.stats()
}

/// Number of worker threads of the calling thread's runtime.
///
/// # Panics
/// Outside the runtime's threads.
pub fn threads() -> usize {
    worker().shared.n
}
