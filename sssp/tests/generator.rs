//! Statistics of the Kronecker generator against the Graph500 specification,
//! at a small scale.
//!
//! Every edge is drawn independently, and within an edge every bit level
//! independently, so most statistics are sums of independent indicators
//! whose mean and standard deviation are known exactly; each check allows
//! six standard deviations (a chance below 2·10^-9 of failing for a correct
//! generator, and the seeds are fixed anyway).

use gossamer_sssp::graph::kronecker::{A, B, C, D};
use gossamer_sssp::graph::{Edge, Spec};
use rayon::prelude::*;

const SCALE: u32 = 15;
const EDGEFACTOR: u32 = 16;
const SEED: u64 = 0x5eed_0001;
/// Allowed deviation, in standard deviations.
const SIGMAS: f64 = 6.0;

fn spec() -> Spec {
    Spec::new(SCALE, EDGEFACTOR, SEED)
}

fn unpermuted(s: &Spec) -> Vec<Edge> {
    let m = usize::try_from(s.edges()).unwrap();
    (0..m).into_par_iter().map(|i| s.edge_unpermuted(i as u64)).collect()
}

/// Degrees (a self-loop counts twice, as in the CSR).
fn degrees(n: u64, edges: &[Edge]) -> Vec<u64> {
    let mut d = vec![0u64; n as usize];
    for e in edges {
        d[e.u as usize] += 1;
        d[e.v as usize] += 1;
    }
    d
}

/// Asserts that `count` successes out of `trials` independent Bernoulli(p)
/// trials is within [`SIGMAS`] standard deviations of its mean.
fn assert_binomial(what: &str, count: u64, trials: u64, p: f64) {
    let (n, k) = (trials as f64, count as f64);
    let sigma = (n * p * (1.0 - p)).sqrt();
    assert!((k - n * p).abs() <= SIGMAS * sigma, "{what}: {k} of {n}, expected {} ± {}", n * p, SIGMAS * sigma);
}

fn binomial(n: u32, k: u32) -> f64 {
    (0..k).fold(1.0, |c, i| c * f64::from(n - i) / f64::from(i + 1))
}

#[test]
fn edge_count_and_ranges() {
    let s = spec();
    let all = s.generate_all();
    assert_eq!(all.len() as u64, u64::from(EDGEFACTOR) << SCALE);
    assert_eq!(all.len() as u64, s.edges());
    assert!(all.iter().all(|e| u64::from(e.u) < s.vertices() && u64::from(e.v) < s.vertices()));
}

#[test]
fn bit_and_quadrant_frequencies() {
    let s = spec();
    let m = s.edges();
    let edges = unpermuted(&s);
    // The top bit of u is set with probability C + D.
    let top = 1u32 << (SCALE - 1);
    assert_binomial("top bit of u", edges.iter().filter(|e| e.u & top != 0).count() as u64, m, C + D);
    // v's bits have the same marginal, B + D.
    assert_binomial("top bit of v", edges.iter().filter(|e| e.v & top != 0).count() as u64, m, B + D);
    for level in 0..SCALE {
        let mut q = [0u64; 4];
        for e in &edges {
            q[(((e.u >> level) & 1) * 2 + ((e.v >> level) & 1)) as usize] += 1;
        }
        for (k, (name, p)) in [("A", A), ("B", B), ("C", C), ("D", D)].into_iter().enumerate() {
            assert_binomial(&format!("quadrant {name} at level {level}"), q[k], m, p);
        }
    }
    // Levels are independent: two bits of u are both set with (C + D)^2.
    let both = edges.iter().filter(|e| e.u & 1 != 0 && e.u & top != 0).count() as u64;
    assert_binomial("bits 0 and top of u", both, m, (C + D) * (C + D));
}

