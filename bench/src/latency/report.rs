//! The latency scenario's table, CSV files and plots.

use std::path::Path;

use super::{LatSample, Scenario, Variant};
use crate::error::Result;
use crate::report::csv::Csv;
use crate::report::plot::{self, Line};
use crate::report::table::Table;
use crate::report::{fmt3, median};
use crate::settings::Settings;

/// Medians over repetitions of one (variant, load).
#[derive(Clone, Copy, Debug, Default)]
struct Medians {
    achieved: f64,
    mean: f64,
    p50: f64,
    p99: f64,
    p999: f64,
}

fn medians(reps: &[LatSample]) -> Medians {
    let m = |f: fn(&LatSample) -> f64| median(&reps.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN);
    Medians {
        achieved: m(|r| r.achieved_mops),
        mean: m(|r| r.mean_us),
        p50: m(|r| r.p50_us),
        p99: m(|r| r.p99_us),
        p999: m(|r| r.p999_us),
    }
}

pub struct LatencyReport {
    stem: String,
    title: String,
    loads: Vec<f64>,
    /// Per variant, `[load][rep]`.
    results: Vec<(Variant, Vec<Vec<LatSample>>)>,
}

impl LatencyReport {
    pub fn new(s: &Settings, sc: &Scenario, loads: &[f64], results: Vec<(Variant, Vec<Vec<LatSample>>)>) -> Self {
        LatencyReport {
            stem: sc.stem(),
            title: format!(
                "Latency vs offered load, {} objects, {} keys, {} threads",
                sc.objects,
                sc.dist.name(),
                s.threads
            ),
            loads: loads.to_vec(),
            results,
        }
    }

    /// The lowest median mean latency of the locks at load `l`.
    fn best_lock_mean(&self, l: usize) -> Option<(Variant, f64)> {
        self.results
            .iter()
            .filter(|(v, _)| matches!(v, Variant::Lock(_)))
            .map(|(v, r)| (*v, medians(&r[l]).mean))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    pub fn render(&self) -> String {
        let header =
            ["variant", "offered Mops", "achieved Mops", "mean µs", "p50 µs", "p99 µs", "p99.9 µs", "mean / best lock"];
        let mut t = Table::new(header.iter().map(|h| h.to_string()).collect());
        for (v, per_load) in &self.results {
            for (l, reps) in per_load.iter().enumerate() {
                let m = medians(reps);
                let vs = match (v, self.best_lock_mean(l)) {
                    (Variant::Trust { .. }, Some((b, bm))) if bm > 0.0 => format!("{:.2}x ({})", m.mean / bm, b.name()),
                    _ => String::new(),
                };
                t.row(vec![
                    v.name().into(),
                    fmt3(self.loads[l]),
                    fmt3(m.achieved),
                    fmt3(m.mean),
                    fmt3(m.p50),
                    fmt3(m.p99),
                    fmt3(m.p999),
                    vs,
                ]);
            }
        }
        format!(
            "\n{} — medians over repetitions; latency counted from when each operation was due\n{}",
            self.title,
            t.render()
        )
    }

    pub fn print(&self) {
        println!("{}", self.render());
    }

    pub fn save(&self, dir: &Path, plots: bool) -> Result<()> {
        let cols = ["variant", "offered_mops", "rep", "achieved_mops", "mean_us", "p50_us", "p99_us", "p999_us"];
        let mut raw = Csv::create(&dir.join(format!("{}.csv", self.stem)), &cols)?;
        let mut sum = Csv::create(&dir.join(format!("{}_summary.csv", self.stem)), &cols)?;
        for (v, per_load) in &self.results {
            for (l, reps) in per_load.iter().enumerate() {
                for (rep, r) in reps.iter().enumerate() {
                    raw.row(&[
                        v.name().to_string(),
                        format!("{}", self.loads[l]),
                        rep.to_string(),
                        format!("{:.4}", r.achieved_mops),
                        format!("{:.3}", r.mean_us),
                        format!("{:.3}", r.p50_us),
                        format!("{:.3}", r.p99_us),
                        format!("{:.3}", r.p999_us),
                    ])?;
                }
                let m = medians(reps);
                sum.row(&[
                    v.name().to_string(),
                    format!("{}", self.loads[l]),
                    "median".into(),
                    format!("{:.4}", m.achieved),
                    format!("{:.3}", m.mean),
                    format!("{:.3}", m.p50),
                    format!("{:.3}", m.p99),
                    format!("{:.3}", m.p999),
                ])?;
            }
        }
        raw.finish()?;
        sum.finish()?;
        if plots {
            for (suffix, what, pick) in [
                ("mean", "mean latency (µs)", (|m: &Medians| m.mean) as fn(&Medians) -> f64),
                ("p50", "median latency (µs)", |m: &Medians| m.p50),
                ("p999", "p99.9 latency (µs)", |m: &Medians| m.p999),
            ] {
                let lines: Vec<Line> = self
                    .results
                    .iter()
                    .map(|(v, per_load)| Line {
                        name: v.name().into(),
                        emphasis: matches!(v, Variant::Trust { .. }),
                        points: per_load
                            .iter()
                            .map(|reps| {
                                let m = medians(reps);
                                (m.achieved, pick(&m))
                            })
                            .collect(),
                    })
                    .collect();
                plot::lines(
                    &dir.join(format!("{}_{suffix}.png", self.stem)),
                    &self.title,
                    "achieved throughput (Mops/s)",
                    true,
                    what,
                    true,
                    &lines,
                )?;
            }
        }
        Ok(())
    }
}
