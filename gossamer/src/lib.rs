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
//! [`Transferable`]).
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

pub use error::{Error, JoinError, Panicked};
#[allow(deprecated)]
pub use objects::spawn_to_with;
pub use objects::{spawn_to, Barrier};
pub use rack::{main, topology, Topology};
pub use runtime::profile;
pub use runtime::{
    current_thread, spawn, spawn_on, threads, yield_now, Builder, Handle, JoinFuture, JoinHandle, Parker, Runtime,
    ShutdownReport, Stats, Unparker,
};
#[allow(deprecated)]
pub use trust::ThreadPool;
pub use trust::{
    block_on, entrust, entrust_on, local_trustee, spawn_with, trustee, ApplyFuture, Delegable, Latch, LatchGuard,
    Transferable, Trust, TrusteeRef,
};

#[cfg(feature = "nightly")]
pub use trust::delegable::NoRef;
