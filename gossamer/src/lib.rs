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
//! use gossamer::{local_trustee, Runtime};
//!
//! let rt = Runtime::builder().workers(2).build()?;
//! rt.block_on(|| {
//!     let ct = local_trustee().entrust(17);
//!     let ct2 = ct.clone();
//!     let fiber = gossamer::spawn_on(1, move || ct2.apply(|c| *c += 1));
//!     ct.apply(|c| *c += 1);
//!     fiber.join().unwrap();
//!     assert_eq!(ct.apply(|c| *c), 19);
//! });
//! # Ok::<(), gossamer::Error>(())
//! ```
//!
//! ## The calls, in three families
//!
//! One rule names them: a plain name takes a closure and reaches threads of
//! this process; a `_with` name takes its code as a `fn` and its data as an
//! argument, and reaches any thread of any process.
//!
//! | family | this process (a closure) | any process (a `fn` and an argument) |
//! |---|---|---|
//! | entrust a value | [`entrust`], [`trustee`]`(i).entrust(v)`, [`local_trustee`] | [`entrust_on`]`(i, v)` |
//! | spawn a fiber | [`spawn`], [`spawn_on`]`(i, f)` | [`spawn_with`]`(i, f, arg)`, [`spawn_to`] |
//! | apply, waiting | [`Trust::apply`] | [`Trust::apply_with`] |
//! | apply, with a callback later | [`Trust::apply_then`] ([`Trust::try_apply_then`] sees panics) | [`Trust::apply_with_then`] |
//! | apply, as a future | [`Trust::apply_async`] | [`Trust::apply_with_async`] |
//! | a closure that may block, on a `Trust<Latch<T>>` | [`Trust::launch`], [`Trust::launch_then`] | [`Trust::launch_with`], [`Trust::launch_with_then`] |
//!
//! From outside the runtime, [`Runtime`] (or its [`Handle`]) has
//! `entrust`, `trustee`, `spawn`, `spawn_on` and [`Runtime::block_on`].
//!
//! ## Adaptive trusts: a lock while uncontended, delegation while contended
//!
//! An [`Adaptive<T>`] (from [`TrusteeRef::entrust_adaptive`] or
//! [`entrust_adaptive`]) has the calls and guarantees of a [`Trust<T>`]
//! within a process, but runs closures in place under a per-property lock
//! while the property is uncontended, and delegates them to its trustee
//! while it is contended; [`Adaptive::set_policy`] fixes or frees the mode
//! while the program runs.
//!
//! ```
//! use gossamer::{Mode, Policy};
//! let rt = gossamer::Runtime::builder().workers(2).build()?;
//! rt.block_on(|| {
//!     let total = gossamer::trustee(1).entrust_adaptive(0u64);
//!     total.apply(|t| *t += 5); // uncontended: runs in place, under the lock
//!     total.set_policy(Policy::Delegate);
//!     assert_eq!(total.mode(), Mode::Delegate);
//!     total.apply_then(|t| *t += 1, |()| {}); // runs on thread 1
//!     total.set_policy(Policy::Adaptive);
//!     assert_eq!(total.apply(|t| *t), 6);
//! });
//! # Ok::<(), gossamer::Error>(())
//! ```
//!
//! ## One program, several processes
//!
//! [`main`] runs a program over as many processes of the same binary as
//! its launcher asks for (`--gossamer-processes N`, `GOSSAMER_PROCESSES`,
//! Slurm or `mpirun`; one process when started plainly). The `_with` calls
//! then reach every thread of every process:
//!
//! ```
//! fn program() {
//!     let last = gossamer::threads() - 1; // in the last process
//!     let greeting = gossamer::entrust_on(last, String::from("hello"));
//!     let len = greeting.apply_with(|s, more: String| { s.push_str(&more); s.len() }, " world".into());
//!     assert_eq!(len, 11);
//! }
//!
//! fn main() {
//!     gossamer::main(program, 2); // 2 worker threads in all
//! }
//! ```
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
//! [`#[gossamer::transferable]`](transferable)); byte buffers that should
//! not be copied between the processes of a host are [`SharedBytes`].
//! [`Builder::strict`] (or `GOSSAMER_STRICT=1`) makes one process enforce
//! every one of these cross-process rules, so tests meet them before a
//! multi-process run.
#![cfg_attr(feature = "nightly", feature(auto_traits, negative_impls))]
#![warn(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod channel;
mod error;
#[allow(dead_code)] // the UCX fabric is being wired in
mod fabric;
mod fiber;
pub mod objects;
pub mod rack;
mod runtime;
mod sync;
mod trust;

pub use channel::heap::SharedBytes;
pub use error::{Error, JoinError, Panicked};
#[allow(deprecated)]
pub use objects::spawn_to_with;
pub use objects::{spawn_to, Barrier};
pub use rack::{main, topology, Topology};
pub use runtime::profile;
pub use runtime::{
    current_thread, dedicated, set_dedicated, set_dedicated_policy, spawn, spawn_on, stats, threads, yield_now,
    Builder, DedicatedChange, DedicatedPolicy, Handle, JoinFuture, JoinHandle, Parker, Runtime, ShutdownReport, Stats,
    TrusteeParams, Unparker,
};
#[allow(deprecated)]
pub use trust::ThreadPool;
pub use trust::{
    block_on, entrust, entrust_on, local_trustee, spawn_with, trustee, ApplyFuture, Delegable, FollowParams, Latch,
    LatchGuard, MigrationPolicy, Transferable, Trust, TrusteeRef,
};
pub use trust::{entrust_adaptive, Adaptive, Mode, Policy, Thresholds};

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
