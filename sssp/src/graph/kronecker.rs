//! The Graph500 Kronecker generator, written from the specification.
//!
//! A graph of SCALE `s` and edge factor `f` has `2^s` vertices and `f·2^s`
//! undirected edges. Edge number `i` is drawn independently of all others:
//! for each of the `s` bit levels a quadrant of the adjacency matrix is
//! chosen with the initiator probabilities [`A`], [`B`], [`C`], [`D`] (no
//! noise), which sets one bit of each end:
//!
//! * the bit of `u` is set with probability `C + D`;
//! * given that `u`'s bit is clear, the bit of `v` is set with probability
//!   `B / (A + B)`; given that it is set, with probability `D / (C + D)`.
//!
//! Level `l` (counting from 0) sets bit `l` of both ends. Both ends then go
//! through the vertex-label permutation ([`Spec::permute`]), a seeded
//! bijection of `0..2^s`, and the edge gets a weight uniform in `[0, 1)`.
//! Self-loops and duplicate edges are kept.
//!
//! # Random numbers
//!
//! The generator is counter-based: every random number is a pure function
//! of `(seed, edge index, draw number)`, so that edge `i` is the same
//! whichever thread, process or host computes it, and any range of edges can
//! be generated without generating the others. Edge `i` starts from
//! `h = mix(i ^ k)` (with `k` derived from the seed; `mix` is the SplitMix64
//! finaliser, a bijection of `u64`) and its draw `j` is
//! `mix(h + (j + 1)·γ)`, γ the SplitMix64 increment: a SplitMix64 stream
//! seeded per edge. Level `j < s` uses draw `j` (low 32 bits against the
//! threshold of `u`'s bit, high 32 bits against that of `v`'s bit); the
//! weight is the top 24 bits of draw `s`, times `2^-24`, so that it is exactly
//! representable as an `f32` and below 1.

use std::ops::Range;

use rayon::prelude::*;

use super::Edge;

/// Initiator probability of the top-left quadrant (both bits clear).
pub const A: f64 = 0.57;
/// Initiator probability of the top-right quadrant (bit of `v` set).
pub const B: f64 = 0.19;
/// Initiator probability of the bottom-left quadrant (bit of `u` set).
pub const C: f64 = 0.19;
/// Initiator probability of the bottom-right quadrant (both bits set).
pub const D: f64 = 1.0 - A - B - C;

const TWO_32: f64 = 4_294_967_296.0;
/// `u`'s bit is set when the low 32 bits of the draw are below this.
const T_U: u64 = ((C + D) * TWO_32) as u64;
/// `v`'s bit is set, `u`'s being clear, when the high 32 bits are below this.
const T_V0: u64 = (B / (A + B) * TWO_32) as u64;
/// `v`'s bit is set, `u`'s being set, when the high 32 bits are below this.
const T_V1: u64 = (D / (C + D) * TWO_32) as u64;

/// The SplitMix64 increment (the golden ratio in 0.64 fixed point).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// Domain separators for the keys derived from the seed.
const DOMAIN_EDGES: u64 = 0x6564_6765_7321_0001;
const DOMAIN_LABELS: u64 = 0x6c61_6265_6c73_0002;
const DOMAIN_ROOTS: u64 = 0x726f_6f74_7321_0003;

/// The SplitMix64 finaliser: a bijection of `u64` with good avalanche.
#[inline(always)]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The parameters of a Graph500 Kronecker graph: everything an edge is a
/// function of.
///
/// Build it with [`Spec::new`], which checks the ranges; the methods assume
/// `1 <= scale <= 32` and `edgefactor >= 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Spec {
    /// log2 of the number of vertices (1 to 32).
    pub scale: u32,
    /// Edges per vertex (at least 1).
    pub edgefactor: u32,
    /// The seed of every random choice (edges, weights, labels, roots).
    pub seed: u64,
}

impl Spec {
    /// A graph of `2^scale` vertices and `edgefactor·2^scale` edges.
    ///
    /// # Panics
    /// Unless `1 <= scale <= 32` (vertex ids are `u32`) and
    /// `edgefactor >= 1`.
    pub fn new(scale: u32, edgefactor: u32, seed: u64) -> Spec {
        assert!(
            (1..=32).contains(&scale),
            "Kronecker SCALE must be between 1 and 32 (vertex ids are u32), not {scale}"
        );
        assert!(edgefactor >= 1, "Kronecker edge factor must be at least 1, not {edgefactor}");
        Spec { scale, edgefactor, seed }
    }

    /// Number of vertices, `2^scale`.
    pub fn vertices(&self) -> u64 {
        1u64 << self.scale
    }

    /// Number of edges, `edgefactor·2^scale`.
    pub fn edges(&self) -> u64 {
        u64::from(self.edgefactor) << self.scale
    }

