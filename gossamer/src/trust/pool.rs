//! `ThreadPool`: the thesis's Table II(a) interface, a thin wrapper over
//! [`Runtime`] with `entrust` and `spawn` from outside the runtime. Kept,
//! deprecated, for programs written against it: a [`Runtime`] has the same
//! calls.
#![allow(deprecated)]

use super::Trust;
use crate::runtime::{JoinHandle, Runtime};

/// A pool of worker threads with `entrust` and `spawn`, as in Table II(a)
/// of the thesis. Dropping it waits for spawned fibers to finish.
///
/// Deprecated: a [`Runtime`] is the same pool, with the same calls
/// (`rt.entrust(v)`, `rt.spawn(f)`) and a builder whose errors can be
/// handled.
///
/// ```
/// # #![allow(deprecated)]
/// use std::collections::HashMap;
/// let pool = gossamer::ThreadPool::new(2);
/// let trust = pool.entrust(HashMap::new());
/// let t = trust.clone();
/// pool.spawn(move || {
///     t.apply(|p| {
///         p.insert("Greeting", "Hello");
///     });
/// }).join().unwrap();
/// assert_eq!(trust.apply(|p| p.get("Greeting").map(|g| g.to_string())), Some("Hello".to_string()));
/// ```
#[deprecated(
    since = "0.2.0",
    note = "use gossamer::Runtime: `Runtime::builder().workers(n).build()?`, then `rt.entrust(v)` and `rt.spawn(f)`"
)]
pub struct ThreadPool {
    rt: Runtime,
}

impl ThreadPool {
    /// A pool of `threads` workers.
    ///
    /// # Panics
    /// If the threads cannot be started; use [`Runtime::builder`] to handle
    /// that as an error.
    pub fn new(threads: usize) -> ThreadPool {
        ThreadPool { rt: Runtime::builder().workers(threads).build().expect("gossamer: cannot start the thread pool") }
    }

    /// Entrusts `value` to one of the pool's trustees, round-robin.
    pub fn entrust<T: Send + 'static>(&self, value: T) -> Trust<T> {
        self.rt.entrust(value)
    }

    /// Runs `f` as a fiber on one of the pool's threads.
    pub fn spawn<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.rt.spawn(f)
    }

    /// The underlying runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }
}
