//! A small fixed histogram of nanosecond durations: four linear sub-buckets
//! per power of two (so a quantile is within 25 % of the true value), no
//! allocation when recording.

/// Number of buckets: values 0..4 exactly, then 4 per octave up to 2^63.
pub const BUCKETS: usize = 252;

/// Counts of durations (in nanoseconds) in log-linear buckets.
///
/// ```
/// use gossamer::profile::Histogram;
/// let mut h = Histogram::default();
/// for ns in 1..=100 {
///     h.record(ns);
/// }
/// assert_eq!(h.count(), 100);
/// let p50 = h.quantile(0.5);
/// assert!((40..=63).contains(&p50), "{p50}");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: [0; BUCKETS] }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .finish()
    }
}

/// The bucket of value `v`.
#[inline]
pub fn bucket(v: u64) -> usize {
    if v < 4 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros() as usize; // >= 2
    let sub = ((v >> (e - 2)) & 3) as usize;
    4 * (e - 1) + sub
}

/// The largest value that falls in bucket `i`.
pub fn bucket_high(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let e = i / 4 + 1;
    let sub = (i % 4) as u64;
    let low = (4 + sub) << (e - 2);
    low.saturating_add((1u64 << (e - 2)) - 1)
}

impl Histogram {
    /// Counts one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The count of bucket `i` (see [`bucket`]).
    pub fn bucket_count(&self, i: usize) -> u64 {
        self.counts[i]
    }

    /// Adds `n` to bucket `i` (for decoding and merging).
    pub fn add_to_bucket(&mut self, i: usize, n: u64) {
        self.counts[i] = self.counts[i].saturating_add(n);
    }

    /// Adds another histogram's counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    /// The upper bound of the bucket holding quantile `q` (0.0..=1.0), or
    /// 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i);
            }
        }
        bucket_high(BUCKETS - 1)
    }

    /// Non-empty buckets, as `(bucket, count)`.
    pub fn nonzero(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| (i, *c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut prev = 0;
        for v in (0..5000u64).chain([u64::MAX / 3, u64::MAX]) {
            let b = bucket(v);
            assert!(b < BUCKETS);
            assert!(b >= prev || v > 5000);
            assert!(bucket_high(b) >= v, "{v} in {b}");
            if b > 0 {
                assert!(bucket_high(b - 1) < v, "{v}");
            }
            prev = b;
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_within_a_quarter() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v * 10);
        }
        let p99 = h.quantile(0.99) as f64;
        assert!((99_000.0..=99_000.0 * 1.25).contains(&p99), "{p99}");
    }
}
