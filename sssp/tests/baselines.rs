//! The baselines against a brute-force Bellman-Ford and each other:
//! Dijkstra's distances equal Bellman-Ford's bit for bit, delta-stepping's
//! equal Dijkstra's for every bucket width, and both trees validate.

use std::time::Instant;

use gossamer_sssp::baseline::dijkstra::dijkstra;
use gossamer_sssp::baseline::rayon_delta::{delta_stepping, DEFAULT_DELTA};
use gossamer_sssp::graph::{Csr, Edge};
use gossamer_sssp::validate::validate;
use gossamer_sssp::Tree;
use proptest::prelude::*;
use rayon::prelude::*;

/// A tiny deterministic generator (splitmix64).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u32) -> u32 {
        (((self.next() >> 32) * u64::from(n)) >> 32) as u32
    }

    /// Uniform in `[0, 1)` like Graph500's weights (24 random bits).
    fn weight(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// `m` uniformly random edges over `n` vertices.
fn random_edges(n: u32, m: usize, seed: u64) -> Vec<Edge> {
    let mut r = SplitMix(seed);
    (0..m)
        .map(|_| {
            let (u, v) = (r.below(n), r.below(n));
            Edge { u, v, w: r.weight() }
        })
        .collect()
}

/// A skewed, Kronecker-like (R-MAT, initiator 0.57, 0.19, 0.19, 0.05)
/// graph of `2^scale` vertices and `edgefactor` edges a vertex, with its
/// vertices scrambled, generated in parallel.
fn rmat_edges(scale: u32, edgefactor: usize, seed: u64) -> Vec<Edge> {
    let n = 1u64 << scale;
    let mask = n - 1;
    let mut r = SplitMix(seed);
    let (mul, add) = (r.next() | 1, r.next());
    let scramble = move |x: u64| (x.wrapping_mul(mul).wrapping_add(add) & mask) as u32; // a bijection mod 2^scale
    let (a, ab, abc) = ((0.57 * 2f64.powi(32)) as u64, (0.76 * 2f64.powi(32)) as u64, (0.95 * 2f64.powi(32)) as u64);
    (0..n as usize * edgefactor)
        .into_par_iter()
        .map(|i| {
            let mut r = SplitMix(seed ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
            let (mut u, mut v) = (0u64, 0u64);
            for _ in 0..scale {
                let x = r.next() >> 32;
                let (du, dv) = if x < a {
                    (0, 0)
                } else if x < ab {
                    (0, 1)
                } else if x < abc {
                    (1, 0)
                } else {
                    (1, 1)
                };
                u = (u << 1) | du;
                v = (v << 1) | dv;
            }
            Edge { u: scramble(u), v: scramble(v), w: r.weight() }
        })
        .collect()
}

/// Bellman-Ford's distances, relaxing every arc the usual way until
/// nothing changes.
fn bellman_ford(n: u32, edges: &[Edge], root: u32) -> Vec<f64> {
    let mut dist = vec![f64::INFINITY; n as usize];
    dist[root as usize] = 0.0;
    loop {
        let mut changed = false;
        for e in edges {
            for (a, b) in [(e.u, e.v), (e.v, e.u)] {
                let candidate = dist[a as usize] + f64::from(e.w);
                if candidate < dist[b as usize] {
                    dist[b as usize] = candidate;
                    changed = true;
                }
            }
        }
        if !changed {
            return dist;
        }
    }
}

/// The input edges with both ends reached.
fn edges_reached(edges: &[Edge], tree: &Tree) -> u64 {
    edges.iter().filter(|e| tree.dist[e.u as usize].is_finite()).count() as u64
}

fn bits(dist: &[f64]) -> Vec<u64> {
    dist.iter().map(|d| d.to_bits()).collect()
}

/// Weights with ties and zeros: 0, a few fixed values, or uniform.
fn weight() -> impl Strategy<Value = f32> {
    prop_oneof![Just(0.0f32), Just(0.25f32), Just(0.5f32), Just(0.1f32), 0.0f32..1.0, 0.0f32..1e-3]
}

fn graph() -> impl Strategy<Value = (u32, Vec<Edge>, u32)> {
    (1u32..40).prop_flat_map(|n| {
        (Just(n), prop::collection::vec((0..n, 0..n, weight()), 0..120), 0..n)
            .prop_map(|(n, edges, root)| (n, edges.into_iter().map(|(u, v, w)| Edge { u, v, w }).collect(), root))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn dijkstra_equals_bellman_ford((n, edges, root) in graph()) {
        let g = Csr::from_edges(0, n, &edges);
        let tree = dijkstra(&g, root);
        prop_assert_eq!(bits(&tree.dist), bits(&bellman_ford(n, &edges, root)));
        prop_assert_eq!(validate(&g, root, &tree), Ok(edges_reached(&edges, &tree)));
    }

    #[test]
    fn delta_stepping_equals_dijkstra((n, edges, root) in graph()) {
        let g = Csr::from_edges(0, n, &edges);
        let expected = dijkstra(&g, root);
        for delta in [0.05, 0.1, 0.5, 2.0] {
            let tree = delta_stepping(&g, root, delta);
            prop_assert_eq!(bits(&tree.dist), bits(&expected.dist), "delta {}", delta);
            prop_assert_eq!(validate(&g, root, &tree), Ok(edges_reached(&edges, &tree)), "delta {}", delta);
        }
    }
}

#[test]
fn larger_random_graph() {
    let (n, m) = (1u32 << 14, 16usize << 14);
    let edges = random_edges(n, m, 7);
    let g = Csr::from_edges(0, n, &edges);
    let expected = dijkstra(&g, 3);
    assert!(expected.reached() > n as usize / 2);
    assert_eq!(validate(&g, 3, &expected), Ok(edges_reached(&edges, &expected)));
    for delta in [0.05, DEFAULT_DELTA, 0.5, 2.0] {
        let tree = delta_stepping(&g, 3, delta);
        assert_eq!(bits(&tree.dist), bits(&expected.dist), "delta {delta}");
        assert_eq!(validate(&g, 3, &tree), Ok(edges_reached(&edges, &tree)), "delta {delta}");
    }
}

#[test]
fn skewed_graph_on_more_threads_than_cores() {
    // Hubs of high degree (split among tasks), many equal weights (ties
    // and zero-weight arcs: weights are multiples of 1/16), four threads.
    let edges: Vec<Edge> =
        rmat_edges(12, 16, 11).into_iter().map(|e| Edge { w: (e.w * 16.0).floor() / 16.0, ..e }).collect();
    let n = 1u32 << 12;
    let g = Csr::from_edges(0, n, &edges);
    let root = (0..n).max_by_key(|&v| g.degree(v)).unwrap();
    let expected = dijkstra(&g, root);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    for delta in [0.05, DEFAULT_DELTA, 0.5, 2.0] {
        let tree = pool.install(|| delta_stepping(&g, root, delta));
        assert_eq!(bits(&tree.dist), bits(&expected.dist), "delta {delta}");
        assert_eq!(validate(&g, root, &tree), Ok(edges_reached(&edges, &tree)), "delta {delta}");
    }
}

/// Times both baselines on a skewed graph of `2^SCALE` vertices (default
/// 20) and edge factor 16:
/// `SCALE=20 cargo test --release -p gossamer-sssp --test baselines -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run in release mode"]
fn timing() {
    let scale: u32 = std::env::var("SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let t = Instant::now();
    let edges = rmat_edges(scale, 16, 1);
    let n = 1u32 << scale;
    let g = Csr::from_edges(0, n, &edges);
    println!(
        "scale {scale}: {} arcs, built in {:.2?}, {} threads",
        g.arcs(),
        t.elapsed(),
        rayon::current_num_threads()
    );
    let mut r = SplitMix(5);
    for _ in 0..4 {
        let root = loop {
            let v = r.below(n);
            if g.degree(v) > 0 {
                break v;
            }
        };
        let t = Instant::now();
        let expected = dijkstra(&g, root);
        let t_dijkstra = t.elapsed();
        let mut line = format!("root {root:8}: reached {:8}, dijkstra {t_dijkstra:.3?}", expected.reached());
        for delta in [0.05, DEFAULT_DELTA, 0.2] {
            let t = Instant::now();
            let tree = delta_stepping(&g, root, delta);
            line += &format!(", delta {delta} {:.3?}", t.elapsed());
            assert_eq!(bits(&tree.dist), bits(&expected.dist));
        }
        let t = Instant::now();
        let m = validate(&g, root, &expected).unwrap();
        line += &format!(", validate {:.3?} ({m} edges)", t.elapsed());
        println!("{line}");
    }
}
