//! Starting and stopping a measurement: every participant (OS thread or
//! fiber) checks in, all start on one signal, and all stop on another after
//! the measurement's duration.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The start and stop signals of one measurement.
#[derive(Default)]
pub struct Control {
    ready: AtomicUsize,
    go: AtomicBool,
    stop: AtomicBool,
}

impl Control {
    pub fn new() -> Arc<Control> {
        Arc::new(Control::default())
    }

    /// Checks in, then waits for the start signal, calling `wait` while it
    /// waits (a fiber yields, a thread spins).
    pub fn arrive(&self, wait: impl Fn()) {
        self.ready.fetch_add(1, Ordering::SeqCst);
        while !self.go.load(Ordering::Acquire) {
            wait();
        }
    }

    /// True once the measurement is over.
    #[inline(always)]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// From the driving thread: waits for `participants` check-ins, gives the
    /// start signal, sleeps `duration`, gives the stop signal. Returns the
    /// start time.
    pub fn drive(&self, participants: usize, duration: Duration) -> Instant {
        while self.ready.load(Ordering::SeqCst) < participants {
            thread::sleep(Duration::from_micros(100));
        }
        let start = Instant::now();
        self.go.store(true, Ordering::Release);
        thread::sleep(duration);
        self.stop.store(true, Ordering::Relaxed);
        start
    }
}

/// How a waiting OS thread passes time.
pub fn thread_wait() {
    std::hint::spin_loop();
    thread::yield_now();
}

/// How a waiting fiber passes time.
pub fn fiber_wait() {
    gossamer::yield_now();
}
