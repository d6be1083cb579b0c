//! One measurement of the migrate benchmark: the trust run through its
//! phases, and the lock baseline.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gossamer::Runtime;

use crate::error::{expect_eq, BenchError, Result};
use crate::settings::Settings;
use crate::work::fetch_add;

/// The phases of a trust run, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Before,
    During,
    After,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Before, Phase::During, Phase::After];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::During => "during",
            Phase::After => "after",
        }
    }
}

/// What a trust run measured.
pub struct TrustRun {
    /// Mops/s per phase, in `Phase::ALL` order.
    pub mops: [f64; 3],
    /// Moves made during the `during` phase.
    pub moves: u64,
}

/// The phase clock shared by the clients: the phase index, or `STOP`.
const STOP: usize = usize::MAX;

/// The trust run: clients on every worker, phases switched by this thread.
pub fn trust(s: &Settings, interval: Duration) -> Result<TrustRun> {
    let n = s.threads;
    let rt = Runtime::builder().workers(n).pin_threads(s.pin).build()?;
    let phase = Arc::new(AtomicUsize::new(0));
    let moves = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicUsize::new(0));
    let clients = n * s.fibers;
    let counter = rt.block_on(|| gossamer::trustee(0).entrust(0u64));
    // Clients: each counts its increments per phase.
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (t, phase, ready) = (counter.clone(), phase.clone(), ready.clone());
            rt.handle().spawn_on(c % n, move || {
                let mut ops = [0u64; 3];
                ready.fetch_add(1, Ordering::SeqCst);
                loop {
                    let p = phase.load(Ordering::Relaxed);
                    if p == STOP {
                        break;
                    }
                    black_box(t.apply(fetch_add));
                    ops[p] += 1;
                }
                ops
            })
        })
        .collect();
    let moving = Arc::new(AtomicBool::new(true));
    let mover = {
        let (t, phase, moves, moving) = (counter.clone(), phase.clone(), moves.clone(), moving.clone());
        rt.handle().spawn_on(0, move || {
            while phase.load(Ordering::Relaxed) == 0 {
                gossamer::yield_now();
            }
            let mut i = 1;
            while phase.load(Ordering::Relaxed) == 1 {
                t.migrate_to(gossamer::trustee(i % n));
                moves.fetch_add(1, Ordering::Relaxed);
                i += 1;
                let until = Instant::now() + interval;
                while Instant::now() < until && phase.load(Ordering::Relaxed) == 1 {
                    gossamer::yield_now();
                }
            }
            // `after`: the counter ends away from trustee 0, where the
            // clients' trusts were made; they reach it by their routes.
            t.migrate_to(gossamer::trustee(1 % n));
            moving.store(false, Ordering::SeqCst);
        })
    };
    while ready.load(Ordering::SeqCst) < clients {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut secs = [0f64; 3];
    for (i, slot) in secs.iter_mut().enumerate() {
        phase.store(i, Ordering::SeqCst);
        let start = Instant::now();
        std::thread::sleep(s.duration);
        *slot = start.elapsed().as_secs_f64();
        if i == 1 {
            // The last move ends before `after` starts (the few requests
            // meanwhile count for `after`).
            phase.store(2, Ordering::SeqCst);
            while moving.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
    }
    phase.store(STOP, Ordering::SeqCst);
    let mut per_phase = [0u64; 3];
    for h in handles {
        let ops = h.join().map_err(|e| BenchError::Other(format!("a client failed: {e}")))?;
        for (a, o) in per_phase.iter_mut().zip(ops) {
            *a += o;
        }
    }
    mover.join().map_err(|e| BenchError::Other(format!("the mover failed: {e}")))?;
    let total = rt.block_on(move || counter.apply(|c| *c));
    expect_eq("counter after the moves", total, per_phase.iter().sum::<u64>() + s.fault as u64)?;
    drop(rt);
    let mut mops = [0f64; 3];
    for i in 0..3 {
        mops[i] = per_phase[i] as f64 / secs[i] / 1e6;
    }
    Ok(TrustRun { mops, moves: moves.load(Ordering::Relaxed) })
}

/// The lock baseline: as many OS threads as workers, one `parking_lot`
/// mutex, for one phase's duration.
pub fn lock(s: &Settings) -> Result<f64> {
    let m = Arc::new(parking_lot::Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..s.threads)
        .map(|_| {
            let (m, stop) = (m.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut ops = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    black_box(fetch_add(&mut m.lock()));
                    ops += 1;
                }
                ops
            })
        })
        .collect();
    let start = Instant::now();
    std::thread::sleep(s.duration);
    stop.store(true, Ordering::SeqCst);
    let mut ops = 0;
    for t in threads {
        ops += t.join().map_err(|_| BenchError::Other("a lock thread panicked".into()))?;
    }
    let secs = start.elapsed().as_secs_f64();
    expect_eq("mutex counter", *m.lock(), ops + s.fault as u64)?;
    Ok(ops as f64 / secs / 1e6)
}
