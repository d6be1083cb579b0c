//! Map throughput with Trust<T>: one `HashMap` per trustee holding the keys
//! that hash to it; clients delegate every lookup and update to the shard's
//! trustee, from many fibers with `apply` or from one fiber per thread with
//! `apply_then`.

use std::collections::HashMap;
use std::sync::Arc;

use super::entry::{bump, initial, read_ok, shard_of, verify, Audit, Value, Work};
use super::Point;
use crate::control::{fiber_wait, Control};
use crate::error::{BenchError, Result};
use crate::faa::Issue;
use crate::keys::{is_write, key, Trace};
use crate::settings::Settings;
use crate::tally::{self, LocalRun};
use crate::trust_env::{join_all, Placement, TrustEnv};

type Shard = HashMap<u64, Value>;

/// Shard `i` of `n` of a table holding keys `0..size`.
fn build_shard(i: usize, n: usize, size: u64) -> Shard {
    let mut m = HashMap::with_capacity((size as usize / n) * 9 / 8 + 1);
    for k in (0..size).filter(|&k| shard_of(k, n) == i) {
        m.insert(k, initial(k));
    }
    m
}

/// One measurement (repetition `rep`); returns Mops/s.
pub fn run(s: &Settings, placement: Placement, issue: Issue, p: Point, traces: &[Trace], rep: usize) -> Result<f64> {
    let env = TrustEnv::start(s.threads, placement, s.pin)?;
    let n = env.trustees.len();
    let size = p.size;
    let shards = Arc::new(env.entrust_spread(n, move |i| build_shard(i, n, size))?);
    let per_worker = match issue {
        Issue::Apply => s.fibers,
        Issue::Async => 1,
    };
    let window = s.window;
    {
        let ctl = Control::new();
        let handles = env.spawn_clients(per_worker, |c, f| {
            let (shards, ctl) = (shards.clone(), ctl.clone());
            let mut cur = traces[c].cursor(f * s.repeat + rep, per_worker * s.repeat);
            move || -> std::result::Result<Work, String> {
                ctl.arrive(fiber_wait);
                match issue {
                    Issue::Apply => {
                        let mut w = Work::default();
                        let mut fair = LocalRun::default();
                        while !ctl.stopped() {
                            let e = cur.next_entry();
                            let k = key(e) as u64;
                            let shard = &shards[shard_of(k, n)];
                            let ok = if is_write(e) {
                                w.writes += 1;
                                shard.apply(move |m| bump(m.get_mut(&k)))
                            } else {
                                read_ok(k, shard.apply(move |m| m.get(&k).copied()))
                            };
                            fair.after(shard.is_local());
                            w.bad += !ok as u64;
                            w.ops += 1;
                        }
                        Ok(w)
                    }
                    Issue::Async => {
                        let (issued, t) = tally::pump_checked(
                            window,
                            || ctl.stopped(),
                            || {
                                let e = cur.next_entry();
                                let k = key(e) as u64;
                                let shard = &shards[shard_of(k, n)];
                                if is_write(e) {
                                    shard.apply_then(move |m| bump(m.get_mut(&k)), tally::complete_write);
                                } else {
                                    shard.apply_then(
                                        move |m| m.get(&k).copied(),
                                        move |v| tally::complete_read(read_ok(k, v)),
                                    );
                                }
                                true
                            },
                        )?;
                        Ok(Work { ops: issued, writes: t.writes, bad: t.bad })
                    }
                }
            }
        });
        let start = ctl.drive(handles.len(), s.duration);
        let results = join_all(handles)?;
        let secs = start.elapsed().as_secs_f64();
        let mut work = Work::default();
        for r in results {
            work = work + r.map_err(BenchError::Mismatch)?;
        }
        let audit = env
            .fold_local(&shards, Audit::default(), |a, m: &mut Shard| a + Audit::of(m))?
            .into_iter()
            .fold(Audit::default(), |a, b| a + b);
        drop(env);
        drop(shards);
        verify("Trust map", audit, p.size, work, s.fault)?;
        Ok(work.ops as f64 / secs / 1e6)
    }
}
