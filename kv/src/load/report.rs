//! Results of a load run: throughput, hit ratio, latency percentiles, and
//! their CSV form.

use std::io::Write;

use hdrhistogram::Histogram;

use super::workload::Workload;

/// What one run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Responses received in the measured window.
    pub ops: u64,
    /// Length of the measured window, seconds.
    pub seconds: f64,
    /// Gets answered.
    pub gets: u64,
    /// Gets that found their key.
    pub hits: u64,
    /// Error replies.
    pub errors: u64,
    /// Latency (request sent to reply read), nanoseconds.
    pub latency: Histogram<u64>,
}

impl RunResult {
    /// An empty result.
    pub fn new() -> RunResult {
        RunResult { ops: 0, seconds: 0.0, gets: 0, hits: 0, errors: 0, latency: new_histogram() }
    }

    /// Adds another thread's counts.
    pub fn merge(&mut self, o: &RunResult) {
        self.ops += o.ops;
        self.gets += o.gets;
        self.hits += o.hits;
        self.errors += o.errors;
        self.seconds = self.seconds.max(o.seconds);
        self.latency.add(&o.latency).expect("histograms with the same bounds");
    }

    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ops as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Latency percentile `q` (0..100), microseconds.
    pub fn percentile_us(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q / 100.0) as f64 / 1000.0
    }

    /// Fraction of gets that hit.
    pub fn hit_ratio(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.hits as f64 / self.gets as f64
        }
    }
}

impl Default for RunResult {
    fn default() -> Self {
        RunResult::new()
    }
}

/// A latency histogram from 1 ns to 60 s with 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// The CSV header matching [`csv_row`].
pub const CSV_HEADER: &str = "label,server,server_threads,client_threads,conns,depth,keys,dist,set_ratio,value_size,\
seconds,ops,ops_per_sec,hit_ratio,errors,p50_us,p90_us,p99_us,p999_us,max_us";

/// One CSV row.
pub fn csv_row(label: &str, server: &str, server_threads: usize, w: &Workload, r: &RunResult) -> String {
    format!(
        "{label},{server},{server_threads},{},{},{},{},{},{},{},{:.3},{},{:.0},{:.4},{},{:.1},{:.1},{:.1},{:.1},{:.1}",
        w.threads,
        w.conns,
        w.depth,
        w.keys,
        w.dist,
        w.set_ratio,
        w.value_size,
        r.seconds,
        r.ops,
        r.ops_per_sec(),
        r.hit_ratio(),
        r.errors,
        r.percentile_us(50.0),
        r.percentile_us(90.0),
        r.percentile_us(99.0),
        r.percentile_us(99.9),
        r.latency.max() as f64 / 1000.0,
    )
}

/// A one-line human summary.
pub fn summary(r: &RunResult) -> String {
    format!(
        "{:>10.0} ops/s  hits {:>5.1}%  errors {}  p50 {:.1} µs  p99 {:.1} µs  p99.9 {:.1} µs",
        r.ops_per_sec(),
        r.hit_ratio() * 100.0,
        r.errors,
        r.percentile_us(50.0),
        r.percentile_us(99.0),
        r.percentile_us(99.9)
    )
}

/// Appends lines to a CSV file, writing the header if the file is new.
pub fn append_csv(path: &std::path::Path, rows: &[String]) -> std::io::Result<()> {
    let fresh = !path.exists();
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    if fresh {
        writeln!(f, "{CSV_HEADER}")?;
    }
    for r in rows {
        writeln!(f, "{r}")?;
    }
    Ok(())
}

/// The machine and its load: cores, CPU model, load average.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    format!("{cores} cores ({cpu}), load average {load}")
}

/// Checks a run whose keys were all stored beforehand: no error replies,
/// every get a hit. Returns what is wrong, if anything.
pub fn verify(r: &RunResult) -> Option<String> {
    if r.ops == 0 {
        return Some("no replies".into());
    }
    if r.errors > 0 {
        return Some(format!("{} error replies", r.errors));
    }
    if r.gets > 0 && r.hits != r.gets {
        return Some(format!("{} of {} gets missed stored keys", r.gets - r.hits, r.gets));
    }
    None
}
