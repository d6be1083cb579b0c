//! `Handle`: a cheap, cloneable reference to a running runtime, for code
//! that does not own it (tokio tasks, other threads, libraries).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::context;
use super::join::{self, JoinHandle};
use super::shared::Shared;

/// A reference to a running [`Runtime`](crate::Runtime): entrust values,
/// name trustees and start fibers from any thread, without owning the
/// runtime. Cloning is one reference-count increment; a handle is `Send`
/// and `Sync`.
///
/// The usual shape of a tokio program: build the gossamer runtime once in
/// `main`, keep it alive there (dropping it shuts it down), and give each
/// task a clone of its handle, or just the trusts it needs. Trusts work
/// from tokio tasks through
/// [`Trust::apply_async`](crate::Trust::apply_async) and
/// [`Trust::apply_with_async`](crate::Trust::apply_with_async), whose
/// futures never block the executor.
///
/// ```
/// # fn main() {
/// let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
/// let handle = rt.handle();
/// let tokio_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
/// let n = tokio_rt.block_on(async move {
///     let h = handle.clone();
///     tokio::spawn(async move {
///         let hits = h.entrust(0u64);
///         for _ in 0..10 {
///             hits.apply_async(|n| *n += 1).await;
///         }
///         hits.apply_async(|n| *n).await
///     })
///     .await
///     .unwrap()
/// });
/// assert_eq!(n, 10);
/// # }
/// ```
///
/// Methods panic once the runtime has shut down; [`is_running`](Handle::is_running)
/// tells.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("runtime", &self.shared.id).field("running", &self.is_running()).finish()
    }
}

impl Handle {
    pub(crate) fn new(shared: Arc<Shared>) -> Handle {
        Handle { shared }
    }

    /// The handle of the runtime whose worker thread calls this (in a
    /// fiber or a delegated closure), if any.
    pub fn try_current() -> Option<Handle> {
        context::current().map(|w| Handle { shared: w.shared.clone() })
    }

    /// The handle of the runtime whose worker thread calls this.
    ///
    /// # Panics
    /// Outside the runtime's threads.
    pub fn current() -> Handle {
        Self::try_current().expect("gossamer: Handle::current() called outside the runtime's threads")
    }

    /// False once the runtime has stopped.
    pub fn is_running(&self) -> bool {
        !self.shared.stopped()
    }

    /// Number of worker threads (of the whole program).
    pub fn threads(&self) -> usize {
        self.shared.n
    }

    pub(crate) fn check(&self) {
        assert!(self.is_running(), "gossamer: the runtime of this Handle has shut down");
    }

    /// Starts a fiber on a worker chosen round-robin among those that run
    /// fibers. Await the [`JoinHandle`] from any executor (it is
    /// [`IntoFuture`](std::future::IntoFuture)), or `join` it from a fiber or
    /// a plain thread.
    pub fn spawn<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.check();
        spawn(&self.shared, f)
    }

    /// Starts a fiber on worker `thread` of this process.
    ///
    /// # Panics
    /// If there is no such worker.
    pub fn spawn_on<F, R>(&self, thread: usize, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.check();
        spawn_on(&self.shared, thread, f)
    }
}

pub(crate) fn spawn<F, R>(s: &Shared, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let r = s.narrow_to_caller(None, s.client_workers());
    let k = r.start + s.outside_rr.fetch_add(1, Ordering::Relaxed) as usize % r.len();
    join::spawn_at(s, k, f)
}

pub(crate) fn spawn_on<F, R>(s: &Shared, thread: usize, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    assert!(thread < s.n, "gossamer: no worker {thread} (the runtime has {})", s.n);
    assert!(
        !s.crosses(None, thread),
        "gossamer: thread {thread} is in another process; start fibers there with gossamer::spawn_with"
    );
    join::spawn_at(s, thread, f)
}