    /// Edge number `i`: a pure function of `(seed, scale, i)`, whoever
    /// computes it. `i` is normally below [`Spec::edges`] (any `i` gives a
    /// valid edge).
    ///
    /// Each call derives the generator's keys from the seed; to generate
    /// many edges, [`Spec::generate`] and [`Spec::generate_par`] are faster.
    pub fn edge(&self, i: u64) -> Edge {
        self.generator().edge(i)
    }

    /// Edge number `i` before the vertex-label permutation: `edge(i)` is
    /// `(permute(u), permute(v), w)` of this `(u, v, w)`.
    pub fn edge_unpermuted(&self, i: u64) -> Edge {
        self.generator().edge_unpermuted(i)
    }

    /// Edges `range.start..range.end`, in order, on the calling thread.
    pub fn generate(&self, range: Range<u64>) -> Vec<Edge> {
        let g = self.generator();
        range.map(|i| g.edge(i)).collect()
    }

    /// Edges `range.start..range.end`, in order, generated in parallel
    /// (`rayon`). Same result as [`Spec::generate`].
    ///
    /// # Panics
    /// If the range has more edges than a `usize` can count.
    pub fn generate_par(&self, range: Range<u64>) -> Vec<Edge> {
        let g = self.generator();
        let start = range.start;
        let len = usize::try_from(range.end.saturating_sub(start)).expect("edge range too long for this platform");
        (0..len).into_par_iter().map(|k| g.edge(start + k as u64)).collect()
    }

    /// All [`Spec::edges`] edges, in parallel (`rayon`), in the order of
    /// `edge(0)`, `edge(1)`, ….
    pub fn generate_all(&self) -> Vec<Edge> {
        self.generate_par(0..self.edges())
    }

    /// The vertex-label permutation: a seeded bijection of `0..2^scale`.
    /// `v` must be below [`Spec::vertices`].
    pub fn permute(&self, v: u32) -> u32 {
        self.permutation().apply(v)
    }

    /// The vertex-label permutation as a value, to apply it to many
    /// vertices without deriving its keys each time.
    pub fn permutation(&self) -> Permutation {
        Permutation::new(self.scale, self.seed ^ DOMAIN_LABELS)
    }

    /// Candidate search roots: a deterministic pseudo-random sequence of
    /// distinct vertices (a seeded bijection, independent of the label
    /// permutation, applied to `0, 1, 2, …`), which ends once all
    /// `2^scale` vertices have been produced. Graph500 searches only from
    /// vertices of degree at least 1: the caller skips the others.
    pub fn root_candidates(&self) -> impl Iterator<Item = u32> + Send + 'static {
        let p = Permutation::new(self.scale, self.seed ^ DOMAIN_ROOTS);
        (0..self.vertices()).map(move |k| p.apply(k as u32))
    }

    fn generator(&self) -> Generator {
        debug_assert!((1..=32).contains(&self.scale), "invalid Kronecker SCALE {}", self.scale);
        Generator { scale: self.scale, key: mix64(self.seed ^ DOMAIN_EDGES), labels: self.permutation() }
    }
}

/// The keys of one graph's draws, derived once from its [`Spec`].
#[derive(Clone, Copy, Debug)]
struct Generator {
    scale: u32,
    key: u64,
    labels: Permutation,
}

impl Generator {
    #[inline]
    fn edge_unpermuted(&self, i: u64) -> Edge {
        let h = mix64(i ^ self.key);
        let (mut u, mut v) = (0u32, 0u32);
        let mut ctr = h;
        for level in 0..self.scale {
            ctr = ctr.wrapping_add(GAMMA);
            let r = mix64(ctr);
            let ubit = (r & 0xFFFF_FFFF) < T_U;
            let tv = if ubit { T_V1 } else { T_V0 };
            let vbit = (r >> 32) < tv;
            u |= u32::from(ubit) << level;
            v |= u32::from(vbit) << level;
        }
        ctr = ctr.wrapping_add(GAMMA);
        let w = (mix64(ctr) >> 40) as f32 * (1.0 / 16_777_216.0);
        Edge { u, v, w }
    }

    #[inline]
    fn edge(&self, i: u64) -> Edge {
        let e = self.edge_unpermuted(i);
        Edge { u: self.labels.apply(e.u), v: self.labels.apply(e.v), w: e.w }
    }
}

/// Number of rounds of the keyed bijection.
const ROUNDS: usize = 4;

