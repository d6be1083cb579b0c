//! Latency against offered load (thesis §2.6.2): clients issue
//! fetch-and-add operations on a fixed schedule (open loop), and every
//! operation's latency is measured from the moment it was due, so a system
//! past its capacity shows its growing queue instead of hiding it. Mean,
//! p50, p99 and p99.9 come from HDR histograms. Scenarios: 64 objects with
//! uniform keys, and 10^6 objects with Zipf keys.

mod lock_run;
mod report;
mod sample;
mod trust_run;

use crate::cli::LatencyArgs;
use crate::error::{BenchError, Result};
use crate::faa::select;
use crate::keys::{Dist, Trace};
use crate::locks::LockKind;
use crate::progress;
use crate::settings::{Scale, Settings};
use crate::trust_env::Placement;
use crate::with_lock_type;

pub use sample::LatSample;

/// One line of the latency plots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `apply_then` from one generator fiber per client thread.
    Trust {
        dedicated: bool,
    },
    Lock(LockKind),
}

impl Variant {
    pub const ALL: [Variant; 6] = [
        Variant::Trust { dedicated: false },
        Variant::Trust { dedicated: true },
        Variant::Lock(LockKind::Std),
        Variant::Lock(LockKind::ParkingLot),
        Variant::Lock(LockKind::Spin),
        Variant::Lock(LockKind::Mcs),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Trust { dedicated: false } => "trust-async",
            Variant::Trust { dedicated: true } => "trust-async-ded",
            Variant::Lock(k) => k.name(),
        }
    }
}

/// What one scenario measures.
pub struct Scenario {
    pub dist: Dist,
    pub objects: u64,
}

impl Scenario {
    pub fn stem(&self) -> String {
        format!("latency_{}_{}", self.dist.name(), self.objects)
    }
}

fn default_loads(scale: Scale) -> Vec<f64> {
    match scale {
        Scale::Full => vec![0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0],
        Scale::Quick => vec![0.5, 2.0, 8.0, 32.0],
        Scale::Smoke => vec![1.0, 8.0],
    }
}

pub fn run(s: &Settings, args: &LatencyArgs) -> Result<()> {
    let loads = if args.loads.is_empty() { default_loads(s.scale) } else { args.loads.clone() };
    if loads.iter().any(|&l| !(l > 0.0 && l.is_finite())) {
        return Err(BenchError::Other("loads must be positive".into()));
    }
    let variants = select(&Variant::ALL, Variant::name, &args.variants)?;
    let scenarios = [
        Scenario { dist: Dist::Uniform, objects: 64 },
        Scenario { dist: Dist::Zipf, objects: s.scale.pick(1_000_000, 1_000_000, 10_000) },
    ];
    println!(
        "latency: offered loads {loads:?} Mops/s; scenarios {}; variants {}",
        scenarios.iter().map(|s| s.stem()).collect::<Vec<_>>().join(","),
        variants.iter().map(|v| v.name()).collect::<Vec<_>>().join(",")
    );
    let pb = progress::bar("latency", (scenarios.len() * variants.len() * loads.len() * s.repeat) as u64);
    for sc in &scenarios {
        let traces = Trace::for_clients(sc.dist, sc.objects, s.trace_len, 0, s.seed ^ sc.objects, s.threads);
        // Per variant, `[load][rep]`; repetitions outside, variants inside.
        let mut results: Vec<(Variant, Vec<Vec<LatSample>>)> =
            variants.iter().map(|&v| (v, vec![Vec::new(); loads.len()])).collect();
        for rep in 0..s.repeat {
            for (v, per_load) in results.iter_mut() {
                let v = *v;
                pb.set_message(format!("{} K={} {} #{}", sc.dist.name(), sc.objects, v.name(), rep + 1));
                let k = sc.objects as usize;
                let r = match v {
                    Variant::Lock(kind) => {
                        with_lock_type!(kind, u64, L => lock_run::run::<L>(s, k, &traces, &loads, kind, rep, &pb))
                    }
                    Variant::Trust { dedicated } => {
                        let placement = if dedicated { s.ded_placement() } else { Placement::Shared };
                        trust_run::run(s, k, &traces, &loads, placement, rep, &pb)
                    }
                }
                .map_err(|e| match e {
                    BenchError::Mismatch(m) => BenchError::Mismatch(format!("latency {} {}: {m}", sc.stem(), v.name())),
                    other => other,
                })?;
                for (l, sample) in r.into_iter().enumerate() {
                    per_load[l].push(sample);
                }
            }
        }
        let rep = report::LatencyReport::new(s, sc, &loads, results);
        pb.suspend(|| rep.print());
        rep.save(&s.out, s.plots)?;
    }
    pb.finish_and_clear();
    Ok(())
}