#[test]
fn weights_uniform_in_unit_interval() {
    let s = spec();
    let edges = s.generate_all();
    assert!(edges.iter().all(|e| (0.0..1.0).contains(&e.w)));
    let m = edges.len() as f64;
    let mean = edges.iter().map(|e| f64::from(e.w)).sum::<f64>() / m;
    // A uniform [0, 1) variable has standard deviation 1/sqrt(12).
    let sigma = (1.0 / 12.0 / m).sqrt();
    assert!((mean - 0.5).abs() < SIGMAS * sigma, "mean weight {mean}");
    let below = edges.iter().filter(|e| e.w < 0.1).count() as u64;
    assert_binomial("weights below 0.1", below, edges.len() as u64, 0.1);
    // 24 bits of resolution: weights are not all on a coarse grid.
    let distinct: std::collections::HashSet<u32> = edges.iter().map(|e| e.w.to_bits()).collect();
    assert!(distinct.len() as f64 > 0.9 * m, "{} distinct weights", distinct.len());
}

/// Probability that an edge has `u` equal to a given vertex with `k` set
/// bits (out of `n`); `v` has the same marginal, as `B = C`.
fn p_end(n: u32, k: u32) -> f64 {
    (C + D).powi(k as i32) * (A + B).powi((n - k) as i32)
}

#[test]
fn degree_distribution_is_heavy_tailed() {
    let s = spec();
    let (n, m) = (SCALE, s.edges() as f64);
    let deg = degrees(s.vertices(), &unpermuted(&s));
    let mean = 2.0 * m / s.vertices() as f64;

    // Vertex 0 (unpermuted) is the hub: each edge adds X = [u = 0] + [v = 0]
    // to its degree, with E X = 2 (A + B)^n and E X^2 = E X + 2 A^n
    // (both ends 0 needs quadrant A at every level).
    let ex = 2.0 * p_end(n, 0);
    let ex2 = ex + 2.0 * A.powi(n as i32);
    let (expected, sigma) = (m * ex, (m * (ex2 - ex * ex)).sqrt());
    let d0 = deg[0] as f64;
    assert!((d0 - expected).abs() <= SIGMAS * sigma, "degree of vertex 0 is {d0}, expected {expected} ± {sigma}");
    // Here about 17,000 against a mean of 32.
    let max = *deg.iter().max().unwrap() as f64;
    assert!(max >= 100.0 * mean, "max degree {max}, mean {mean}");

    // Degree sums by number of set bits k follow the Kronecker law: the
    // C(n,k) vertices with k bits get M·C(n,k)·2·p_end(n,k) edge ends in
    // expectation. Per edge the count is Y in {0, 1, 2}, so E Y^2 <= 2 E Y
    // and the standard deviation is at most sqrt(2·expected).
    let mut by_bits = vec![0u64; n as usize + 1];
    for (x, &d) in deg.iter().enumerate() {
        by_bits[(x as u32).count_ones() as usize] += d;
    }
    for k in 0..=n {
        let expected = m * binomial(n, k) * 2.0 * p_end(n, k);
        let got = by_bits[k as usize] as f64;
        assert!(
            (got - expected).abs() <= SIGMAS * (2.0 * expected).sqrt(),
            "degree sum of {k}-bit vertices is {got}, expected {expected}"
        );
    }
}

