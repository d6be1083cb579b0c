//! The measurements behind each micro-figure. Each returns one value and
//! checks what it counted.

use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use gossamer::Runtime;

use crate::error::{expect_eq, BenchError, Result};
use crate::machine::process_cpu_time;
use crate::settings::Settings;
use crate::tally;
use crate::work::{bare_add, fetch_add};

fn runtime(workers: usize, dedicated: usize, s: &Settings) -> Result<Runtime> {
    Ok(Runtime::builder().workers(workers).dedicated_trustees(dedicated).pin_threads(s.pin).build()?)
}

fn fault(s: &Settings) -> u64 {
    s.fault as u64
}

/// Nanoseconds per spin-loop hint.
pub fn pause(_s: &Settings, ops: u64) -> Result<f64> {
    let t = Instant::now();
    for _ in 0..ops {
        std::hint::spin_loop();
    }
    Ok(t.elapsed().as_nanos() as f64 / ops as f64)
}

/// Nanoseconds per `yield_now`, two fibers taking turns on one worker.
pub fn fiber_yield(s: &Settings, ops: u64) -> Result<f64> {
    let rt = runtime(1, 0, s)?;
    let (ns, yields) = rt.block_on(move || {
        let t = Instant::now();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                gossamer::spawn(move || {
                    for _ in 0..ops {
                        gossamer::yield_now();
                    }
                    ops
                })
            })
            .collect();
        let n: u64 = hs.into_iter().map(|h| h.join().expect("fiber")).sum();
        (t.elapsed().as_nanos() as f64, n)
    });
    expect_eq("fiber yields", yields, 2 * ops + fault(s))?;
    Ok(ns / yields as f64)
}

/// Nanoseconds per resume-and-suspend of a bare coroutine (the same
/// `corosensei` switch the fibers use, without any scheduler): the floor
/// under `fiber-yield`, which adds the ready queue and the worker's loop.
pub fn raw_switch(s: &Settings, ops: u64) -> Result<f64> {
    use corosensei::{Coroutine, CoroutineResult};
    let mut co: Coroutine<u8, u64, u64> = Coroutine::new(|y, _first: u8| {
        let mut n = 0u64;
        loop {
            n += 1;
            if y.suspend(n) == 0u8 {
                return n;
            }
        }
    });
    let t = Instant::now();
    let mut last = 0;
    for _ in 0..ops {
        if let CoroutineResult::Yield(n) = co.resume(1) {
            last = n;
        }
    }
    let ns = t.elapsed().as_nanos() as f64;
    let total = match co.resume(0) {
        CoroutineResult::Return(n) => n,
        CoroutineResult::Yield(n) => n,
    };
    expect_eq("coroutine switches", last, total)?;
    expect_eq("coroutine resumes", total, ops + fault(s))?;
    // One resume and one suspend per operation: two switches.
    Ok(ns / ops as f64)
}

/// Nanoseconds per round trip of one cache line between two OS threads
/// (each waits for the other's store, then stores; no read-modify-write):
/// what the hardware charges for a request to reach another core and its
/// answer to come back, the floor under `apply-rtt`.
pub fn line_pingpong(s: &Settings, ops: u64) -> Result<f64> {
    use std::sync::atomic::AtomicU64;
    #[repr(align(128))]
    struct Line(AtomicU64);
    let ops = ops / 10 + 1;
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let pinned = s.pin && cores.len() > 1;
    let pin = move |i: usize| {
        if pinned {
            core_affinity::set_for_current(cores[i % cores.len()]);
        }
    };
    let (p2, q2) = (ping.clone(), pong.clone());
    let pin_echo = pin.clone();
    let echo = thread::spawn(move || {
        pin_echo(1);
        for i in 1..=ops {
            while p2.0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            q2.0.store(i, Ordering::Release);
        }
    });
    let (p1, q1) = (ping.clone(), pong.clone());
    let client = thread::spawn(move || {
        pin(0);
        // Let the echo thread start before timing.
        thread::sleep(Duration::from_millis(1));
        let t = Instant::now();
        for i in 1..=ops {
            p1.0.store(i, Ordering::Release);
            while q1.0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
        }
        t.elapsed().as_nanos() as f64
    });
    let ns = client.join().map_err(|_| BenchError::Other("ping-pong thread panicked".into()))?;
    echo.join().map_err(|_| BenchError::Other("ping-pong thread panicked".into()))?;
    expect_eq("ping-pong round trips", pong.0.load(Ordering::Relaxed), ops + fault(s))?;
    Ok(ns / ops as f64)
}

/// Nanoseconds per `apply` round trip, one fiber on worker 0, trustee 1.
pub fn apply_rtt(s: &Settings, ops: u64) -> Result<f64> {
    let rt = runtime(2, 0, s)?;
    let ops = ops / 10 + 1;
    let (ns, v) = rt.block_on(move || {
        let c = gossamer::trustee(1).entrust(0u64);
        c.apply(bare_add);
        let t = Instant::now();
        for _ in 0..ops {
            black_box(c.apply(bare_add));
        }
        (t.elapsed().as_nanos() as f64, c.apply(|v| *v))
    });
    expect_eq("round-trip counter", v, ops + 1 + fault(s))?;
    Ok(ns / ops as f64)
}

