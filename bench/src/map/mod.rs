//! Concurrent map throughput (thesis §2.6.3, without the network): 8-byte
//! keys and 16-byte values in a pre-filled table. Reads look a key up and
//! check its value; writes update the value in place. Two sweeps per key
//! distribution: table size at 5% writes, and write ratio at a fixed size.
//! A `HashMap` sharded over trustees against `dashmap`, `scc`, and 512
//! shards of `Mutex<HashMap>` (std and parking_lot) and `RwLock<HashMap>`,
//! and 512 shards as `Adaptive<T>` trusts.

mod adaptive_run;
mod entry;
mod locked;
mod locked_run;
mod trust_run;

use crate::cli::MapArgs;
use crate::error::{BenchError, Result};
use crate::faa::{select, Issue};
use crate::keys::{Dist, Trace};
use crate::progress;
use crate::report::sweep::{Series, Sweep};
use crate::settings::{Scale, Settings};
use crate::trust_env::Placement;

/// The lock-based maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    DashMap,
    Scc,
    Mutex512,
    ParkingLot512,
    RwLock512,
}

/// One line of the map plots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Trust {
        dedicated: bool,
        issue: Issue,
    },
    Locked(MapKind),
    /// 512 shards as `Adaptive<T>` trusts, `apply_then` with a window.
    Adaptive,
}

impl Variant {
    pub const ALL: [Variant; 9] = [
        Variant::Trust { dedicated: false, issue: Issue::Apply },
        Variant::Trust { dedicated: false, issue: Issue::Async },
        Variant::Trust { dedicated: true, issue: Issue::Async },
        Variant::Locked(MapKind::DashMap),
        Variant::Locked(MapKind::Scc),
        Variant::Locked(MapKind::Mutex512),
        Variant::Locked(MapKind::ParkingLot512),
        Variant::Locked(MapKind::RwLock512),
        Variant::Adaptive,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Trust { dedicated, issue } => issue.variant_name(dedicated),
            Variant::Locked(MapKind::DashMap) => "dashmap",
            Variant::Locked(MapKind::Scc) => "scc",
            Variant::Locked(MapKind::Mutex512) => "mutex-512",
            Variant::Locked(MapKind::ParkingLot512) => "parking-lot-512",
            Variant::Locked(MapKind::RwLock512) => "rwlock-512",
            Variant::Adaptive => "trust-adaptive",
        }
    }

    fn series(self) -> Series {
        Series { name: self.name().into(), trust: !matches!(self, Variant::Locked(_)) }
    }
}

/// One point of a sweep: a table size and a write percentage.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    pub size: u64,
    pub write_pct: u32,
}

fn default_sizes(scale: Scale) -> Vec<u64> {
    match scale {
        Scale::Full => (1..=7).map(|e| 10u64.pow(e)).collect(),
        Scale::Quick => vec![10, 1000, 100_000],
        Scale::Smoke => vec![10, 1000],
    }
}

fn default_writes(scale: Scale) -> Vec<u32> {
    match scale {
        Scale::Full => vec![0, 5, 10, 25, 50, 75, 100],
        Scale::Quick => vec![0, 50, 100],
        Scale::Smoke => vec![0, 100],
    }
}

/// One measurement of one variant at one point; returns Mops/s.
pub(crate) fn measure(s: &Settings, v: Variant, p: Point, traces: &[Trace], rep: usize) -> Result<f64> {
    match v {
        Variant::Locked(kind) => locked_run::run(s, kind, p, traces, rep),
        Variant::Trust { dedicated, issue } => {
            let placement = if dedicated { s.ded_placement() } else { Placement::Shared };
            trust_run::run(s, placement, issue, p, traces, rep)
        }
        Variant::Adaptive => adaptive_run::run(s, p, traces, rep),
    }
}

pub fn run(s: &Settings, args: &MapArgs) -> Result<()> {
    let sizes = if args.sizes.is_empty() { default_sizes(s.scale) } else { args.sizes.clone() };
    let writes = if args.writes.is_empty() { default_writes(s.scale) } else { args.writes.clone() };
    if sizes.iter().any(|&n| n == 0 || n > 1 << 31) || writes.iter().any(|&w| w > 100) {
        return Err(BenchError::Other("sizes must be in 1..=2^31 and write percentages in 0..=100".into()));
    }
    let dists = if args.dist.is_empty() { vec![Dist::Uniform, Dist::Zipf] } else { args.dist.clone() };
    let variants = select(&Variant::ALL, Variant::name, &args.variants)?;
    let fixed = |d: Dist| match d {
        Dist::Uniform => args.uniform_size.unwrap_or(1000),
        Dist::Zipf => args.zipf_size.unwrap_or(s.scale.pick(10_000_000, 100_000, 1000)),
    };
    println!(
        "map: sizes {sizes:?} at 5% writes; writes {writes:?}% at {} (uniform) and {} (zipf) entries; \
         distributions {}; variants {}",
        fixed(Dist::Uniform),
        fixed(Dist::Zipf),
        dists.iter().map(|d| d.name()).collect::<Vec<_>>().join(","),
        variants.iter().map(|v| v.name()).collect::<Vec<_>>().join(",")
    );
    let pb = progress::bar("map", (dists.len() * (sizes.len() + writes.len()) * variants.len() * s.repeat) as u64);
    for &dist in &dists {
        for by_size in [true, false] {
            let (stem, title, x_label, log_x, xs) = if by_size {
                (
                    format!("map_size_{}", dist.name()),
                    format!("Map, 5% writes, {} keys, {} threads", dist.name(), s.threads),
                    "table size",
                    true,
                    sizes.clone(),
                )
            } else {
                (
                    format!("map_writes_{}", dist.name()),
                    format!("Map, {} entries, {} keys, {} threads", fixed(dist), dist.name(), s.threads),
                    "write %",
                    false,
                    writes.iter().map(|&w| w as u64).collect(),
                )
            };
            let mut sweep = Sweep::new(
                &stem,
                &title,
                x_label,
                log_x,
                "Mops/s",
                variants.iter().map(|v| v.series()).collect(),
                xs.clone(),
            );
            for (xi, &x) in xs.iter().enumerate() {
                let p = if by_size {
                    Point { size: x, write_pct: 5 }
                } else {
                    Point { size: fixed(dist), write_pct: x as u32 }
                };
                let traces = Trace::for_clients(
                    dist,
                    p.size,
                    s.trace_len,
                    p.write_pct,
                    s.seed ^ p.size ^ (p.write_pct as u64) << 40,
                    s.threads,
                );
                for rep in 0..s.repeat {
                    for (vi, &v) in variants.iter().enumerate() {
                        pb.set_message(format!(
                            "{} size={} writes={}% {} #{}",
                            dist.name(),
                            p.size,
                            p.write_pct,
                            v.name(),
                            rep + 1
                        ));
                        let mops = measure(s, v, p, &traces, rep).map_err(|e| match e {
                            BenchError::Mismatch(m) => BenchError::Mismatch(format!(
                                "map {} size={} writes={}% {}: {m}",
                                dist.name(),
                                p.size,
                                p.write_pct,
                                v.name()
                            )),
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
    }
    pb.finish_and_clear();
    Ok(())
}
