//! Medians and a plot of YCSB runs appended to a CSV by
//! `gossamer-kv-load ycsb --csv` (see `scripts/kv-ycsb-sweep.sh`): one
//! point per server, workload and server count, the median of its runs.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

/// The median of the runs of one server, workload and server count.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The run's label (the server).
    pub label: String,
    /// The workload.
    pub workload: String,
    /// Server processes.
    pub servers: usize,
    /// Runs.
    pub runs: usize,
    /// Median throughput, operations per second.
    pub ops_per_sec: f64,
    /// Median of the runs' median latency, microseconds.
    pub p50_us: f64,
    /// Median of the runs' 99th percentile, microseconds.
    pub p99_us: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Reads the YCSB CSV at `path` and takes the medians, sorted by workload,
/// server count and label.
pub fn medians(path: &Path) -> Result<Vec<Point>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or_else(|| format!("{}: empty", path.display()))?.split(',').collect();
    let col = |name: &str| {
        header.iter().position(|h| *h == name).ok_or_else(|| format!("{}: no column {name}", path.display()))
    };
    let (label, workload, servers, ops, p50, p99) =
        (col("label")?, col("workload")?, col("servers")?, col("ops_per_sec")?, col("p50_us")?, col("p99_us")?);
    // (label, workload, servers) -> [ops/s, p50, p99] of each run.
    type Group = ((String, String, usize), Vec<[f64; 3]>);
    let mut groups: Vec<Group> = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let bad = || format!("{} line {}: {line:?}", path.display(), i + 2);
        if f.len() != header.len() {
            return Err(bad());
        }
        let num = |c: usize| f[c].parse::<f64>().map_err(|_| bad());
        let key = (f[label].to_string(), f[workload].to_string(), f[servers].split_whitespace().count());
        let v = [num(ops)?, num(p50)?, num(p99)?];
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(v),
            None => groups.push((key, vec![v])),
        }
    }
    let mut points: Vec<Point> = groups
        .into_iter()
        .map(|((label, workload, servers), runs)| {
            let pick = |i: usize| median(&mut runs.iter().map(|r| r[i]).collect::<Vec<_>>());
            Point { label, workload, servers, runs: runs.len(), ops_per_sec: pick(0), p50_us: pick(1), p99_us: pick(2) }
        })
        .collect();
    points.sort_by(|a, b| (&a.workload, a.servers, &a.label).cmp(&(&b.workload, b.servers, &b.label)));
    Ok(points)
}

/// A Markdown table of `points`, with each server's throughput relative to
/// that of `baseline` (a label) at the same workload and server count.
pub fn table(points: &[Point], baseline: &str) -> String {
    let mut out = format!(
        "| workload | servers | server | runs | median ops/s | vs {baseline} | p50 µs | p99 µs |\n|---|---|---|---|---|---|---|---|\n"
    );
    for p in points {
        let base = points
            .iter()
            .find(|q| q.workload == p.workload && q.servers == p.servers && q.label == baseline)
            .map_or(f64::NAN, |q| q.ops_per_sec);
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.2}× | {:.1} | {:.1} |\n",
            p.workload,
            p.servers,
            p.label,
            p.runs,
            p.ops_per_sec,
            p.ops_per_sec / base,
            p.p50_us,
            p.p99_us
        ));
    }
    out
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (style, bytes) in [(FontStyle::Normal, dejavu::sans::regular()), (FontStyle::Bold, dejavu::sans::bold())] {
            let _ = plotters::style::register_font("sans-serif", style, bytes);
        }
    });
}

/// Plots median throughput against server processes, one line per server
/// and workload, into a PNG at `out`.
pub fn plot(points: &[Point], out: &Path, title: &str) -> Result<(), String> {
    register_font();
    let e = |x: &dyn std::fmt::Display| format!("plot {}: {x}", out.display());
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in points {
        let name = format!("{}, YCSB {}", p.label, p.workload.to_uppercase());
        let pt = (p.servers as f64, p.ops_per_sec);
        match lines.iter_mut().find(|l| l.0 == name) {
            Some(l) => l.1.push(pt),
            None => lines.push((name, vec![pt])),
        }
    }
    let x1 = points.iter().map(|p| p.servers).max().unwrap_or(1).max(2) as f64;
    let y1 = points.iter().map(|p| p.ops_per_sec).fold(0.0, f64::max);
    if y1 <= 0.0 {
        return Err(format!("plot {}: nothing to plot", out.display()));
    }
    let root = BitMapBackend::new(out, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(90)
        .build_cartesian_2d(0.5..x1 + 0.5, 0.0..y1 * 1.15)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("server processes")
        .y_desc("median operations per second")
        .label_style(("sans-serif", 14))
        .x_labels(x1 as usize + 1)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
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
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_group_by_label_workload_and_server_count() {
        let dir = std::env::temp_dir().join(format!("kv-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("runs.csv");
        let mut text = String::from("label,workload,servers,ops_per_sec,p50_us,p99_us\n");
        for (l, w, s, ops) in [
            ("kv", "c", "a", 10.0),
            ("kv", "c", "a", 30.0),
            ("kv", "c", "a", 20.0),
            ("mc", "c", "a", 5.0),
            ("kv", "c", "a b", 40.0),
        ] {
            text.push_str(&format!("{l},{w},{s},{ops},1.0,2.0\n"));
        }
        std::fs::write(&csv, text).unwrap();
        let pts = medians(&csv).unwrap();
        let get = |l: &str, n: usize| pts.iter().find(|p| p.label == l && p.servers == n).unwrap();
        assert_eq!((get("kv", 1).ops_per_sec, get("kv", 1).runs), (20.0, 3));
        assert_eq!(get("kv", 2).ops_per_sec, 40.0);
        assert_eq!(get("mc", 1).ops_per_sec, 5.0);
        assert!(table(&pts, "kv").contains("| c | 1 | mc | 1 | 5 | 0.25× |"), "{}", table(&pts, "kv"));
        plot(&pts, &dir.join("plot.png"), "test").unwrap();
        assert!(std::fs::metadata(dir.join("plot.png")).unwrap().len() > 1000);
        std::fs::write(&csv, "label,workload\nkv\n").unwrap();
        assert!(medians(&csv).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
