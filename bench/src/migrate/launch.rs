//! The launch rows of the migrate benchmark: clients on every worker
//! `launch` onto a latched counter (`Trust<Latch<u64>>`), once on a counter
//! that never moved (`launch-stay`, on trustee 0) and once on one moved to
//! the last trustee before the clients start (`launch-moved`: each launch
//! starts on trustee 0, which sends it on to where the value is), each for
//! one phase's duration.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gossamer::{Latch, Runtime};

use crate::error::{expect_eq, BenchError, Result};
use crate::settings::Settings;
use crate::work::fetch_add;

/// Launches per second (in millions) on the counter, moved first or not.
pub fn run(s: &Settings, moved: bool) -> Result<f64> {
    let n = s.threads;
    let rt = Runtime::builder().workers(n).pin_threads(s.pin).build()?;
    let counter = rt.block_on(move || {
        let t = gossamer::trustee(0).entrust(Latch::new(0u64));
        if moved {
            t.migrate_to(gossamer::trustee(n - 1));
        }
        t
    });
    let go = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let clients = n * s.fibers;
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (t, go, stop, ready) = (counter.clone(), go.clone(), stop.clone(), ready.clone());
            rt.handle().spawn_on(c % n, move || {
                ready.fetch_add(1, Ordering::SeqCst);
                while !go.load(Ordering::Relaxed) {
                    gossamer::yield_now();
                }
                let mut ops = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    black_box(t.launch(fetch_add));
                    ops += 1;
                }
                ops
            })
        })
        .collect();
    while ready.load(Ordering::SeqCst) < clients {
        std::thread::sleep(Duration::from_millis(1));
    }
    go.store(true, Ordering::SeqCst);
    let start = Instant::now();
    std::thread::sleep(s.duration);
    stop.store(true, Ordering::SeqCst);
    let secs = start.elapsed().as_secs_f64();
    let mut ops = 0;
    for h in handles {
        ops += h.join().map_err(|e| BenchError::Other(format!("a launching client failed: {e}")))?;
    }
    let total = rt.block_on(move || counter.launch(|v| *v));
    expect_eq("latched counter", total, ops + s.fault as u64)?;
    drop(rt);
    Ok(ops as f64 / secs / 1e6)
}
