//! `gossamer-bench migrate`: throughput of one hot property before, during
//! and after moving it between trustees (`Trust::migrate_to`), beside the
//! same clients on a `parking_lot::Mutex` in the same run.
//!
//! Fibers on every worker (`--fibers` per worker) increment one counter
//! with `apply` (the faa benchmark's critical section) through one of the
//! phases, each `--duration` long:
//! * `before`: the counter on trustee 0, never moved;
//! * `during`: a fiber on worker 0 moves it round-robin over the trustees,
//!   waiting `--interval-us` between moves;
//! * `after`: no more moves, the counter left on trustee 1; the clients
//!   keep their trusts, made when it was on trustee 0: each client thread
//!   reaches it directly once trustee 0 has told it where it is.
//!
//! Then the follow rows (`follow.rs`): the counter on trustee 0 while its
//! clients all run on the last worker, with the default policy
//! (`hot-stay`) and with `MigrationPolicy::Follow` (`hot-follow`, which
//! moves it to them by itself; `moves` says how often it moved).
//!
//! Then the launch rows (`launch.rs`): fibers on every worker `launch` onto
//! a latched counter that never moved (`launch-stay`) and onto one moved
//! to the last trustee (`launch-moved`), whose launches the first trustee
//! sends on to it.
//!
//! The counter must equal the number of increments the clients counted.

mod follow;
mod launch;
mod run;
mod timed;

use std::io::Write;

use crate::cli::MigrateArgs;
use crate::error::Result;
use crate::settings::Settings;

pub use run::Phase;

/// Runs the benchmark and prints (and writes `migrate.csv`) one row per
/// repetition and phase, in Mops/s.
pub fn run(s: &Settings, a: &MigrateArgs) -> Result<()> {
    let interval = std::time::Duration::from_micros(a.interval_us.unwrap_or(1000));
    let mut csv = String::from("rep,variant,mops,moves\n");
    println!(
        "migrate: {} threads, {} fibers per thread, {:.1} s per phase, a move every {} µs while moving",
        s.threads,
        s.fibers,
        s.duration.as_secs_f64(),
        interval.as_micros()
    );
    println!("{:>4}  {:<18} {:>10} {:>8}", "rep", "variant", "Mops/s", "moves");
    for rep in 0..s.repeat {
        let lock = run::lock(s)?;
        let trust = run::trust(s, interval)?;
        let mut row = |name: &str, mops: f64, moves: u64| {
            println!("{rep:>4}  {name:<18} {mops:>10.3} {moves:>8}");
            csv.push_str(&format!("{rep},{name},{mops:.4},{moves}\n"));
        };
        row("mutex", lock, 0);
        for (p, mops) in Phase::ALL.iter().zip(trust.mops) {
            row(p.name(), mops, if *p == Phase::During { trust.moves } else { 0 });
        }
        let stay = follow::run(s, gossamer::MigrationPolicy::Stay)?;
        row("hot-stay", stay.mops, stay.moves);
        let moving = follow::run(s, follow::follow())?;
        row("hot-follow", moving.mops, moving.moves);
        row("launch-stay", launch::run(s, false)?, 0);
        row("launch-moved", launch::run(s, true)?, 1);
        let _ = std::io::stdout().flush();
    }
    std::fs::write(s.out.join("migrate.csv"), csv)?;
    Ok(())
}
