//! The process's maintainer: its clock's timer and the background reclaim
//! of its shards (memcached's clock event and LRU maintainer thread).
//!
//! A timer thread sleeps until each whole second of the program's clock
//! (whose origin every process shares: see [`crate::clock`]), refreshes
//! the relative time and unparks one maintainer fiber per shard of the
//! process, each on its shard's own thread. So the clock turns in every
//! process whether or not its clients talk, and an idle process wakes
//! once a second for it.
//!
//! Each time the clock turns, a maintainer delegates [`Shard::maintain`]
//! to its shard, a bounded batch at a time, so that expired and flushed
//! items are removed (and counted as `reclaimed`) without being asked
//! for. Being on the shard's thread, the delegation takes the trust's
//! local shortcut: the work runs between the trustee's other requests,
//! nothing is locked, and a process never reclaims another process's
//! shards. A maintainer also walks its shard's `lru_crawler crawl`, a
//! step at a time, from when the crawl starts (the process's agent wakes
//! the maintainers) until it is done. With `-o no_lru_maintainer` the timer still keeps the clock,
//! but nothing is reclaimed in the background, as in memcached.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use gossamer::{Parker, Trust, Unparker};

use super::shared::{bump, Shared};
use crate::clock;
use crate::store::shard::CRAWL_STEP;
use crate::store::Shard;

/// Items one delegated pass may reclaim before the trustee serves others.
const BATCH: usize = 1024;

/// Past the second's turn, so that the clock has surely turned.
const LATE: Duration = Duration::from_millis(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The timer and the maintainers of one process. Its locks are taken once
/// a second by the timer, and at start and stop; never for a request.
#[derive(Default)]
pub struct Maintenance {
    /// The maintainers, to unpark.
    fibers: Arc<Mutex<Vec<Unparker>>>,
    /// Dropped to stop the timer.
    stop: Mutex<Option<mpsc::Sender<()>>>,
    /// The timer thread, joined by the first maintainer to end.
    timer: Mutex<Option<JoinHandle<()>>>,
}

impl Maintenance {
    /// Starts the timer thread. Without it, the clock turns only as
    /// clients talk, and nothing is reclaimed in the background.
    pub fn start_timer(&self) {
        let (tx, rx) = mpsc::channel::<()>();
        let fibers = self.fibers.clone();
        let spawned = std::thread::Builder::new().name("gossamer-kv-clock".into()).spawn(move || loop {
            match rx.recv_timeout(clock::until_next_second() + LATE) {
                Err(RecvTimeoutError::Timeout) => {
                    clock::tick();
                    for u in lock(&fibers).iter() {
                        u.unpark();
                    }
                }
                _ => return,
            }
        });
        match spawned {
            Ok(t) => {
                *lock(&self.stop) = Some(tx);
                *lock(&self.timer) = Some(t);
            }
            Err(e) => tracing::error!("cannot start the clock's timer: {e}; time advances only with client traffic"),
        }
    }

    /// Wakes the maintainers (an `lru_crawler crawl` has started).
    pub fn wake(&self) {
        for u in lock(&self.fibers).iter() {
            u.unpark();
        }
    }

    /// Stops the timer and wakes the maintainers (the process is stopping).
    pub fn stop(&self) {
        drop(lock(&self.stop).take());
        for u in lock(&self.fibers).iter() {
            u.unpark();
        }
    }

    fn join_timer(&self) {
        let timer = lock(&self.timer).take();
        if let Some(t) = timer {
            if t.join().is_err() {
                tracing::error!("the clock's timer panicked");
            }
        }
    }
}

/// Runs the maintainer of `shard` (of the process `shared`) until the
/// process stops; `counts` says whether it counts the process's passes
/// (`lru_maintainer_juggles`; one maintainer per process does). Call on a
/// fiber of the shard's thread.
pub fn run(shared: Arc<Shared>, shard: Trust<Shard>, counts: bool) {
    let (parker, unparker) = Parker::new();
    lock(&shared.maintenance.fibers).push(unparker);
    let mut last = clock::now();
    // `request_stop` sets the flag before it unparks the maintainers.
    while !shared.stop.load(Ordering::SeqCst) {
        parker.park();
        let now = clock::now();
        if shared.stop.load(Ordering::SeqCst) {
            continue;
        }
        // A crawl walks on, a step at a time, until done.
        while shard.apply(move |s: &mut Shard| s.crawl_step(now, CRAWL_STEP)) {
            gossamer::yield_now();
        }
        if now == last || !shared.admin.lru_maintainer {
            continue;
        }
        last = now;
        while shard.apply(move |s: &mut Shard| s.maintain(now, BATCH)) {
            gossamer::yield_now();
        }
        if counts {
            bump(&shared.admin.juggles, 1);
        }
    }
    // The timer must be gone before the runtime is: it unparks fibers.
    shared.maintenance.join_timer();
}
