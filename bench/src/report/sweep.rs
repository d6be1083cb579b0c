//! A throughput sweep: values per (x, series) over repetitions, reported as
//! medians, with every Trust<T> series set against the best lock (or
//! lock-based map) of the same x as a ratio.

use std::path::Path;

use super::csv::Csv;
use super::plot::{self, Line};
use super::table::Table;
use super::{fmt3, median};
use crate::error::Result;

/// One line of a sweep.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// Trust<T> variants get a ratio against the best other series.
    pub trust: bool,
}

pub struct Sweep {
    stem: String,
    title: String,
    x_label: String,
    log_x: bool,
    y_label: String,
    series: Vec<Series>,
    xs: Vec<u64>,
    /// `samples[x][series]`: one value per repetition.
    samples: Vec<Vec<Vec<f64>>>,
}

impl Sweep {
    pub fn new(
        stem: &str,
        title: &str,
        x_label: &str,
        log_x: bool,
        y_label: &str,
        series: Vec<Series>,
        xs: Vec<u64>,
    ) -> Sweep {
        let samples = vec![vec![Vec::new(); series.len()]; xs.len()];
        Sweep {
            stem: stem.into(),
            title: title.into(),
            x_label: x_label.into(),
            log_x,
            y_label: y_label.into(),
            series,
            xs,
            samples,
        }
    }

    pub fn add(&mut self, x: usize, series: usize, value: f64) {
        self.samples[x][series].push(value);
    }

    pub fn median(&self, x: usize, series: usize) -> Option<f64> {
        median(&self.samples[x][series])
    }

    /// The baseline with the highest median at `x`.
    pub fn best_baseline(&self, x: usize) -> Option<(usize, f64)> {
        (0..self.series.len())
            .filter(|&s| !self.series[s].trust)
            .filter_map(|s| self.median(x, s).map(|m| (s, m)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The Trust-over-best-baseline ratio of `series` at `x`: in every
    /// repetition, its value over the best baseline value of that same
    /// repetition; the median of those.
    pub fn ratio(&self, x: usize, series: usize) -> Option<f64> {
        let baselines: Vec<&Vec<f64>> =
            (0..self.series.len()).filter(|&b| !self.series[b].trust).map(|b| &self.samples[x][b]).collect();
        let ratios: Vec<f64> = self.samples[x][series]
            .iter()
            .enumerate()
            .filter_map(|(r, &v)| {
                let best = baselines.iter().filter_map(|b| b.get(r).copied()).fold(f64::NAN, f64::max);
                (best > 0.0).then(|| v / best)
            })
            .collect();
        median(&ratios)
    }

    pub fn render(&self) -> String {
        let mut header = vec![self.x_label.clone()];
        header.extend(self.series.iter().map(|s| s.name.clone()));
        header.push("best baseline".into());
        let mut t = Table::new(header);
        for x in 0..self.xs.len() {
            let mut row = vec![self.xs[x].to_string()];
            for (i, s) in self.series.iter().enumerate() {
                row.push(match (self.median(x, i), s.trust.then(|| self.ratio(x, i)).flatten()) {
                    (Some(m), Some(r)) => format!("{} ({:.2}x)", fmt3(m), r),
                    (Some(m), None) => fmt3(m),
                    (None, _) => "-".into(),
                });
            }
            row.push(self.best_baseline(x).map_or("-".into(), |(s, _)| self.series[s].name.clone()));
            t.row(row);
        }
        format!(
            "\n{} — median {} over repetitions; (Nx) = median over repetitions of Trust over the best baseline \
             of the same repetition\n{}",
            self.title,
            self.y_label,
            t.render()
        )
    }

    pub fn print(&self) {
        println!("{}", self.render());
    }

    /// Writes `<stem>.csv` (every repetition), `<stem>_summary.csv`
    /// (medians and ratios) and, if asked, `<stem>.png`.
    pub fn save(&self, dir: &Path, plots: bool) -> Result<()> {
        let mut raw =
            Csv::create(&dir.join(format!("{}.csv", self.stem)), &[&self.x_label, "variant", "rep", &self.y_label])?;
        for (x, per) in self.samples.iter().enumerate() {
            for (s, vals) in per.iter().enumerate() {
                for (rep, v) in vals.iter().enumerate() {
                    raw.row(&[
                        self.xs[x].to_string(),
                        self.series[s].name.clone(),
                        rep.to_string(),
                        format!("{v:.4}"),
                    ])?;
                }
            }
        }
        raw.finish()?;
        let mut sum = Csv::create(
            &dir.join(format!("{}_summary.csv", self.stem)),
            &[&self.x_label, "variant", "median", "runs", "best_baseline", "best_baseline_median", "ratio"],
        )?;
        for x in 0..self.xs.len() {
            let best = self.best_baseline(x);
            for (s, series) in self.series.iter().enumerate() {
                let Some(m) = self.median(x, s) else { continue };
                let ratio = if series.trust {
                    self.ratio(x, s).map_or(String::new(), |r| format!("{r:.3}"))
                } else {
                    String::new()
                };
                sum.row(&[
                    self.xs[x].to_string(),
                    series.name.clone(),
                    format!("{m:.4}"),
                    self.samples[x][s].len().to_string(),
                    best.map_or(String::new(), |(b, _)| self.series[b].name.clone()),
                    best.map_or(String::new(), |(_, v)| format!("{v:.4}")),
                    ratio,
                ])?;
            }
        }
        sum.finish()?;
        if plots {
            let lines: Vec<Line> = self
                .series
                .iter()
                .enumerate()
                .map(|(s, series)| Line {
                    name: series.name.clone(),
                    emphasis: series.trust,
                    points: (0..self.xs.len())
                        .filter_map(|x| self.median(x, s).map(|m| (self.xs[x] as f64, m)))
                        .collect(),
                })
                .collect();
            plot::lines(
                &dir.join(format!("{}.png", self.stem)),
                &self.title,
                &self.x_label,
                self.log_x,
                &self.y_label,
                false,
                &lines,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_against_best_baseline() {
        let series = vec![
            Series { name: "t".into(), trust: true },
            Series { name: "a".into(), trust: false },
            Series { name: "b".into(), trust: false },
        ];
        let mut s = Sweep::new("x", "x", "objects", true, "Mops/s", series, vec![1]);
        // Three repetitions; the best baseline differs between them.
        for (i, v) in [(0, 10.0), (0, 12.0), (0, 11.0), (1, 2.0), (1, 6.0), (1, 1.0), (2, 5.0), (2, 4.0), (2, 5.5)] {
            s.add(0, i, v);
        }
        assert_eq!(s.best_baseline(0), Some((2, 5.0)));
        // Per repetition: 10/5, 12/6, 11/5.5 — all 2.
        assert!((s.ratio(0, 0).unwrap() - 2.0).abs() < 1e-9);
        assert!(s.render().contains("(2.00x)"));
    }
}
