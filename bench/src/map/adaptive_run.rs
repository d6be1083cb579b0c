//! Map throughput with `Adaptive<T>`: the table split into as many
//! `HashMap` shards as the lock-based maps use, each an adaptive trust,
//! spread over the trustees; one fiber per thread keeps a window of
//! `apply_then` requests in flight (in place while a shard is uncontended,
//! delegated to its trustee while it is contended).

use std::collections::HashMap;
use std::sync::Arc;

use super::entry::{bump, initial, read_ok, shard_of, verify, Audit, Value, Work};
use super::Point;
use crate::adaptive_env;
use crate::control::{fiber_wait, Control};
use crate::error::{BenchError, Result};
use crate::keys::{is_write, key, Trace};
use crate::settings::Settings;
use crate::tally;
use crate::trust_env::{join_all, Placement, TrustEnv};

type Shard = HashMap<u64, Value>;

/// Shards of the table, as many as the lock-based maps have.
const SHARDS: usize = 512;

fn build_shard(i: usize, size: u64) -> Shard {
    let mut m = HashMap::with_capacity((size as usize / SHARDS) * 9 / 8 + 1);
    for k in (0..size).filter(|&k| shard_of(k, SHARDS) == i) {
        m.insert(k, initial(k));
    }
    m
}

/// One measurement (repetition `rep`); returns Mops/s.
pub fn run(s: &Settings, p: Point, traces: &[Trace], rep: usize) -> Result<f64> {
    let env = TrustEnv::start(s.threads, Placement::Shared, s.pin)?;
    let size = p.size;
    let shards =
        Arc::new(adaptive_env::entrust_spread(&env, SHARDS, s.policy.policy(), move |i| build_shard(i, size))?);
    let window = s.window;
    let ctl = Control::new();
    let handles = env.spawn_clients(1, |c, f| {
        let (shards, ctl) = (shards.clone(), ctl.clone());
        let mut cur = traces[c].cursor(f * s.repeat + rep, s.repeat);
        move || -> std::result::Result<Work, String> {
            ctl.arrive(fiber_wait);
            let (issued, t) = tally::pump_checked(
                window,
                || ctl.stopped(),
                || {
                    let e = cur.next_entry();
                    let k = key(e) as u64;
                    let shard = &shards[shard_of(k, SHARDS)];
                    if is_write(e) {
                        shard.apply_then(move |m| bump(m.get_mut(&k)), tally::complete_write);
                    } else {
                        shard.apply_then(move |m| m.get(&k).copied(), move |v| tally::complete_read(read_ok(k, v)));
                    }
                    true
                },
            )?;
            Ok(Work { ops: issued, writes: t.writes, bad: t.bad })
        }
    });
    let start = ctl.drive(handles.len(), s.duration);
    let results = join_all(handles)?;
    let secs = start.elapsed().as_secs_f64();
    let mut work = Work::default();
    for r in results {
        work = work + r.map_err(BenchError::Mismatch)?;
    }
    let audit = adaptive_env::fold(&env, &shards, Audit::default(), |a, m: &mut Shard| a + Audit::of(m))?;
    drop(env);
    drop(shards);
    verify("adaptive map", audit, p.size, work, s.fault)?;
    Ok(work.ops as f64 / secs / 1e6)
}
