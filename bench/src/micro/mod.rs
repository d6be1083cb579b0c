//! Micro-figures: the cost of the mechanisms underneath the benchmarks —
//! a fiber switch, one `apply` round trip between two threads, what one
//! trustee serves per second, the local shortcut against a direct call,
//! the CPU an idle runtime uses, and the latency of the first request after
//! the runtime went idle.

mod figures;

use crate::cli::MicroArgs;
use crate::error::Result;
use crate::progress;
use crate::report::csv::Csv;
use crate::report::table::Table;
use crate::report::{fmt3, median};
use crate::settings::Settings;

/// One micro-figure.
struct Figure {
    name: &'static str,
    unit: &'static str,
    what: &'static str,
    run: fn(&Settings, u64) -> Result<f64>,
}

const FIGURES: &[Figure] = &[
    Figure {
        name: "pause",
        unit: "ns",
        what: "one spin-loop hint (the critical section's pause)",
        run: figures::pause,
    },
    Figure {
        name: "fiber-yield",
        unit: "ns",
        what: "yield_now between two fibers of one thread",
        run: figures::fiber_yield,
    },
    Figure {
        name: "raw-switch",
        unit: "ns",
        what: "resume + suspend of a bare coroutine (floor under fiber-yield)",
        run: figures::raw_switch,
    },
    Figure {
        name: "line-pingpong",
        unit: "ns",
        what: "a cache line's round trip between two threads (floor under apply-rtt)",
        run: figures::line_pingpong,
    },
    Figure {
        name: "apply-rtt",
        unit: "ns",
        what: "one apply to a trustee on another thread, one fiber",
        run: figures::apply_rtt,
    },
    Figure {
        name: "trustee-async",
        unit: "Mops/s",
        what: "one dedicated trustee, one client thread, apply_then, no pause",
        run: figures::trustee_async,
    },
    Figure {
        name: "trustee-async-pause",
        unit: "Mops/s",
        what: "as above, with the pause in the closure",
        run: figures::trustee_async_pause,
    },
    Figure {
        name: "trustee-fibers",
        unit: "Mops/s",
        what: "one dedicated trustee, apply from the client fibers, no pause",
        run: figures::trustee_fibers,
    },
    Figure {
        name: "local-apply",
        unit: "ns",
        what: "apply on a trust whose trustee is this thread (shortcut)",
        run: figures::local_apply,
    },
    Figure {
        name: "direct-call",
        unit: "ns",
        what: "the same closure called directly on a local value",
        run: figures::direct_call,
    },
    Figure {
        name: "idle-cpu",
        unit: "% of a core",
        what: "CPU used by an idle runtime (all workers together)",
        run: figures::idle_cpu,
    },
    Figure {
        name: "wake-apply",
        unit: "µs",
        what: "first apply after 20 ms idle (median over tries)",
        run: figures::wake_apply,
    },
];

pub fn run(s: &Settings, args: &MicroArgs) -> Result<()> {
    let ops = args.ops.unwrap_or(s.scale.pick(2_000_000, 500_000, 20_000)).max(1);
    println!("micro: {ops} operations per figure");
    let pb = progress::bar("micro", (FIGURES.len() * s.repeat) as u64);
    let mut results = Vec::with_capacity(FIGURES.len());
    for f in FIGURES {
        let mut vals = Vec::with_capacity(s.repeat);
        for _ in 0..s.repeat {
            pb.set_message(f.name);
            vals.push((f.run)(s, ops)?);
            pb.inc(1);
        }
        results.push(vals);
    }
    pb.finish_and_clear();
    let mut t = Table::new(["figure", "median", "unit", "runs", "what"].iter().map(|h| h.to_string()).collect());
    let mut raw = Csv::create(&s.out.join("micro.csv"), &["figure", "unit", "rep", "value"])?;
    let mut sum = Csv::create(&s.out.join("micro_summary.csv"), &["figure", "unit", "median", "runs", "what"])?;
    for (f, vals) in FIGURES.iter().zip(&results) {
        let m = median(vals).unwrap_or(f64::NAN);
        t.row(vec![f.name.into(), fmt3(m), f.unit.into(), vals.len().to_string(), f.what.into()]);
        for (rep, v) in vals.iter().enumerate() {
            raw.row(&[f.name.to_string(), f.unit.to_string(), rep.to_string(), format!("{v:.4}")])?;
        }
        sum.row(&[
            f.name.to_string(),
            f.unit.to_string(),
            format!("{m:.4}"),
            vals.len().to_string(),
            f.what.to_string(),
        ])?;
    }
    raw.finish()?;
    sum.finish()?;
    println!("\nMicro-figures ({} threads) — medians over repetitions\n{}", s.threads, t.render());
    Ok(())
}
