//! The process's maintainer: its clock's timer and the background reclaim
//! of its shards (memcached's clock event and LRU maintainer thread).
//!
//! A timer thread sleeps until each whole second of the program's clock
//! (whose origin every process shares: see [`crate::clock`]), refreshes
//! the relative time and unparks the maintainer, a fiber on the process's
//! first thread. So the clock turns in every process whether or not its
//! clients talk, and an idle process wakes once a second for it.
//!
//! Each time the clock turns, the maintainer delegates
//! [`Shard::maintain`] to every shard of its own process, a bounded batch
//! at a time, so that expired and flushed items are removed (and counted
//! as `reclaimed`) without being asked for. The shards' trustees do the
//! work, as for any request: nothing is locked, and a process never
//! reclaims another process's shards. With `-o no_lru_maintainer` the
//! timer still keeps the clock, but nothing is reclaimed in the
//! background, as in memcached.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use gossamer::{Parker, Trust};

use super::shared::{bump, Shared};
use crate::clock;
use crate::store::Shard;

/// Items one delegated pass may reclaim before the trustee serves others.
const BATCH: usize = 1024;

/// Past the second's turn, so that the clock has surely turned.
const LATE: Duration = Duration::from_millis(1);

/// Runs the maintainer of the process `shared`, whose own shards are
/// `shards`, until the process stops. Call on a fiber.
pub fn run(shared: Arc<Shared>, shards: Vec<Trust<Shard>>) {
    let (parker, unparker) = Parker::new();
    let _ = shared.maintainer.set(unparker.clone());
    let (stop_timer, stopped) = mpsc::channel::<()>();
    let timer = std::thread::Builder::new().name("gossamer-kv-clock".into()).spawn(move || loop {
        match stopped.recv_timeout(clock::until_next_second() + LATE) {
            Err(RecvTimeoutError::Timeout) => {
                clock::tick();
                unparker.unpark();
            }
            _ => return,
        }
    });
    let timer = match timer {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("cannot start the clock's timer: {e}; time advances only with client traffic");
            return;
        }
    };
    let mut last = clock::now();
    while !shared.stop.load(Ordering::Acquire) {
        parker.park();
        let now = clock::now();
        if shared.stop.load(Ordering::Acquire) || now == last || !shared.admin.lru_maintainer {
            continue;
        }
        last = now;
        for shard in &shards {
            while shard.apply(move |s: &mut Shard| s.maintain(now, BATCH)) {
                gossamer::yield_now();
            }
        }
        bump(&shared.admin.juggles, 1);
    }
    drop(stop_timer);
    if timer.join().is_err() {
        tracing::error!("the clock's timer panicked");
    }
}
