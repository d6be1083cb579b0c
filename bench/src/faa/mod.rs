//! Fetch-and-add throughput against the number of objects (thesis §2.6.1):
//! threads repeatedly pick a counter from K objects (uniform or Zipf),
//! increment it with one `pause` inside the critical section, and read it
//! back. Trust<T> with blocking `apply` from many fibers and with
//! `apply_then`, with trustees on every thread or on dedicated threads,
//! against four locks, and `Adaptive<T>` (in place under a lock while
//! uncontended, delegated while contended).

mod adaptive_run;
mod lock_run;
mod trust_run;

use crate::cli::FaaArgs;
use crate::error::{BenchError, Result};
use crate::keys::{Dist, Trace};
use crate::locks::LockKind;
use crate::progress;
use crate::report::sweep::{Series, Sweep};
use crate::settings::{Scale, Settings};
use crate::trust_env::Placement;
use crate::with_lock_type;

/// How a Trust<T> client issues requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issue {
    /// Many fibers per thread, each calling the blocking `apply`.
    Apply,
    /// One fiber per thread keeping a window of `apply_then` requests in flight.
    Async,
}

impl Issue {
    /// The name of a Trust variant issuing this way, on shared or dedicated trustees.
    pub fn variant_name(self, dedicated: bool) -> &'static str {
        match (self, dedicated) {
            (Issue::Apply, false) => "trust-apply",
            (Issue::Async, false) => "trust-async",
            (Issue::Apply, true) => "trust-apply-ded",
            (Issue::Async, true) => "trust-async-ded",
        }
    }
}

/// One line of the plots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Trust {
        dedicated: bool,
        issue: Issue,
    },
    Lock(LockKind),
    /// `Adaptive<T>` with a window of `apply_then` requests per thread.
    Adaptive,
}

impl Variant {
    pub const ALL: [Variant; 9] = [
        Variant::Trust { dedicated: false, issue: Issue::Apply },
        Variant::Trust { dedicated: false, issue: Issue::Async },
        Variant::Trust { dedicated: true, issue: Issue::Apply },
        Variant::Trust { dedicated: true, issue: Issue::Async },
        Variant::Lock(LockKind::Std),
        Variant::Lock(LockKind::ParkingLot),
        Variant::Lock(LockKind::Spin),
        Variant::Lock(LockKind::Mcs),
        Variant::Adaptive,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Trust { dedicated, issue } => issue.variant_name(dedicated),
            Variant::Lock(k) => k.name(),
            Variant::Adaptive => "trust-adaptive",
        }
    }

    pub fn series(self) -> Series {
        Series { name: self.name().to_string(), trust: !matches!(self, Variant::Lock(_)) }
    }
}

/// Picks variants by name (all when `names` is empty).
pub fn select<V: Copy>(all: &[V], name: impl Fn(V) -> &'static str, names: &[String]) -> Result<Vec<V>> {
    if names.is_empty() {
        return Ok(all.to_vec());
    }
    names
        .iter()
        .map(|n| {
            all.iter().copied().find(|&v| name(v) == n.as_str()).ok_or_else(|| {
                let known: Vec<_> = all.iter().map(|&v| name(v)).collect();
                BenchError::Other(format!("unknown variant `{n}` (known: {})", known.join(", ")))
            })
        })
        .collect()
}

/// Object counts swept by default.
fn default_objects(scale: Scale) -> Vec<u64> {
    match scale {
        Scale::Full => (0..=20).map(|i| 1u64 << i).collect(),
        Scale::Quick => vec![1, 4, 16, 100, 1000, 10_000, 100_000, 1_000_000],
        Scale::Smoke => vec![1, 16, 1000],
    }
}

/// One measurement of one variant; returns Mops/s.
pub(crate) fn measure(s: &Settings, v: Variant, k: usize, traces: &[Trace], rep: usize) -> Result<f64> {
    match v {
        Variant::Lock(kind) => with_lock_type!(kind, u64, L => lock_run::run::<L>(s, k, traces, kind, rep)),
        Variant::Trust { dedicated, issue } => {
            let placement = if dedicated { s.ded_placement() } else { Placement::Shared };
            trust_run::run(s, k, traces, placement, issue, rep)
        }
        Variant::Adaptive => adaptive_run::run(s, k, traces, rep),
    }
}

pub fn run(s: &Settings, args: &FaaArgs) -> Result<()> {
    let objects = if args.objects.is_empty() { default_objects(s.scale) } else { args.objects.clone() };
    if objects.iter().any(|&k| k == 0 || k > 1 << 31) {
        return Err(BenchError::Other("object counts must be between 1 and 2^31".into()));
    }
    let dists = if args.dist.is_empty() { vec![Dist::Uniform, Dist::Zipf] } else { args.dist.clone() };
    let variants = select(&Variant::ALL, Variant::name, &args.variants)?;
    println!(
        "faa: objects {objects:?}; distributions {}; variants {}",
        dists.iter().map(|d| d.name()).collect::<Vec<_>>().join(","),
        variants.iter().map(|v| v.name()).collect::<Vec<_>>().join(",")
    );
    let pb = progress::bar("faa", (dists.len() * objects.len() * variants.len() * s.repeat) as u64);
    for dist in dists {
        let mut sweep = Sweep::new(
            &format!("faa_{}", dist.name()),
            &format!("Fetch-and-add, {} keys, {} threads", dist.name(), s.threads),
            "objects",
            true,
            "Mops/s",
            variants.iter().map(|v| v.series()).collect(),
            objects.clone(),
        );
        for (xi, &k) in objects.iter().enumerate() {
            let traces = Trace::for_clients(dist, k, s.trace_len, 0, s.seed ^ k, s.threads);
            // Repetitions outside, variants inside: each repetition is one
            // pass over every variant, so noise hits them alike.
            for rep in 0..s.repeat {
                for (vi, &v) in variants.iter().enumerate() {
                    pb.set_message(format!("{} K={k} {} #{}", dist.name(), v.name(), rep + 1));
                    let mops = measure(s, v, k as usize, &traces, rep).map_err(|e| match e {
                        BenchError::Mismatch(m) => {
                            BenchError::Mismatch(format!("faa {} K={k} {}: {m}", dist.name(), v.name()))
                        }
                        other => other,
                    })?;
                    sweep.add(xi, vi, mops);
                    pb.inc(1);
                }
            }
        }
        pb.suspend(|| sweep.print());
        sweep.save(&s.out, s.plots)?;
    }
    pb.finish_and_clear();
    Ok(())
}
