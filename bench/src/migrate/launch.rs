//! The launch rows of the migrate benchmark: clients on every worker
//! `launch` onto a latched counter (`Trust<Latch<u64>>`), once on a counter
//! that never moved (`launch-stay`, on trustee 0) and once on one moved to
//! the last trustee before the clients start (`launch-moved`: each launch
//! starts on trustee 0, which sends it on to where the value is), each for
//! one phase's duration.

use std::hint::black_box;

use gossamer::{Latch, Runtime};

use crate::error::{expect_eq, Result};
use crate::settings::Settings;
use crate::work::fetch_add;

/// Launches per second (in millions) on the counter, moved first or not.
pub fn run(s: &Settings, moved: bool) -> Result<f64> {
    let n = s.threads;
    let rt = Runtime::builder().workers(n).pin_threads(s.pin).build()?;
    let counter = rt.block_on(move || {
        let t = gossamer::trustee(0).entrust(Latch::new(0u64));
        if moved {
            t.migrate_to(gossamer::trustee(n - 1));
        }
        t
    });
    let (ops, secs) = super::timed::run(
        &rt,
        s,
        n * s.fibers,
        |c| c % n,
        || {
            let t = counter.clone();
            move || {
                black_box(t.launch(fetch_add));
            }
        },
    )?;
    let total = rt.block_on(move || counter.launch(|v| *v));
    expect_eq("latched counter", total, ops + s.fault as u64)?;
    drop(rt);
    Ok(ops as f64 / secs / 1e6)
}