/// Mops/s one dedicated trustee serves to one client thread's `apply_then`.
fn trustee_async_with(s: &Settings, ops: u64, pause: bool) -> Result<f64> {
    let rt = runtime(2, 1, s)?;
    let c = rt.trustee(1).entrust(0u64);
    let window = s.window;
    let ops = ops * 4;
    let c2 = c.clone();
    let h = rt.spawn_on(0, move || {
        tally::reset();
        let t = Instant::now();
        let left = Cell::new(ops);
        let issued = tally::pump(
            window,
            || left.get() == 0,
            || {
                if left.get() == 0 {
                    return false;
                }
                left.set(left.get() - 1);
                if pause {
                    c2.apply_then(fetch_add, tally::complete);
                } else {
                    c2.apply_then(bare_add, tally::complete);
                }
                true
            },
        );
        (t.elapsed().as_secs_f64(), issued)
    });
    let (secs, issued) = h.join().map_err(|e| BenchError::Other(format!("client fiber: {e}")))?;
    let v = rt.block_on(move || c.apply(|v| *v));
    expect_eq("one-trustee counter", v, issued + fault(s))?;
    Ok(v as f64 / secs / 1e6)
}

pub fn trustee_async(s: &Settings, ops: u64) -> Result<f64> {
    trustee_async_with(s, ops, false)
}

pub fn trustee_async_pause(s: &Settings, ops: u64) -> Result<f64> {
    trustee_async_with(s, ops, true)
}

/// Mops/s one dedicated trustee serves to the client thread's fibers.
pub fn trustee_fibers(s: &Settings, ops: u64) -> Result<f64> {
    let rt = runtime(2, 1, s)?;
    let c = rt.trustee(1).entrust(0u64);
    let fibers = s.fibers as u64;
    let per = (ops * 2 / fibers).max(1);
    let go = Arc::new(AtomicBool::new(false));
    let hs: Vec<_> = (0..fibers)
        .map(|_| {
            let (c, go) = (c.clone(), go.clone());
            rt.spawn_on(0, move || {
                while !go.load(Ordering::Acquire) {
                    gossamer::yield_now();
                }
                for _ in 0..per {
                    black_box(c.apply(bare_add));
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(2));
    let t = Instant::now();
    go.store(true, Ordering::Release);
    for h in hs {
        h.join().map_err(|e| BenchError::Other(format!("client fiber: {e}")))?;
    }
    let secs = t.elapsed().as_secs_f64();
    let v = rt.block_on(move || c.apply(|v| *v));
    expect_eq("one-trustee counter", v, per * fibers + fault(s))?;
    Ok(v as f64 / secs / 1e6)
}

/// Nanoseconds per `apply` on a trust local to the calling thread.
pub fn local_apply(s: &Settings, ops: u64) -> Result<f64> {
    let rt = runtime(2, 0, s)?;
    let (ns, v) = rt.block_on(move || {
        let c = gossamer::local_trustee().entrust(0u64);
        let t = Instant::now();
        for _ in 0..ops {
            black_box(c.apply(bare_add));
        }
        (t.elapsed().as_nanos() as f64, c.apply(|v| *v))
    });
    expect_eq("local counter", v, ops + fault(s))?;
    Ok(ns / ops as f64)
}

/// Nanoseconds per direct call of the same closure.
pub fn direct_call(s: &Settings, ops: u64) -> Result<f64> {
    let mut c = 0u64;
    let t = Instant::now();
    for _ in 0..ops {
        black_box(bare_add(black_box(&mut c)));
    }
    let ns = t.elapsed().as_nanos() as f64;
    expect_eq("direct counter", c, ops + fault(s))?;
    Ok(ns / ops as f64)
}

/// Percent of one core used by an idle runtime of `s.threads` workers.
pub fn idle_cpu(s: &Settings, _ops: u64) -> Result<f64> {
    let rt = runtime(s.threads, 0, s)?;
    let v = rt.block_on(|| {
        let c = gossamer::trustee(1).entrust(0u64);
        c.apply(bare_add)
    });
    expect_eq("warm-up counter", v, 1 + fault(s))?;
    thread::sleep(Duration::from_millis(50));
    let span = Duration::from_millis(s.scale.pick(1000, 300, 50));
    let (c0, t0) = (process_cpu_time(), Instant::now());
    thread::sleep(span);
    let (c1, t1) = (process_cpu_time(), Instant::now());
    drop(rt);
    Ok((c1 - c0).as_secs_f64() / (t1 - t0).as_secs_f64() * 100.0)
}

/// Median microseconds of the first `apply` after 20 ms of idleness (the
/// trustee has gone to sleep and must be woken).
pub fn wake_apply(s: &Settings, _ops: u64) -> Result<f64> {
    let rt = runtime(2, 0, s)?;
    let c = rt.trustee(1).entrust(0u64);
    let tries = s.scale.pick(20, 10, 3);
    let mut us = Vec::with_capacity(tries);
    for _ in 0..tries {
        thread::sleep(Duration::from_millis(20));
        let c = c.clone();
        let d = rt
            .spawn_on(0, move || {
                let t = Instant::now();
                c.apply(bare_add);
                t.elapsed()
            })
            .join()
            .map_err(|e| BenchError::Other(format!("wake fiber: {e}")))?;
        us.push(d.as_secs_f64() * 1e6);
    }
    let v = rt.block_on(move || c.apply(|v| *v));
    expect_eq("wake counter", v, tries as u64 + fault(s))?;
    Ok(crate::report::median(&us).unwrap_or(f64::NAN))
}
