//! Latency with Trust<T>: one generator fiber per client thread issues its
//! share of the offered load with `apply_then` on a fixed schedule; the
//! `then` callback (on the issuing thread) records the time from when the
//! operation was due until its result arrived.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;
use indicatif::ProgressBar;

use super::sample::{new_histogram, LatSample};
use crate::control::{fiber_wait, Control};
use crate::error::{expect_eq, BenchError, Result};
use crate::keys::{key, Trace};
use crate::settings::Settings;
use crate::tally;
use crate::trust_env::{join_all, Placement, TrustEnv};
use crate::work::fetch_add;

thread_local! {
    static START: Cell<Option<Instant>> = const { Cell::new(None) };
    static HIST: RefCell<Option<Histogram<u64>>> = const { RefCell::new(None) };
}

/// The `then` callback: one operation that was due at `due` ns finished.
fn record(due: u64) {
    let start = START.get().expect("generator started");
    let now = start.elapsed().as_nanos() as u64;
    HIST.with_borrow_mut(|h| h.as_mut().expect("generator started").saturating_record((now - due).max(1)));
    tally::complete(0);
}

/// Measures every load once (repetition `rep`); returns one sample per load.
pub fn run(
    s: &Settings,
    k: usize,
    traces: &[Trace],
    loads: &[f64],
    placement: Placement,
    rep: usize,
    pb: &ProgressBar,
) -> Result<Vec<LatSample>> {
    let env = TrustEnv::start(s.threads, placement, s.pin)?;
    let objs = Arc::new(env.entrust_spread(k, |_| 0u64)?);
    let clients = env.clients.len();
    let window = s.window as u64;
    let dur_ns = s.duration.as_nanos() as u64;
    let mut total = 0u64;
    let mut out = Vec::with_capacity(loads.len());
    for &load in loads {
        let interval_ns = 1e9 * clients as f64 / (load * 1e6);
        {
            let ctl = Control::new();
            let handles = env.spawn_clients(1, |c, _| {
                let (objs, ctl) = (objs.clone(), ctl.clone());
                let mut cur = traces[c].cursor(rep, s.repeat);
                move || -> std::result::Result<(Histogram<u64>, u64), String> {
                    ctl.arrive(fiber_wait);
                    tally::reset();
                    HIST.set(Some(new_histogram()));
                    let start = Instant::now();
                    START.set(Some(start));
                    let (mut i, mut issued) = (0u64, 0u64);
                    let mut backoff = tally::Backoff::default();
                    let mut seen = 0;
                    loop {
                        let now = start.elapsed().as_nanos() as u64;
                        if now >= dur_ns {
                            break;
                        }
                        let due_now = (now as f64 / interval_ns) as u64 + 1;
                        let before = i;
                        while i < due_now && issued - tally::done() < window {
                            let due = (i as f64 * interval_ns) as u64;
                            objs[key(cur.next_entry())].apply_then(fetch_add, move |_| record(due));
                            i += 1;
                            issued += 1;
                        }
                        // Waiting for answers (not for the schedule) backs off.
                        let d = tally::done();
                        backoff.wait(i != before || d != seen || issued == d);
                        seen = d;
                    }
                    while tally::done() < issued {
                        let d = tally::done();
                        backoff.wait(d != seen);
                        seen = d;
                    }
                    let h = HIST.take().expect("histogram set above");
                    START.set(None);
                    if tally::done() != issued {
                        return Err(format!("{} callbacks ran for {issued} requests", tally::done()));
                    }
                    Ok((h, issued))
                }
            });
            let start = ctl.drive(handles.len(), s.duration);
            let results = join_all(handles)?;
            let elapsed = start.elapsed();
            let mut hist = new_histogram();
            let mut ops = 0;
            for r in results {
                let (h, n) = r.map_err(BenchError::Mismatch)?;
                hist.add(h).expect("histograms with equal bounds");
                ops += n;
            }
            total += ops;
            out.push(LatSample::from_histogram(&hist, ops, elapsed));
        }
        pb.inc(1);
    }
    let counted: u64 = env.fold_local(&objs, 0u64, |a, v: &mut u64| a + *v)?.into_iter().sum();
    drop(env);
    drop(objs);
    expect_eq("sum of Trust counters", counted, total + s.fault as u64)?;
    Ok(out)
}