/// A seeded bijection of `0..2^bits` (`bits` from 0 to 32): a few rounds of
/// xor with a key, multiplication by an odd key and an xor-shift to the
/// right, all modulo `2^bits`. Each step is a bijection of `bits`-bit
/// numbers (an odd number is invertible modulo `2^bits`; `x ^ (x >> s)` with
/// `s >= 1` is undone from the top bits down), hence so is their
/// composition. The multiplications carry low bits up and the shifts carry
/// high bits down, so that after a few rounds every output bit depends on
/// every input bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permutation {
    mask: u64,
    shift: u32,
    xors: [u64; ROUNDS],
    mults: [u64; ROUNDS],
}

impl Permutation {
    /// The bijection of `0..2^bits` keyed by `key`.
    ///
    /// # Panics
    /// If `bits > 32`.
    pub fn new(bits: u32, key: u64) -> Permutation {
        assert!(bits <= 32, "a permutation of u32 labels has at most 32 bits, not {bits}");
        let mask = if bits == 0 { 0 } else { u64::MAX >> (64 - bits) };
        let mut ctr = mix64(key);
        let mut next = || {
            ctr = ctr.wrapping_add(GAMMA);
            mix64(ctr)
        };
        let mut xors = [0; ROUNDS];
        let mut mults = [0; ROUNDS];
        for r in 0..ROUNDS {
            xors[r] = next() & mask;
            mults[r] = next() | 1;
        }
        Permutation { mask, shift: bits.div_ceil(2).max(1), xors, mults }
    }

    /// The image of `x`, which must be below `2^bits` (higher bits are
    /// ignored).
    #[inline]
    pub fn apply(&self, x: u32) -> u32 {
        let mut x = u64::from(x) & self.mask;
        for r in 0..ROUNDS {
            x ^= self.xors[r];
            x = x.wrapping_mul(self.mults[r]) & self.mask;
            x ^= x >> self.shift;
        }
        x as u32
    }

    /// The preimage of `y` (below `2^bits`): `invert(apply(x)) == x`.
    pub fn invert(&self, y: u32) -> u32 {
        let bits = self.mask.count_ones();
        let mut x = u64::from(y) & self.mask;
        for r in (0..ROUNDS).rev() {
            // Undo `x ^= x >> shift`: each pass fixes `shift` more top bits.
            let z = x;
            for _ in 0..bits.div_ceil(self.shift) {
                x = z ^ (x >> self.shift);
            }
            x = x.wrapping_mul(inverse_mod_2_64(self.mults[r])) & self.mask;
            x ^= self.xors[r];
        }
        x as u32
    }
}

