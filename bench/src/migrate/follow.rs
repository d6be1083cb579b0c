//! The follow rows of the migrate benchmark: a counter entrusted to
//! trustee 0 while its clients run on the last worker, once with the
//! default policy (`Stay`: every hot request crosses to trustee 0) and
//! once with `MigrationPolicy::Follow` (the counter moves to the hot
//! clients' trustee by itself), each for one phase's duration.

use std::hint::black_box;

use gossamer::{FollowParams, MigrationPolicy, Runtime};

use crate::error::{expect_eq, Result};
use crate::settings::Settings;
use crate::work::fetch_add;

/// The counter, and the moves it saw (a closure that runs on another
/// trustee than the one before counts one).
struct Hot {
    n: u64,
    on: Option<usize>,
    moves: u64,
}

fn bump(h: &mut Hot) -> u64 {
    let here = gossamer::current_thread();
    if here != h.on {
        h.moves += u64::from(h.on.is_some());
        h.on = here;
    }
    fetch_add(&mut h.n)
}

/// What one follow run measured.
pub struct FollowRun {
    pub mops: f64,
    pub moves: u64,
}

/// `--fibers` clients on the last worker incrementing the counter
/// entrusted to trustee 0 under `policy`. (A client on trustee 0 itself
/// would run its closures in place, without waiting, and issue most of the
/// requests: the counter would rightly stay.)
pub fn run(s: &Settings, policy: MigrationPolicy) -> Result<FollowRun> {
    let n = s.threads;
    let rt = Runtime::builder().workers(n).pin_threads(s.pin).build()?;
    let counter = rt.block_on(move || {
        let t = gossamer::trustee(0).entrust(Hot { n: 0, on: None, moves: 0 });
        t.set_migration_policy(policy).map(|()| t)
    })?;
    let hot = n - 1;
    let (ops, secs) = super::timed::run(
        &rt,
        s,
        s.fibers,
        |_| hot,
        || {
            let t = counter.clone();
            move || {
                black_box(t.apply(bump));
            }
        },
    )?;
    let (total, moves) = rt.block_on(move || counter.apply(|h| (h.n, h.moves)));
    expect_eq("counter under the follow policy", total, ops + s.fault as u64)?;
    drop(rt);
    Ok(FollowRun { mops: ops as f64 / secs / 1e6, moves })
}

/// The policy of the `follow` row: the defaults.
pub fn follow() -> MigrationPolicy {
    MigrationPolicy::Follow(FollowParams::default())
}
