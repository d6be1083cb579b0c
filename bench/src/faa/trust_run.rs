//! Fetch-and-add with Trust<T>: counters spread over the trustees, clients
//! in fibers calling `apply`, or one fiber per thread with `apply_then`.

use std::hint::black_box;
use std::sync::Arc;

use crate::control::{fiber_wait, Control};
use crate::error::{expect_eq, BenchError, Result};
use crate::keys::{key, Trace};
use crate::settings::Settings;
use crate::tally::{self, LocalRun};
use crate::trust_env::{join_all, Placement, TrustEnv};
use crate::work::fetch_add;

use super::Issue;

/// One measurement (repetition `rep`) over `k` counters; returns Mops/s.
pub fn run(s: &Settings, k: usize, traces: &[Trace], placement: Placement, issue: Issue, rep: usize) -> Result<f64> {
    let env = TrustEnv::start(s.threads, placement, s.pin)?;
    let objs = Arc::new(env.entrust_spread(k, |_| 0u64)?);
    let per_worker = match issue {
        Issue::Apply => s.fibers,
        Issue::Async => 1,
    };
    let window = s.window;
    let ctl = Control::new();
    let handles = env.spawn_clients(per_worker, |c, f| {
        let (objs, ctl) = (objs.clone(), ctl.clone());
        let mut cur = traces[c].cursor(f * s.repeat + rep, per_worker * s.repeat);
        move || -> std::result::Result<u64, String> {
            ctl.arrive(fiber_wait);
            match issue {
                Issue::Apply => {
                    let (mut ops, mut sum) = (0u64, 0u64);
                    let mut fair = LocalRun::default();
                    while !ctl.stopped() {
                        let o = &objs[key(cur.next_entry())];
                        sum = sum.wrapping_add(o.apply(fetch_add));
                        fair.after(o.is_local());
                        ops += 1;
                    }
                    black_box(sum);
                    Ok(ops)
                }
                Issue::Async => {
                    let (issued, t) = tally::pump_checked(
                        window,
                        || ctl.stopped(),
                        || {
                            objs[key(cur.next_entry())].apply_then(fetch_add, tally::complete);
                            true
                        },
                    )?;
                    black_box(t.sum);
                    Ok(issued)
                }
            }
        }
    });
    let start = ctl.drive(handles.len(), s.duration);
    let results = join_all(handles)?;
    let secs = start.elapsed().as_secs_f64();
    let mut ops = 0;
    for r in results {
        ops += r.map_err(BenchError::Mismatch)?;
    }
    let counted: u64 = env.fold_local(&objs, 0u64, |a, v: &mut u64| a + *v)?.into_iter().sum();
    // Shut the runtime down before dropping the trusts: the properties go
    // with their trustees, without a message per trust.
    drop(env);
    drop(objs);
    expect_eq("sum of Trust counters", counted, ops + s.fault as u64)?;
    Ok(ops as f64 / secs / 1e6)
}