/// The inverse of odd `m` modulo `2^64` (Newton's iteration, each step
/// doubling the number of correct low bits from the 3 that `m` itself has).
fn inverse_mod_2_64(m: u64) -> u64 {
    let mut inv = m;
    for _ in 0..5 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(m.wrapping_mul(inv)));
    }
    inv
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn thresholds_match_the_initiator() {
        let p = |t: u64| t as f64 / TWO_32;
        assert!((p(T_U) - 0.24).abs() < 1e-9);
        assert!((p(T_V0) - 0.25).abs() < 1e-9);
        assert!((p(T_V1) - 0.05 / 0.24).abs() < 1e-9);
        assert!((A + B + C + D - 1.0).abs() < 1e-12 && (D - 0.05).abs() < 1e-12);
    }

    #[test]
    fn sizes() {
        let s = Spec::new(10, 16, 1);
        assert_eq!((s.vertices(), s.edges()), (1024, 16384));
        let s = Spec::new(32, 16, 1);
        assert_eq!((s.vertices(), s.edges()), (1 << 32, 1 << 36));
    }

    #[test]
    #[should_panic(expected = "SCALE")]
    fn scale_zero_panics() {
        Spec::new(0, 16, 1);
    }

    #[test]
    #[should_panic(expected = "SCALE")]
    fn scale_33_panics() {
        Spec::new(33, 16, 1);
    }

    #[test]
    #[should_panic(expected = "edge factor")]
    fn edgefactor_zero_panics() {
        Spec::new(10, 0, 1);
    }

    #[test]
    fn edges_are_in_range_and_permuted() {
        for scale in [1, 2, 3, 7, 17, 31, 32] {
            let s = Spec::new(scale, 4, 99);
            for i in 0..500 {
                let (e, raw) = (s.edge(i), s.edge_unpermuted(i));
                assert!(u64::from(e.u) < s.vertices() && u64::from(e.v) < s.vertices(), "{e:?}");
                assert!((0.0..1.0).contains(&e.w));
                assert_eq!(e, Edge { u: s.permute(raw.u), v: s.permute(raw.v), w: raw.w });
            }
        }
    }

    #[test]
    fn permutation_is_exhaustively_a_bijection_up_to_scale_12() {
        for scale in 1..=12 {
            for seed in [0, 1, 0xDEAD_BEEF] {
                let s = Spec::new(scale, 1, seed);
                let mut seen = vec![false; s.vertices() as usize];
                for v in 0..s.vertices() as u32 {
                    let p = s.permute(v);
                    assert!(!std::mem::replace(&mut seen[p as usize], true), "scale {scale}: {p} twice");
                }
            }
        }
    }

    #[test]
    fn permutation_moves_labels() {
        // Not the identity, nor a mere xor: neighbours land far apart.
        let s = Spec::new(20, 1, 5);
        let fixed = (0..1000).filter(|&v| s.permute(v) == v).count();
        assert!(fixed < 5, "{fixed} fixed points");
        let close = (0..1000).filter(|&v| s.permute(v).abs_diff(s.permute(v + 1)) < 1024).count();
        assert!(close < 20, "{close} neighbours stay close");
    }

    #[test]
    fn root_candidates_are_every_vertex_once() {
        for scale in [1, 2, 5, 11] {
            let s = Spec::new(scale, 1, 3);
            let mut all: Vec<u32> = s.root_candidates().collect();
            assert_eq!(all.len() as u64, s.vertices());
            let head: Vec<u32> = all.iter().copied().take(8).collect();
            all.sort_unstable();
            assert!(all.iter().enumerate().all(|(i, &v)| v as usize == i));
            assert_eq!(head, s.root_candidates().take(8).collect::<Vec<_>>());
        }
        let s = Spec::new(20, 1, 3);
        let head: Vec<u32> = s.root_candidates().take(4).collect();
        assert_ne!(head, vec![0, 1, 2, 3]);
        assert_ne!(head, (0..4).map(|v| s.permute(v)).collect::<Vec<_>>());
    }

    #[test]
    fn deterministic_and_seed_sensitive() {
        let a = Spec::new(12, 4, 7).generate_all();
        assert_eq!(a, Spec::new(12, 4, 7).generate_all());
        let b = Spec::new(12, 4, 8).generate_all();
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same < 10, "{same} identical edges for different seeds");
        assert_ne!(Spec::new(12, 4, 7).permute(1), Spec::new(12, 4, 8).permute(1));
        // The scale changes every edge too, but not the edges' count.
        let c = Spec::new(13, 2, 7).generate_all();
        assert_eq!(c.len(), a.len());
        assert!(a.iter().zip(&c).filter(|(x, y)| x.w == y.w).count() < 10);
    }

    #[test]
    fn generate_all_is_edge_by_edge_and_thread_independent() {
        let s = Spec::new(9, 8, 11);
        let all = s.generate_all();
        assert_eq!(all.len() as u64, s.edges());
        assert!(all.iter().enumerate().all(|(i, e)| *e == s.edge(i as u64)));
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        assert_eq!(pool.install(|| s.generate_all()), all);
        assert_eq!(s.generate(0..s.edges()), all);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn chunks_concatenate_to_generate_all(seed: u64, scale in 1u32..=10, ef in 1u32..=4,
                                              cuts in proptest::collection::vec(any::<u64>(), 0..6)) {
            let s = Spec::new(scale, ef, seed);
            let m = s.edges();
            let mut cuts: Vec<u64> = cuts.into_iter().map(|c| c % (m + 1)).chain([0, m]).collect();
            cuts.sort_unstable();
            let mut joined = Vec::new();
            for (k, w) in cuts.windows(2).enumerate() {
                if k % 2 == 0 {
                    joined.extend(s.generate(w[0]..w[1]));
                } else {
                    joined.extend(s.generate_par(w[0]..w[1]));
                }
            }
            prop_assert_eq!(joined, s.generate_all());
        }

        #[test]
        fn permutation_is_injective_on_random_pairs(seed: u64, scale in 13u32..=32, a: u32, b: u32) {
            let s = Spec::new(scale, 1, seed);
            let mask = (s.vertices() - 1) as u32;
            let (a, b) = (a & mask, b & mask);
            let (pa, pb) = (s.permute(a), s.permute(b));
            prop_assert!(u64::from(pa) < s.vertices() && u64::from(pb) < s.vertices());
            prop_assert_eq!(a == b, pa == pb);
            let p = s.permutation();
            prop_assert_eq!(p.invert(pa), a);
            prop_assert_eq!(p.apply(p.invert(b)), b);
        }

        #[test]
        fn permutation_inverts_by_search_on_small_scales(seed: u64, scale in 1u32..=8) {
            // Exhaustive for random seeds: the image of 0..2^scale is all of it.
            let s = Spec::new(scale, 1, seed);
            let mut image: Vec<u32> = (0..s.vertices() as u32).map(|v| s.permute(v)).collect();
            image.sort_unstable();
            prop_assert!(image.iter().enumerate().all(|(i, &v)| v as usize == i));
        }
    }
}
