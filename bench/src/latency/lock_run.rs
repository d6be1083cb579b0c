//! Latency with locks: each OS thread runs its share of the offered load on
//! a fixed schedule and records, per operation, the time from when it was
//! due until its critical section finished.

use std::hint::black_box;
use std::thread;
use std::time::Instant;

use indicatif::ProgressBar;

use super::sample::{new_histogram, LatSample};
use crate::control::{thread_wait, Control};
use crate::error::{expect_eq, Result};
use crate::keys::{key, Trace};
use crate::locks::{Lock, LockKind, Padded};
use crate::machine::pin_current;
use crate::settings::Settings;
use crate::work::fetch_add;

/// Measures every load once (repetition `rep`); returns one sample per load.
pub fn run<L: Lock<u64>>(
    s: &Settings,
    k: usize,
    traces: &[Trace],
    loads: &[f64],
    kind: LockKind,
    rep: usize,
    pb: &ProgressBar,
) -> Result<Vec<LatSample>> {
    let locks: Vec<Padded<L>> = (0..k).map(|_| Padded(L::new(0))).collect();
    let mut total = 0u64;
    let mut out = Vec::with_capacity(loads.len());
    for &load in loads {
        let interval_ns = 1e9 * s.threads as f64 / (load * 1e6);
        {
            let ctl = Control::new();
            let dur_ns = s.duration.as_nanos() as u64;
            let (hist, ops, elapsed) = thread::scope(|sc| {
                let handles: Vec<_> = (0..s.threads)
                    .map(|t| {
                        let (ctl, locks) = (&ctl, &locks);
                        let mut cur = traces[t].cursor(rep, s.repeat);
                        let pin = s.pin;
                        sc.spawn(move || {
                            if pin {
                                pin_current(t);
                            }
                            let mut hist = new_histogram();
                            ctl.arrive(thread_wait);
                            let start = Instant::now();
                            let (mut i, mut sum) = (0u64, 0u64);
                            loop {
                                let now = start.elapsed().as_nanos() as u64;
                                if now >= dur_ns {
                                    break;
                                }
                                let due = (i as f64 * interval_ns) as u64;
                                if now < due {
                                    std::hint::spin_loop();
                                    continue;
                                }
                                sum = sum.wrapping_add(locks[key(cur.next_entry())].0.with(fetch_add));
                                let done = start.elapsed().as_nanos() as u64;
                                hist.saturating_record((done - due).max(1));
                                i += 1;
                            }
                            black_box(sum);
                            (hist, i)
                        })
                    })
                    .collect();
                let start = ctl.drive(s.threads, s.duration);
                let mut hist = new_histogram();
                let mut ops = 0;
                for h in handles {
                    let (th, n) = h.join().expect("lock thread panicked");
                    hist.add(th).expect("histograms with equal bounds");
                    ops += n;
                }
                (hist, ops, start.elapsed())
            });
            total += ops;
            out.push(LatSample::from_histogram(&hist, ops, elapsed));
        }
        pb.inc(1);
    }
    let counted: u64 = locks.iter().map(|l| l.0.with(|v| *v)).sum();
    expect_eq(&format!("sum of {kind} counters"), counted, total + s.fault as u64)?;
    Ok(out)
}
