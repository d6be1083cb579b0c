//! `gossamer-bench demo`: the case for delegation in one short run. The
//! same workloads — one hot counter, many counters, a shared map — with
//! Trust<T> and with `std::sync::Mutex` and `parking_lot::Mutex`, at
//! threads = cores and oversubscribed, measured side by side (repetitions
//! outside, contestants inside) with the workload code of `faa` and `map`.
//! Prints one table of medians with the Trust-over-best-lock ratio and a
//! verdict per row, and writes `demo.csv`. An `Adaptive<T>` column (in
//! place under a lock while uncontended, delegated while contended) comes
//! last, with its own ratio to the faster lock.

mod rows;
mod verdict;

use std::time::Duration;

use crate::cli::Common;
use crate::error::{BenchError, Result};
use crate::keys::Trace;
use crate::progress;
use crate::report::csv::Csv;
use crate::report::fmt3;
use crate::report::sweep::{Series, Sweep};
use crate::report::table::Table;
use crate::settings::{Scale, Settings};
use crate::{faa, map};

use rows::{Contestant, Row};

/// The column of `Adaptive<T>` among the contestants.
const ADAPTIVE: usize = 3;

/// Length of one measurement unless `--duration-ms` says otherwise.
pub const DEFAULT_MS: u64 = 250;
/// Repetitions unless `--repeat` says otherwise.
pub const DEFAULT_REPEAT: usize = 3;

/// The demo's configuration: [`DEFAULT_MS`] and [`DEFAULT_REPEAT`] at the
/// full scale unless the options say otherwise, and short key traces.
pub fn settings(mut s: Settings, c: &Common) -> Settings {
    if s.scale == Scale::Full {
        if c.duration_ms.is_none() {
            s.duration = Duration::from_millis(DEFAULT_MS);
        }
        if c.repeat.is_none() {
            s.repeat = DEFAULT_REPEAT;
        }
    }
    s.trace_len = s.trace_len.min(1 << 18);
    s
}

/// One measurement of one contestant of `row`; returns Mops/s.
fn measure(s: &Settings, row: &Row, c: Contestant, traces: &[Trace], rep: usize) -> Result<f64> {
    match c {
        Contestant::Faa(v) => faa::measure(s, v, row.workload.keys() as usize, traces, rep),
        Contestant::Map(v) => map::measure(s, v, row.point(), traces, rep),
    }
}

/// Runs every row; `s.threads` is ignored (each row sets its own).
pub fn run(s: &Settings) -> Result<()> {
    let cores = crate::machine::cores();
    let load_before = crate::machine::load1();
    let rows = rows::rows(cores);
    let names = ["Trust<T>", "std Mutex", "parking_lot", "Adaptive<T>"];
    let mut sweep = Sweep::new(
        "demo",
        "demo",
        "row",
        false,
        "Mops/s",
        names.iter().enumerate().map(|(i, n)| Series { name: n.to_string(), trust: i == 0 || i == ADAPTIVE }).collect(),
        (0..rows.len() as u64).collect(),
    );
    println!(
        "demo: {} ms per measurement, {} repetition{}; {} cores, so {} threads fit and {} oversubscribe",
        s.duration.as_millis(),
        s.repeat,
        if s.repeat == 1 { "" } else { "s" },
        cores,
        rows[0].threads,
        rows[1].threads
    );
    let pb = progress::bar("demo", (rows.len() * names.len() * s.repeat) as u64);
    for (ri, row) in rows.iter().enumerate() {
        let rs = Settings { threads: row.threads, ..s.clone() };
        let traces = Trace::for_clients(
            row.dist(),
            row.workload.keys(),
            rs.trace_len,
            row.workload.write_pct(),
            rs.seed ^ ri as u64,
            rs.threads,
        );
        for rep in 0..rs.repeat {
            for (ci, &c) in row.contestants().iter().enumerate() {
                pb.set_message(format!("{} x{} {} #{}", row.workload.name(), row.threads, names[ci], rep + 1));
                let mops = measure(&rs, row, c, &traces, rep).map_err(|e| match e {
                    BenchError::Mismatch(m) => BenchError::Mismatch(format!(
                        "demo {} with {} threads, {}: {m}",
                        row.workload.name(),
                        row.threads,
                        names[ci]
                    )),
                    other => other,
                })?;
                debug_assert_eq!(c.is_trust(), ci == 0);
                sweep.add(ri, ci, mops);
                pb.inc(1);
            }
        }
    }
    pb.finish_and_clear();
    let table = render(&rows, &sweep, &names);
    println!("\n{table}");
    if let Some(w) = busy_warning(load_before, cores) {
        println!("{w}\n");
    }
    println!(
        "Figures: million operations per second, median over repetitions; Trust/best: median over repetitions of\n\
         Trust<T> over the faster lock of the same repetition. Trust<T> rows use apply_then with {} requests in\n\
         flight per thread; the locks run one OS thread per thread; the maps are 512 lock shards against one\n\
         HashMap per trustee. Adaptive<T> runs the Trust<T> form, in place under a per-object lock while the object\n\
         is uncontended and delegated while it is contended (its map: 512 adaptive shards); Adaptive/best is its\n\
         ratio to the faster lock, as Trust/best.\n\
         \n\
         The full sweeps (object counts 1..10^6, Zipf keys, table sizes, write ratios, latency, more locks and maps):\n  \
         cargo run --release -p gossamer-bench -- faa      (also: map, latency, micro, tokio, all; --quick for short)\n\
         and their figures, with the machines and commits they ran on: benchmarks/README.md",
        s.window
    );
    save(s, &rows, &sweep, &names)
}