/// Expected number of isolated vertices and its exact standard deviation.
///
/// Vertex x with k set bits is touched by an edge with probability
/// p_x = P(u = x) + P(v = x) - P(u = v = x) = 2·p_end(n, k) - A^(n-k)·D^k,
/// and is isolated with probability (1 - p_x)^M, edges being independent.
/// Two distinct vertices x, y are both isolated with probability
/// (1 - p_x - p_y + p_xy)^M, where p_xy = P(u = x, v = y) + P(u = y, v = x)
/// = 2·A^n00·B^(n01 + n10)·D^n11 (B = C) depends only on the numbers of
/// levels where (x, y) have bits 00, 01, 10 and 11; grouping the ordered
/// pairs by those counts (a multinomial number of pairs each) gives the
/// variance exactly in O(n^3).
fn isolated_mean_and_sigma(n: u32, m: f64) -> (f64, f64) {
    let pow = |x: f64, e: u32| x.powi(e as i32);
    let p_touch = |k: u32| 2.0 * p_end(n, k) - pow(A, n - k) * pow(D, k);
    // ln P(isolated) = M·ln(1 - p).
    let ln_iso = |p: f64| m * (-p).ln_1p();
    let mut mean = 0.0;
    let mut var = 0.0;
    for k in 0..=n {
        let q = ln_iso(p_touch(k)).exp();
        mean += binomial(n, k) * q;
        var += binomial(n, k) * q * (1.0 - q);
    }
    for n00 in 0..=n {
        for n01 in 0..=n - n00 {
            for n10 in 0..=n - n00 - n01 {
                let n11 = n - n00 - n01 - n10;
                if n01 + n10 == 0 {
                    continue; // x = y
                }
                let pairs = binomial(n, n00) * binomial(n - n00, n01) * binomial(n - n00 - n01, n10);
                let (px, py) = (p_touch(n10 + n11), p_touch(n01 + n11));
                let pxy = 2.0 * pow(A, n00) * pow(B, n01 + n10) * pow(D, n11);
                // Cov = e^a - e^b = e^b·(e^(a-b) - 1), computed without cancellation.
                let a = ln_iso(px + py - pxy);
                let b = ln_iso(px) + ln_iso(py);
                var += pairs * b.exp() * (a - b).exp_m1();
            }
        }
    }
    (mean, var.sqrt())
}

#[test]
fn isolated_vertices_as_expected() {
    for (scale, edgefactor, seed) in [(SCALE, EDGEFACTOR, SEED), (14, 16, 77), (12, 4, 3)] {
        let s = Spec::new(scale, edgefactor, seed);
        let deg = degrees(s.vertices(), &s.generate_all());
        let isolated = deg.iter().filter(|&&d| d == 0).count() as f64;
        let (mean, sigma) = isolated_mean_and_sigma(scale, s.edges() as f64);
        eprintln!(
            "scale {scale} ef {edgefactor}: {isolated} isolated of {}, expected {mean:.1} ± {sigma:.1}",
            s.vertices()
        );
        assert!(
            (isolated - mean).abs() <= SIGMAS * sigma,
            "scale {scale}: {isolated} isolated vertices, expected {mean} ± {sigma}"
        );
        // A sizeable fraction, as Kronecker graphs have.
        assert!(isolated > 0.1 * s.vertices() as f64, "scale {scale}: only {isolated} isolated vertices");
    }
}

#[test]
fn permutation_keeps_the_degree_multiset() {
    let s = spec();
    let raw = degrees(s.vertices(), &unpermuted(&s));
    let permuted = degrees(s.vertices(), &s.generate_all());
    let p = s.permutation();
    assert!((0..s.vertices() as u32).all(|x| permuted[p.apply(x) as usize] == raw[x as usize]));
    let (mut a, mut b) = (raw.clone(), permuted.clone());
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b);
    // ... but moves the hubs: the degree of the unpermuted labels 0..16 is
    // not where they were.
    assert_ne!(raw[..16], permuted[..16]);
}

/// Throughput of the generator (run in release:
/// `cargo test --release -p gossamer-sssp --test generator -- --ignored --nocapture`).
#[test]
#[ignore = "timing, meant for release builds"]
fn generate_all_scale_20_timing() {
    let s = Spec::new(20, 16, 1);
    let t = std::time::Instant::now();
    let edges = s.generate_all();
    let dt = t.elapsed();
    assert_eq!(edges.len() as u64, s.edges());
    eprintln!(
        "generate_all SCALE 20, edge factor 16: {} edges in {dt:.2?} on {} threads ({:.1} M edges/s)",
        edges.len(),
        rayon::current_num_threads(),
        edges.len() as f64 / dt.as_secs_f64() / 1e6
    );
}
