//! Parking a fiber until something outside the runtime happens: a
//! [`Parker`] suspends the fiber that owns it, and its [`Unparker`], from
//! any thread of the process (a worker or not), makes it run again.
//!
//! While the fiber is parked its worker thread goes on serving (requests
//! from other threads, processes and hosts, other fibers) and, when it has
//! nothing else, sleeps on its doorbell like any idle worker; the unpark
//! rings that doorbell. This is how a fiber that waits for I/O readiness
//! (reported by a thread of its own that blocks in `epoll_wait`, say) lets
//! its thread keep its trustee duties, instead of blocking the thread in a
//! system call that delegated requests cannot interrupt.
//!
//! An unpark before the park is not lost: the next park returns at once (a
//! single token, as `std::thread::park`). Wake-ups may be spurious; park in
//! a loop that checks its condition.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use super::context;
use super::shared::Shared;

/// The state a parker and its unparkers share.
struct State {
    /// Set by an unpark, consumed by a park.
    token: AtomicBool,
    /// The fiber is suspended in `park` (only its worker changes this to
    /// true; whoever makes it ready swaps it to false).
    parked: AtomicBool,
    /// The parked fiber's id on its worker.
    fiber: AtomicU32,
    /// The worker the fiber runs on.
    worker: usize,
    /// Its runtime.
    shared: Arc<Shared>,
}

impl State {
    /// On the fiber's worker: makes the fiber ready if it is still parked.
    fn release(&self, w: &super::worker::Worker) {
        if self.parked.swap(false, Ordering::SeqCst) {
            w.make_ready(self.fiber.load(Ordering::Relaxed));
        }
    }
}

/// Parks the fiber that created it (see the module documentation).
///
/// ```
/// # let rt = gossamer::Runtime::builder().workers(1).build().unwrap();
/// # rt.block_on(|| {
/// let (parker, unparker) = gossamer::Parker::new();
/// let waker = std::thread::spawn(move || {
///     std::thread::sleep(std::time::Duration::from_millis(10));
///     unparker.unpark(); // from a thread outside the runtime
/// });
/// parker.park(); // this fiber sleeps; its thread serves meanwhile
/// waker.join().unwrap();
/// # });
/// ```
pub struct Parker {
    state: Arc<State>,
    /// Not `Send`: a parker belongs to its worker thread.
    _local: std::marker::PhantomData<*const ()>,
}

/// Wakes a [`Parker`]'s fiber; cheap to clone, usable from any thread of
/// the process.
#[derive(Clone)]
pub struct Unparker {
    state: Arc<State>,
}

impl std::fmt::Debug for Unparker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unparker").field("worker", &self.state.worker).finish()
    }
}

impl Parker {
    /// A parker for fibers of the calling worker thread, and its unparker.
    ///
    /// # Panics
    /// Outside the runtime's threads.
    pub fn new() -> (Parker, Unparker) {
        let w = context::current().expect("gossamer: Parker::new() must be called on a thread of the runtime");
        let state = Arc::new(State {
            token: AtomicBool::new(false),
            parked: AtomicBool::new(false),
            fiber: AtomicU32::new(0),
            worker: w.index,
            shared: w.shared.clone(),
        });
        (Parker { state: state.clone(), _local: std::marker::PhantomData }, Unparker { state })
    }

    /// Suspends the calling fiber until an unpark (at once if one came
    /// since the last park). Other fibers of the thread, and its trustee
    /// duties, go on meanwhile.
    ///
    /// # Panics
    /// Outside a fiber of the worker the parker was made on, or in
    /// delegated context.
    pub fn park(&self) {
        let s = &self.state;
        let w = context::current().expect("gossamer: Parker::park() outside the runtime");
        assert_eq!(w.index, s.worker, "gossamer: a parker parks fibers of the worker it was made on");
        w.check_may_block();
        loop {
            if s.token.swap(false, Ordering::SeqCst) {
                return;
            }
            s.fiber.store(w.current_fiber(), Ordering::Relaxed);
            s.parked.store(true, Ordering::SeqCst);
            // Dekker with `unpark`: it sets the token, then reads `parked`.
            // (If the swap finds `parked` already cleared, an unpark's
            // release made us ready: suspend and take that turn.)
            if s.token.load(Ordering::SeqCst) && s.parked.swap(false, Ordering::SeqCst) {
                continue;
            }
            crate::fiber::suspend();
        }
    }
}

impl Unparker {
    /// Wakes the parked fiber, or lets its next park return at once.
    pub fn unpark(&self) {
        let s = &self.state;
        s.token.store(true, Ordering::SeqCst);
        if !s.parked.load(Ordering::SeqCst) {
            return;
        }
        match context::current() {
            Some(w) if Arc::ptr_eq(&w.shared, &s.shared) && w.index == s.worker => s.release(w),
            _ => {
                let state = s.clone();
                s.shared.inject(
                    s.worker,
                    Box::new(move || {
                        if let Some(w) = context::current() {
                            state.release(w);
                        }
                    }),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Runtime;
    use std::time::{Duration, Instant};

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime with fibers")]
    fn unpark_before_park_is_kept() {
        let rt = Runtime::builder().workers(1).build().unwrap();
        rt.block_on(|| {
            let (p, u) = Parker::new();
            u.unpark();
            u.unpark();
            p.park(); // returns: one token
        });
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime with fibers")]
    fn parked_fiber_lets_its_thread_serve_and_wakes_from_outside() {
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(|| {
            let counter = crate::trustee(0).entrust(0u64);
            let (p, u) = Parker::new();
            // A fiber on worker 1 delegates to worker 0 while worker 0's
            // fiber is parked, then a plain thread unparks it.
            let c = counter.clone();
            let other = crate::spawn_on(1, move || {
                for _ in 0..1000 {
                    c.apply(|v| *v += 1);
                }
                let t = std::thread::spawn(move || u.unpark());
                t.join().unwrap();
            });
            let start = Instant::now();
            p.park();
            assert!(start.elapsed() < Duration::from_secs(10));
            other.join().unwrap();
            assert_eq!(counter.apply(|v| *v), 1000);
        });
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime with fibers")]
    fn ping_pong_between_workers() {
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(|| {
            let (p0, u0) = Parker::new();
            let (tx, rx) = std::sync::mpsc::channel();
            let other = crate::spawn_on(1, move || {
                let (p1, u1) = Parker::new();
                tx.send(u1).unwrap();
                for _ in 0..500 {
                    u0.unpark();
                    p1.park();
                }
            });
            // Yield while waiting: the spawn leaves this thread only when
            // it flushes its batches.
            let start = Instant::now();
            let u1 = loop {
                if let Ok(u) = rx.try_recv() {
                    break u;
                }
                assert!(start.elapsed() < Duration::from_secs(10), "the other fiber never started");
                crate::yield_now();
            };
            for _ in 0..500 {
                p0.park();
                u1.unpark();
            }
            other.join().unwrap();
        });
    }
}