/// A warning when other work already kept the cores busy before the run
/// (a 1-minute load average of at least the core count): a delegated
/// request then waits for its trustee's thread to be scheduled, which
/// costs delegation far more than it costs a lock.
fn busy_warning(load: Option<f64>, cores: usize) -> Option<String> {
    let load = load?;
    (load >= cores as f64).then(|| {
        format!(
            "warning: the load average was {load:.1} on {cores} cores before the run: other work competes for the\n\
             cores, and a delegated request waits for its trustee's thread to be scheduled, which costs\n\
             delegation far more than a lock. Rerun on a quiet machine before drawing conclusions."
        )
    })
}

/// The table: one line per row.
fn render(rows: &[Row], sweep: &Sweep, names: &[&str; 4]) -> String {
    let mut t = Table::new(
        [
            "workload",
            "threads",
            "Trust form",
            names[0],
            names[1],
            names[2],
            "Trust/best",
            names[ADAPTIVE],
            "Adaptive/best",
            "verdict on this machine",
        ]
        .map(String::from)
        .to_vec(),
    )
    .left(&[0, 2, 9]);
    for (ri, row) in rows.iter().enumerate() {
        let m = |ci| sweep.median(ri, ci).map_or("-".into(), fmt3);
        let ratio = sweep.ratio(ri, 0);
        t.row(vec![
            row.workload.name(),
            format!("{}{}", row.threads, if row.oversubscribed { " (over)" } else { "" }),
            row.form().into(),
            m(0),
            m(1),
            m(2),
            ratio.map_or("-".into(), |r| format!("{r:.2}x")),
            m(ADAPTIVE),
            sweep.ratio(ri, ADAPTIVE).map_or("-".into(), |r| format!("{r:.2}x")),
            ratio.map_or("-".into(), |r| verdict::verdict(row, r)),
        ]);
    }
    t.render()
}

/// Writes `demo.csv`: one line per row and contestant.
fn save(s: &Settings, rows: &[Row], sweep: &Sweep, names: &[&str; 4]) -> Result<()> {
    let mut csv = Csv::create(
        &s.out.join("demo.csv"),
        &["workload", "threads", "oversubscribed", "contestant", "form", "median_mops", "trust_over_best_lock"],
    )?;
    for (ri, row) in rows.iter().enumerate() {
        for (ci, name) in names.iter().enumerate() {
            let ratio = if ci == 0 || ci == ADAPTIVE {
                sweep.ratio(ri, ci).map_or(String::new(), |r| format!("{r:.3}"))
            } else {
                String::new()
            };
            csv.row(&[
                row.workload.name(),
                row.threads.to_string(),
                row.oversubscribed.to_string(),
                name.to_string(),
                match ci {
                    0 | ADAPTIVE => row.form().into(),
                    _ => "lock".into(),
                },
                sweep.median(ri, ci).map_or(String::new(), |v| format!("{v:.4}")),
                ratio,
            ])?;
        }
    }
    csv.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_machine_is_named() {
        assert!(busy_warning(Some(17.4), 2).is_some_and(|w| w.contains("17.4 on 2 cores")));
        assert!(busy_warning(Some(0.5), 2).is_none());
        assert!(busy_warning(None, 2).is_none());
    }
}
