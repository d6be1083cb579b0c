//! Figures of a run: per-root records, medians, the CSV file and the plot
//! of time against threads.

use std::io::Write;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

/// One search from one root by one implementation.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// `gossamer`, `dijkstra` or `rayon`.
    pub implementation: String,
    /// Processes of the program.
    pub processes: usize,
    /// Threads (of the whole program, or of the baseline).
    pub threads: usize,
    /// Graph SCALE (0 when read from a file without one).
    pub scale: u32,
    /// Edge factor (edges / vertices).
    pub edgefactor: u32,
    /// The root.
    pub root: u32,
    /// Seconds for the search.
    pub seconds: f64,
    /// Input edges in the root's component.
    pub edges: u64,
}

impl Record {
    /// Traversed edges per second (Graph500's TEPS).
    pub fn teps(&self) -> f64 {
        self.edges as f64 / self.seconds
    }
}

/// The CSV header of [`append_csv`].
pub const CSV_HEADER: &str = "implementation,processes,threads,scale,edgefactor,root,seconds,edges,teps";

/// Appends `records` to the CSV file at `path` (header first if the file
/// is new or empty).
pub fn append_csv(path: &Path, records: &[Record]) -> std::io::Result<()> {
    let fresh = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    let mut f = std::io::BufWriter::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?);
    if fresh {
        writeln!(f, "{CSV_HEADER}")?;
    }
    for r in records {
        writeln!(
            f,
            "{},{},{},{},{},{},{:.6},{},{:.4e}",
            r.implementation,
            r.processes,
            r.threads,
            r.scale,
            r.edgefactor,
            r.root,
            r.seconds,
            r.edges,
            r.teps()
        )?;
    }
    f.flush()
}

/// Median of `v` (mean of the middle two for even lengths); NaN if empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Median time and median TEPS of one implementation's records.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Implementation.
    pub implementation: String,
    /// Processes.
    pub processes: usize,
    /// Threads.
    pub threads: usize,
    /// Median seconds per root.
    pub seconds: f64,
    /// Median TEPS.
    pub teps: f64,
}

impl Summary {
    /// The summary of `records` (all of one implementation).
    pub fn of(records: &[Record]) -> Option<Summary> {
        let first = records.first()?;
        Some(Summary {
            implementation: first.implementation.clone(),
            processes: first.processes,
            threads: first.threads,
            seconds: median(&records.iter().map(|r| r.seconds).collect::<Vec<_>>()),
            teps: median(&records.iter().map(|r| r.teps()).collect::<Vec<_>>()),
        })
    }

    /// The machine-readable line other tools parse:
    /// `result,<impl>,<processes>,<threads>,<scale>,<edgefactor>,<median_s>,<median_teps>`.
    pub fn result_line(&self, scale: u32, edgefactor: u32) -> String {
        format!(
            "result,{},{},{},{},{},{:.6},{:.4e}",
            self.implementation, self.processes, self.threads, scale, edgefactor, self.seconds, self.teps
        )
    }

    /// Parses a line written by [`Summary::result_line`].
    pub fn parse_result_line(line: &str) -> Option<Summary> {
        let f: Vec<&str> = line.trim().split(',').collect();
        if f.len() != 8 || f[0] != "result" {
            return None;
        }
        Some(Summary {
            implementation: f[1].to_string(),
            processes: f[2].parse().ok()?,
            threads: f[3].parse().ok()?,
            seconds: f[6].parse().ok()?,
            teps: f[7].parse().ok()?,
        })
    }
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (style, bytes) in [(FontStyle::Normal, dejavu::sans::regular()), (FontStyle::Bold, dejavu::sans::bold())] {
            let _ = plotters::style::register_font("sans-serif", style, bytes);
        }
    });
}

/// 1, 2, 4, … up to `max`: the thread counts worth a label.
fn powers_of_two(max: f64) -> Vec<f64> {
    std::iter::successors(Some(1.0), |x| Some(x * 2.0)).take_while(|x| *x <= max * 1.01).collect()
}

/// Plots median time per root against threads, one line per
/// implementation and process count, into a PNG at `path`.
pub fn plot_time_vs_threads(path: &Path, title: &str, summaries: &[Summary]) -> Result<(), String> {
    register_font();
    let e = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for s in summaries {
        let name = match s.implementation.as_str() {
            "gossamer" => format!("gossamer, {} process{}", s.processes, if s.processes == 1 { "" } else { "es" }),
            other => other.to_string(),
        };
        match lines.iter_mut().find(|l| l.0 == name) {
            Some(l) => l.1.push((s.threads as f64, s.seconds)),
            None => lines.push((name, vec![(s.threads as f64, s.seconds)])),
        }
    }
    for l in &mut lines {
        l.1.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let xs = || lines.iter().flat_map(|l| l.1.iter().map(|p| p.0));
    let ys = || lines.iter().flat_map(|l| l.1.iter().map(|p| p.1)).filter(|y| *y > 0.0);
    let (x0, x1) = (xs().fold(f64::MAX, f64::min).min(1.0), xs().fold(0.0, f64::max).max(2.0));
    let (y0, y1) = (ys().fold(f64::MAX, f64::min), ys().fold(0.0, f64::max));
    if y1 <= 0.0 {
        return Err(format!("plot {}: nothing to plot", path.display()));
    }
    let root = BitMapBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x0 * 0.9..x1 * 1.1).log_scale().with_key_points(powers_of_two(x1)),
            (y0 / 1.5..y1 * 1.5).log_scale(),
        )
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc("median seconds per root")
        .label_style(("sans-serif", 14))
        .y_labels(12)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.3}"))
        .draw()
        .map_err(|x| e(&x))?;
    let palette = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    for (i, (name, pts)) in lines.iter().enumerate() {
        let c = palette[i % palette.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled()))).map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_result_lines() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        let rec = |s| Record {
            implementation: "gossamer".into(),
            processes: 2,
            threads: 4,
            scale: 10,
            edgefactor: 16,
            root: 1,
            seconds: s,
            edges: 1000,
        };
        let s = Summary::of(&[rec(1.0), rec(0.5), rec(2.0)]).unwrap();
        assert_eq!((s.seconds, s.teps), (1.0, 1000.0));
        let line = s.result_line(10, 16);
        assert_eq!(line, "result,gossamer,2,4,10,16,1.000000,1.0000e3");
        assert_eq!(Summary::parse_result_line(&line), Some(s));
    }
}
