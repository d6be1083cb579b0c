//! One latency measurement, summarised from an HDR histogram.

use std::time::Duration;

use hdrhistogram::Histogram;

/// A histogram of nanoseconds, from 1 ns to 100 s with 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// What one measurement at one offered load found.
#[derive(Clone, Copy, Debug, Default)]
pub struct LatSample {
    /// Completed operations per second, in millions.
    pub achieved_mops: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

impl LatSample {
    pub fn from_histogram(h: &Histogram<u64>, ops: u64, elapsed: Duration) -> LatSample {
        let us = |ns: u64| ns as f64 / 1e3;
        LatSample {
            achieved_mops: ops as f64 / elapsed.as_secs_f64() / 1e6,
            mean_us: h.mean() / 1e3,
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
        }
    }
}
