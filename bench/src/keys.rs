//! Key choice: uniform or Zipf (α = 1), pre-generated into one trace per
//! client so that drawing a key costs the same few nanoseconds for every
//! variant. A trace entry is a key below 2^31, with the top bit set when the
//! operation is a write.

use std::sync::Arc;

use clap::ValueEnum;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

/// Marks a write in a trace entry.
pub const WRITE: u32 = 1 << 31;

/// How keys are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Dist {
    /// Every key equally likely.
    Uniform,
    /// Key of rank r with probability proportional to 1/r (α = 1).
    Zipf,
}

impl Dist {
    pub fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Zipf => "zipf",
        }
    }
}

/// The key of a trace entry.
#[inline(always)]
pub fn key(entry: u32) -> usize {
    (entry & !WRITE) as usize
}

/// Whether a trace entry is a write.
#[inline(always)]
pub fn is_write(entry: u32) -> bool {
    entry & WRITE != 0
}

/// A client's sequence of operations, cycled through.
#[derive(Clone)]
pub struct Trace {
    entries: Arc<[u32]>,
}

impl Trace {
    /// `len` entries (rounded up to a power of two) over `keys` keys, with
    /// `write_pct` percent writes.
    pub fn generate(dist: Dist, keys: u64, len: usize, write_pct: u32, seed: u64) -> Trace {
        assert!((1..=1 << 31).contains(&keys), "key count out of range");
        let len = len.next_power_of_two();
        let mut rng = SmallRng::seed_from_u64(seed);
        let zipf = Zipf::new(keys as f64, 1.0).expect("valid Zipf parameters");
        let entries = (0..len)
            .map(|_| {
                let k = match dist {
                    Dist::Uniform => rng.random_range(0..keys),
                    // Ranks are 1-based; rank 1 is key 0, the hottest.
                    Dist::Zipf => (zipf.sample(&mut rng) as u64).clamp(1, keys) - 1,
                };
                let w = rng.random_range(0..100u32) < write_pct;
                k as u32 | if w { WRITE } else { 0 }
            })
            .collect();
        Trace { entries }
    }

    /// One trace per client, generated in parallel.
    pub fn for_clients(dist: Dist, keys: u64, len: usize, write_pct: u32, seed: u64, clients: usize) -> Vec<Trace> {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..clients)
                .map(|c| {
                    let seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(c as u64 + 1);
                    s.spawn(move || Trace::generate(dist, keys, len, write_pct, seed))
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("trace generator panicked")).collect()
        })
    }

    /// A cursor starting at `part` of `parts` equal pieces of the trace.
    pub fn cursor(&self, part: usize, parts: usize) -> Cursor {
        let len = self.entries.len();
        Cursor { entries: self.entries.clone(), pos: part * (len / parts.max(1)) % len, mask: len - 1 }
    }
}

/// Walks a trace, wrapping around.
pub struct Cursor {
    entries: Arc<[u32]>,
    pos: usize,
    mask: usize,
}

impl Cursor {
    #[inline(always)]
    pub fn next_entry(&mut self) -> u32 {
        let e = self.entries[self.pos];
        self.pos = (self.pos + 1) & self.mask;
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_prefers_low_ranks() {
        let t = Trace::generate(Dist::Zipf, 1000, 1 << 14, 0, 7);
        let mut c = t.cursor(0, 1);
        let hot = (0..1 << 14).filter(|_| key(c.next_entry()) < 10).count();
        // Ranks 1..10 of 1000 carry about 39% of the mass at α = 1.
        assert!(hot > (1 << 14) / 4, "{hot}");
    }

    #[test]
    fn writes_and_keys_in_range() {
        let t = Trace::generate(Dist::Uniform, 10, 1 << 12, 50, 3);
        let mut c = t.cursor(1, 4);
        let mut writes = 0;
        for _ in 0..1 << 12 {
            let e = c.next_entry();
            assert!(key(e) < 10);
            writes += is_write(e) as usize;
        }
        assert!((1500..2600).contains(&writes), "{writes}");
    }
}
