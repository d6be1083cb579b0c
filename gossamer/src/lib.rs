//! # Gossamer: delegation instead of locks
//!
//! Put shared data in a [`Trust<T>`] instead of an `Arc<Mutex<T>>`. The data
//! (the *property*) then lives with one *trustee* thread, and every access
//! is a closure sent to that thread and run there, exclusively, in batches:
//! no lock is taken and no cache line holding the data bounces between
//! cores. Each worker thread is at once a trustee and a client, and runs
//! many light-weight *fibers*, so a thread keeps many requests in flight
//! while it serves others.
//!
//! ```
//! use gossamer::{Runtime, local_trustee, spawn};
//!
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     let ct = local_trustee().entrust(17);
//!     let ct2 = ct.clone();
//!     let fiber = gossamer::spawn_on(1, move || ct2.apply(|c| *c += 1));
//!     ct.apply(|c| *c += 1);
//!     fiber.join().unwrap();
//!     assert_eq!(ct.apply(|c| *c), 19);
//! });
//! ```
//!
//! The core operations (chapter 2 of the `Trust<T>` thesis):
//! * [`Trust::apply`]: run a closure on the property and wait for its result
//!   (only the calling fiber waits);
//! * [`Trust::apply_then`]: run it without waiting; a callback gets the
//!   result later, on the calling thread;
//! * [`Trust::apply_with`]: pass a variable-size argument by value;
//! * [`Trust::launch`] on a `Trust<Latch<T>>`: run a closure that may itself
//!   block, in a fiber on the trustee.
//!
//! Built from trusts, [`objects`] adds what whole programs need across
//! threads and processes: data-affine [`spawn_to`], a [`Barrier`], bounded
//! channels, a broadcast ring and shared read-only values.
//!
//! From async code — tokio's multi-thread runtime or any other executor —
//! [`Trust::apply_async`] and [`Trust::apply_with_async`] return a future
//! ([`ApplyFuture`]) instead of waiting, so no executor thread blocks and a
//! task may keep many requests in flight; [`Runtime::handle`] gives tasks a
//! cheap, cloneable [`Handle`], and [`block_on`] waits for a future inside a
//! fiber. The library depends on no executor.
//!
//! Delegated closures run to completion and may not block: a blocking call
//! in one panics with a message naming `launch`. They may not capture
//! references or raw pointers, and only code given as a `fn` crosses into
//! another process: the `_with` forms (`apply_with`, `launch_with`,
//! `spawn_with`, ...) take their code as a `fn` and their data as an
//! argument, copied into the other process (see [`Delegable`] and
//! [`Transferable`]; your own types cross once marked
//! [`#[gossamer::transferable]`](transferable)). [`Builder::strict`] (or
//! `GOSSAMER_STRICT=1`) makes one process enforce every one of these
//! cross-process rules, so tests meet them before a multi-process run.
#![cfg_attr(feature = "nightly", feature(auto_traits, negative_impls))]
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod channel;
mod error;
#[allow(dead_code)] // the UCX fabric is being wired in
mod fabric;
mod fiber;
pub mod objects;
pub mod rack;
mod runtime;
mod sync;
mod trust;

pub use error::{Error, JoinError, Panicked};
pub use objects::{spawn_to, spawn_to_with, Barrier};
pub use rack::{entrust_on, main, spawn_with, topology, Topology};
pub use runtime::profile;
pub use runtime::{
    Builder, Handle, JoinFuture, JoinHandle, Parker, Runtime, ShutdownReport, Stats, ThreadPool, Unparker,
};
pub use trust::{
    block_on, local_trustee, trustee, ApplyFuture, Delegable, Latch, LatchGuard, Transferable, Trust, TrusteeRef,
};

#[cfg(feature = "nightly")]
pub use trust::delegable::NoRef;

/// The serde that [`Transferable`] is built on, re-exported so that users
/// need no serde dependency of their own (see [`transferable`]).
pub use serde;

/// Makes a struct or enum [`Transferable`]: derives serde's `Serialize` and
/// `Deserialize` through [`gossamer::serde`](crate::serde), so the type may
/// be an argument, a result or a property anywhere in the program, other
/// processes included. Every field must be transferable too.
///
/// ```
/// #[gossamer::transferable]
/// struct Stats {
///     hits: u64,
///     misses: u64,
/// }
///
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// let counts = gossamer::entrust_on(1, Stats { hits: 0, misses: 0 });
/// let hits = counts.apply_with(|s, ()| { s.hits += 1; s.hits }, ());
/// let snapshot: Stats = counts.apply_with(|s, ()| Stats { hits: s.hits, misses: s.misses }, ());
/// assert_eq!((hits, snapshot.hits, snapshot.misses), (1, 1, 0));
/// # });
/// ```
pub use gossamer_macros::transferable;

fn worker() -> &'static runtime::worker::Worker {
    runtime::context::current().expect(
        "gossamer: this call must be made on a thread of the runtime (inside Runtime::block_on or a spawned fiber)",
    )
}

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
    runtime::spawn_at_worker(w, w.index, f)
}

/// Starts a fiber on worker `thread` of this process. For a thread of any
/// process of a multi-process program, use [`spawn_with`].
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
    runtime::spawn_at_worker(w, thread, f)
}

/// Lets the other ready fibers of this thread run.
pub fn yield_now() {
    if let Some(w) = runtime::context::current() {
        w.yield_now();
    }
}

/// Entrusts `value` to a trustee chosen round-robin by the calling thread
/// among this process's workers (the dedicated trustees, if the runtime has
/// some). To place a property in another process, use
/// [`entrust_on`](crate::entrust_on), which moves it serialized.
///
/// # Panics
/// Outside the runtime's threads.
pub fn entrust<T: Send + 'static>(value: T) -> Trust<T> {
    let w = worker();
    let k = w.next_in(w.shared.placement_range(Some(w.index)));
    TrusteeRef::new(k, w.shared.id).entrust(value)
}

/// Index of the calling worker thread, if it is one.
pub fn current_thread() -> Option<usize> {
    runtime::context::current().map(|w| w.index)
}

/// Number of worker threads of the calling thread's runtime.
///
/// # Panics
/// Outside the runtime's threads.
pub fn threads() -> usize {
    worker().shared.n
}
