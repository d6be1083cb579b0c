//! The figures of a comparison: read from the CSV summaries that `micro`
//! and `faa` write, gathered per side over the rounds, and rendered as one
//! table of medians with the gain of the head over the base.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{BenchError, Result};
use crate::report::csv::Csv;
use crate::report::median;
use crate::report::table::Table;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Base,
    Head,
}

impl Side {
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Base => "base",
            Side::Head => "head",
        }
    }
}

/// Which way a figure improves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Better {
    Higher,
    Lower,
}

impl Better {
    fn of_unit(unit: &str) -> Better {
        if unit.contains("ops") || unit == "x" {
            Better::Higher
        } else {
            Better::Lower
        }
    }
}

#[derive(Debug)]
struct Figure {
    unit: String,
    better: Better,
    /// Values per side, one per round.
    values: [Vec<f64>; 2],
}

/// Every figure seen, in the order first seen.
#[derive(Default, Debug)]
pub struct Figures {
    order: Vec<String>,
    by_name: BTreeMap<String, Figure>,
}

impl Figures {
    fn add(&mut self, side: Side, name: String, unit: &str, value: f64) {
        if !value.is_finite() {
            return;
        }
        let f = self.by_name.entry(name.clone()).or_insert_with(|| {
            self.order.push(name);
            Figure { unit: unit.to_string(), better: Better::of_unit(unit), values: [vec![], vec![]] }
        });
        f.values[side.index()].push(value);
    }

    /// Reads one round of one side from the folder its runs wrote.
    pub fn read_round(&mut self, side: Side, dir: &Path) -> Result<()> {
        let micro = read_csv(&dir.join("micro_summary.csv"))?;
        for row in rows_of(&micro, &["figure", "unit", "median"])? {
            let v = number(row[2])?;
            self.add(side, format!("micro {}", row[0]), row[1], v);
        }
        let faa = read_csv(&dir.join("faa_uniform_summary.csv"))?;
        for row in rows_of(&faa, &["objects", "variant", "median", "ratio"])? {
            let (k, variant) = (row[0], row[1]);
            self.add(side, format!("faa uniform K={k} {variant}"), "Mops/s", number(row[2])?);
            if !row[3].is_empty() {
                self.add(side, format!("faa uniform K={k} {variant} / best lock"), "x", number(row[3])?);
            }
        }
        Ok(())
    }

    /// The comparison table: medians over rounds and the gain of the head.
    pub fn render(&self, rounds: usize) -> String {
        let mut t = Table::new(["figure", "unit", "base", "head", "gain"].iter().map(|h| h.to_string()).collect());
        for name in &self.order {
            let f = &self.by_name[name];
            let (b, h) = (median(&f.values[0]), median(&f.values[1]));
            t.row(vec![
                name.clone(),
                f.unit.clone(),
                fmt(b),
                fmt(h),
                gain(f.better, b, h).map_or("-".into(), |g| format!("{g:.3}")),
            ]);
        }
        format!(
            "Head against base — medians over {rounds} interleaved rounds; gain > 1: the head is better \
             (higher for Mops/s and ratios, lower for times)\n{}",
            t.render()
        )
    }

    pub fn write_csv(&self, path: &Path) -> Result<()> {
        let mut c = Csv::create(path, &["figure", "unit", "base_median", "head_median", "gain", "rounds"])?;
        for name in &self.order {
            let f = &self.by_name[name];
            let (b, h) = (median(&f.values[0]), median(&f.values[1]));
            c.row(&[
                name.clone(),
                f.unit.clone(),
                b.map_or(String::new(), |v| format!("{v:.4}")),
                h.map_or(String::new(), |v| format!("{v:.4}")),
                gain(f.better, b, h).map_or(String::new(), |g| format!("{g:.4}")),
                f.values[0].len().min(f.values[1].len()).to_string(),
            ])?;
        }
        c.finish()?;
        Ok(())
    }
}

fn gain(better: Better, base: Option<f64>, head: Option<f64>) -> Option<f64> {
    let (b, h) = (base?, head?);
    let g = match better {
        Better::Higher => h / b,
        Better::Lower => b / h,
    };
    g.is_finite().then_some(g)
}

fn fmt(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    }
}

fn number(s: &str) -> Result<f64> {
    s.trim().parse().map_err(|_| BenchError::Other(format!("not a number in a result file: `{s}`")))
}

/// A CSV file as rows of fields (RFC 4180 quoting, as our writer does).
fn read_csv(path: &Path) -> Result<Vec<Vec<String>>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| BenchError::Other(format!("cannot read {}: {e}", path.display())))?;
    Ok(parse_csv(&text))
}

fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = vec![];
    let mut row = vec![];
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => row.push(std::mem::take(&mut field)),
            ('\n', false) => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            ('\r', false) => {}
            (c, _) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// The data rows of `rows`, each cut down to the named columns.
fn rows_of<'a>(rows: &'a [Vec<String>], columns: &[&str]) -> Result<Vec<Vec<&'a str>>> {
    let Some((header, data)) = rows.split_first() else {
        return Err(BenchError::Other("an empty result file".into()));
    };
    let idx: Vec<usize> = columns
        .iter()
        .map(|c| {
            header
                .iter()
                .position(|h| h == c)
                .ok_or_else(|| BenchError::Other(format!("a result file lacks the column `{c}`")))
        })
        .collect::<Result<_>>()?;
    Ok(data.iter().map(|r| idx.iter().map(|&i| r.get(i).map_or("", String::as_str)).collect()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_with_quotes_and_commas() {
        let rows = parse_csv("a,b,c\n1,\"x, \"\"y\"\"\",3\n");
        assert_eq!(rows, vec![vec!["a", "b", "c"], vec!["1", "x, \"y\"", "3"]]);
    }

    #[test]
    fn gain_follows_the_unit() {
        assert_eq!(gain(Better::of_unit("ns"), Some(200.0), Some(100.0)), Some(2.0));
        assert_eq!(gain(Better::of_unit("Mops/s"), Some(10.0), Some(5.0)), Some(0.5));
        assert_eq!(gain(Better::of_unit("x"), Some(1.0), Some(1.5)), Some(1.5));
        assert_eq!(gain(Better::Lower, None, Some(1.0)), None);
    }

    #[test]
    fn medians_and_table() {
        let mut f = Figures::default();
        for (side, v) in [(Side::Base, 10.0), (Side::Base, 30.0), (Side::Base, 20.0), (Side::Head, 5.0)] {
            f.add(side, "micro apply-rtt".into(), "ns", v);
        }
        f.add(Side::Head, "micro apply-rtt".into(), "ns", 15.0);
        let t = f.render(2);
        assert!(t.contains("micro apply-rtt"), "{t}");
        // Base median 20, head median 10: the head is twice as good.
        assert!(t.contains("2.000"), "{t}");
    }
}
