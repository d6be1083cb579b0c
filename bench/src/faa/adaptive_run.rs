//! Fetch-and-add with `Adaptive<T>`: counters spread over the trustees as
//! adaptive trusts, one fiber per thread keeping a window of `apply_then`
//! requests in flight (run in place while a counter is uncontended,
//! delegated while it is contended).

use std::hint::black_box;
use std::sync::Arc;

use crate::adaptive_env;
use crate::control::{fiber_wait, Control};
use crate::error::{expect_eq, BenchError, Result};
use crate::keys::{key, Trace};
use crate::settings::Settings;
use crate::tally;
use crate::trust_env::{join_all, Placement, TrustEnv};
use crate::work::fetch_add;

/// One measurement (repetition `rep`) over `k` counters; returns Mops/s.
pub fn run(s: &Settings, k: usize, traces: &[Trace], rep: usize) -> Result<f64> {
    let env = TrustEnv::start(s.threads, Placement::Shared, s.pin)?;
    let objs = Arc::new(adaptive_env::entrust_spread(&env, k, s.policy.policy(), |_| 0u64)?);
    let window = s.window;
    let ctl = Control::new();
    let handles = env.spawn_clients(1, |c, f| {
        let (objs, ctl) = (objs.clone(), ctl.clone());
        let mut cur = traces[c].cursor(f * s.repeat + rep, s.repeat);
        move || -> std::result::Result<u64, String> {
            ctl.arrive(fiber_wait);
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
    });
    let start = ctl.drive(handles.len(), s.duration);
    let results = join_all(handles)?;
    let secs = start.elapsed().as_secs_f64();
    let mut ops = 0;
    for r in results {
        ops += r.map_err(BenchError::Mismatch)?;
    }
    let counted = adaptive_env::fold(&env, &objs, 0u64, |a, v: &mut u64| a + *v)?;
    drop(env);
    drop(objs);
    expect_eq("sum of adaptive counters", counted, ops + s.fault as u64)?;
    Ok(ops as f64 / secs / 1e6)
}
