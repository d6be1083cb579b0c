//! Micro-figures: the cost of the mechanisms underneath the benchmarks —
//! a fiber switch, one `apply` round trip between two threads, what one
//! trustee serves per second, the local shortcut against a direct call,
//! the CPU an idle runtime uses, and the latency of the first request after
//! the runtime went idle.

mod echo_floor;
mod figures;

use crate::cli::MicroArgs;
use crate::error::{BenchError, Result};
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
        name: "echo-moved-256",
        unit: "Mops/s",
        what: "echo traffic of 2 threads, 256 B payloads moved by pointer (floor: one process)",
        run: echo_floor::moved_256,
    },
    Figure {
        name: "echo-copied-256",
        unit: "Mops/s",
        what: "the same, payloads copied in and out of shared areas (floor: 2 processes)",
        run: echo_floor::copied_256,
    },
    Figure {
        name: "echo-moved-1k",
        unit: "Mops/s",
        what: "as echo-moved-256, 1 KiB payloads",
        run: echo_floor::moved_1k,
    },
    Figure {
        name: "echo-copied-1k",
        unit: "Mops/s",
        what: "as echo-copied-256, 1 KiB payloads",
        run: echo_floor::copied_1k,
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
    if let Some(unknown) = args.figures.iter().find(|n| !FIGURES.iter().any(|f| f.name == n.as_str())) {
        let names: Vec<_> = FIGURES.iter().map(|f| f.name).collect();
        return Err(BenchError::Other(format!("no micro-figure '{unknown}'; the figures: {}", names.join(", "))));
    }
    let chosen: Vec<&Figure> =
        FIGURES.iter().filter(|f| args.figures.is_empty() || args.figures.iter().any(|n| n == f.name)).collect();
    println!("micro: {ops} operations per figure");
    let pb = progress::bar("micro", (chosen.len() * s.repeat) as u64);
    let mut results = Vec::with_capacity(chosen.len());
    for &f in &chosen {
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
    let medians: Vec<f64> = results.iter().map(|v| median(v).unwrap_or(f64::NAN)).collect();
    for ((f, vals), &m) in chosen.iter().zip(&results).zip(&medians) {
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
    let median_of = |name: &str| chosen.iter().zip(&medians).find(|(f, _)| f.name == name).map(|(_, &m)| m);
    for (size, copied, moved) in
        [("256 B", "echo-copied-256", "echo-moved-256"), ("1 KiB", "echo-copied-1k", "echo-moved-1k")]
    {
        if let (Some(c), Some(m)) = (median_of(copied), median_of(moved)) {
            println!(
                "echo floor at {size}: copied ÷ moved {:.2} (payloads copied in and out of shared areas, \
                 against moved by pointer, nothing else of a runtime)",
                c / m
            );
        }
    }
    Ok(())
}
