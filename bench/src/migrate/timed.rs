//! The clients of the follow and launch rows: fibers that start together,
//! repeat one operation until told to stop and count it, timed by this
//! thread for one phase's duration.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gossamer::Runtime;

use crate::error::{BenchError, Result};
use crate::settings::Settings;

/// Runs `clients` fibers, client `c` on worker `on(c)`, each repeating an
/// operation `op()` made for it, for `s.duration`; returns the operations
/// they counted and the seconds they ran.
pub fn run<F>(
    rt: &Runtime,
    s: &Settings,
    clients: usize,
    on: impl Fn(usize) -> usize,
    op: impl Fn() -> F,
) -> Result<(u64, f64)>
where
    F: FnMut() + Send + 'static,
{
    let go = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (mut op, go, stop, ready) = (op(), go.clone(), stop.clone(), ready.clone());
            rt.handle().spawn_on(on(c), move || {
                ready.fetch_add(1, Ordering::SeqCst);
                while !go.load(Ordering::Relaxed) {
                    gossamer::yield_now();
                }
                let mut ops = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    op();
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
        ops += h.join().map_err(|e| BenchError::Other(format!("a client failed: {e}")))?;
    }
    Ok((ops, secs))
}
