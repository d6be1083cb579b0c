//! What the load generator sends: keys drawn uniformly or by a Zipf law,
//! gets and sets in a given ratio, values of a given size, all in the text
//! protocol (the one memtier and most clients use).

use std::fmt;
use std::io::Write;

use clap::{Args, ValueEnum};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

/// How keys are drawn.
#[derive(Debug, Clone, Copy, PartialEq, ValueEnum)]
pub enum Dist {
    /// Every key equally likely.
    Uniform,
    /// Key of rank r with probability proportional to r^-s.
    Zipf,
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dist::Uniform => "uniform",
            Dist::Zipf => "zipf",
        })
    }
}

/// The shape of the load.
#[derive(Debug, Clone, Args)]
pub struct Workload {
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Connections per thread.
    #[arg(long, default_value_t = 4)]
    pub conns: usize,
    /// Requests in flight per connection (pipeline depth).
    #[arg(long, default_value_t = 16)]
    pub depth: usize,
    /// Number of distinct keys.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Key distribution.
    #[arg(long, value_enum, default_value_t = Dist::Uniform)]
    pub dist: Dist,
    /// Zipf exponent.
    #[arg(long, default_value_t = 0.99)]
    pub zipf_s: f64,
    /// Fraction of requests that are sets (the rest are gets).
    #[arg(long, default_value_t = 0.1)]
    pub set_ratio: f64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 32)]
    pub value_size: usize,
    /// Keys per get: more than 1 sends multi-key `get k1 k2 …` requests
    /// (each reply is then several VALUE blocks and one END).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub keys_per_get: u32,
    /// Measured seconds.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
}

/// A request kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// get
    Get,
    /// set
    Set,
}

/// Draws requests for one connection or thread.
pub struct Generator {
    rng: SmallRng,
    zipf: Option<Zipf<f64>>,
    keys: u64,
    set_ratio: f64,
    value: Vec<u8>,
    keys_per_get: u32,
}

/// The key name of key number `i`.
pub fn key_name(out: &mut Vec<u8>, i: u64) {
    write!(out, "key:{i:010}").expect("writing to a Vec cannot fail");
}

impl Generator {
    /// A generator for `w`, seeded with `seed`.
    pub fn new(w: &Workload, seed: u64) -> Generator {
        let zipf = match w.dist {
            Dist::Uniform => None,
            Dist::Zipf => Some(Zipf::new(w.keys.max(1) as f64, w.zipf_s).expect("valid Zipf parameters")),
        };
        Generator {
            rng: SmallRng::seed_from_u64(seed),
            zipf,
            keys: w.keys.max(1),
            set_ratio: w.set_ratio,
            value: vec![b'v'; w.value_size],
            keys_per_get: w.keys_per_get.max(1),
        }
    }

    fn key(&mut self) -> u64 {
        match &self.zipf {
            None => self.rng.random_range(0..self.keys),
            Some(z) => (z.sample(&mut self.rng) as u64).clamp(1, self.keys) - 1,
        }
    }

    /// Appends the next request to `out` and returns its kind.
    pub fn next(&mut self, out: &mut Vec<u8>) -> Kind {
        let key = self.key();
        if self.rng.random::<f64>() < self.set_ratio {
            out.extend_from_slice(b"set ");
            key_name(out, key);
            write!(out, " 0 0 {}\r\n", self.value.len()).expect("writing to a Vec cannot fail");
            out.extend_from_slice(&self.value);
            out.extend_from_slice(b"\r\n");
            Kind::Set
        } else {
            out.extend_from_slice(b"get ");
            key_name(out, key);
            for _ in 1..self.keys_per_get {
                out.push(b' ');
                let k = self.key();
                key_name(out, k);
            }
            out.extend_from_slice(b"\r\n");
            Kind::Get
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        w: Workload,
    }

    #[test]
    fn ratios_and_ranges() {
        let w = P::parse_from(["x", "--keys", "100", "--dist", "zipf", "--set-ratio", "0.25"]).w;
        let mut g = Generator::new(&w, 1);
        let mut sets = 0;
        let mut out = Vec::new();
        for _ in 0..10_000 {
            if g.next(&mut out) == Kind::Set {
                sets += 1;
            }
        }
        assert!((2000..3000).contains(&sets), "{sets}");
        for _ in 0..1000 {
            assert!(g.key() < 100);
        }
    }
}
