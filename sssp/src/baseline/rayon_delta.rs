//! Shared-memory parallel delta-stepping with `rayon` and atomics: what a
//! Rust user would write to search one machine's graph on all its cores.
//!
//! Distances are [`AtomicU64`]s holding `f64` bit patterns: non-negative
//! `f64`s order like their bits as `u64`, so relaxing is a `fetch_min`.
//! The vertices of bucket `i` (distance in `[i·Δ, (i+1)·Δ)`) are processed
//! in phases: a parallel phase relaxes the light arcs (weight below Δ, a
//! prefix of each adjacency) of the bucket's frontier, and the vertices it
//! improves make the next frontier if they fall in bucket `i` (or below)
//! or wait in their later bucket otherwise; once no frontier is left, the
//! heavy arcs of every vertex settled in the bucket are relaxed once, in
//! parallel, which fills later buckets (or, exceptionally, reopens this
//! one). Each phase's improved vertices are gathered per `rayon` task, with
//! the bucket of the distance they were given, and merged; frontiers are
//! sorted, so that adjacencies are read in memory order. Parents are found
//! afterwards, in a parallel pass over the final distances.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use rayon::prelude::*;

use crate::graph::Csr;
use crate::{Tree, NO_PARENT};

/// The bucket width Δ of Graph500's reference SSSP.
pub const DEFAULT_DELTA: f32 = 0.1;

/// Adjacencies longer than this are split among `rayon` tasks (Kronecker
/// graphs have a few vertices of very high degree).
const SPLIT_ARCS: usize = 4096;

/// Shortest paths from `root` over the whole graph `g` by parallel
/// delta-stepping with bucket width `delta` on the current `rayon` pool.
///
/// The distances are exactly those of [`dijkstra`](super::dijkstra::dijkstra):
/// every successful relaxation (`dist[u] + f64::from(w)` strictly below
/// `dist[v]`) queues `v` again, so the search ends at a fixpoint of the
/// relaxation, and every distance is a path's sum, so it is the least
/// fixpoint whatever the order of work. The parents may differ from
/// Dijkstra's where several shortest paths tie.
///
/// # Panics
/// If `g` does not cover the whole graph (`g.lo != 0`), if `root` is not a
/// vertex of it, if `delta` is not positive, or if a weight is negative or
/// NaN.
pub fn delta_stepping(g: &Csr, root: u32, delta: f32) -> Tree {
    assert_eq!(g.lo, 0, "delta-stepping needs the whole graph (its CSR starts at vertex {})", g.lo);
    assert!(root < g.hi, "root {root} is not a vertex of a graph of {} vertices", g.hi);
    assert!(delta > 0.0, "the bucket width must be positive, not {delta}");
    assert!(g.weights.par_iter().all(|&w| w >= 0.0), "delta-stepping needs weights that are neither negative nor NaN");
    let n = g.hi as usize;
    let search = Search {
        g,
        width: f64::from(delta),
        dist: (0..n).into_par_iter().map(|_| AtomicU64::new(f64::INFINITY.to_bits())).collect(),
        queued: (0..n).into_par_iter().map(|_| AtomicU32::new(0)).collect(),
        settled: (0..n).into_par_iter().map(|_| AtomicU32::new(0)).collect(),
        light: (0..g.hi)
            .into_par_iter()
            .map(|v| u32::try_from(g.light(v, delta)).expect("more than 2^32 light arcs from a vertex"))
            .collect(),
    };
    search.dist[root as usize].store(0f64.to_bits(), Relaxed);
    search.run(root);
    let dist: Vec<f64> = search.dist.into_par_iter().map(|d| f64::from_bits(d.into_inner())).collect();
    let parent = parents(g, root, &dist);
    Tree { dist, parent }
}

/// The state of one search.
struct Search<'g> {
    g: &'g Csr,
    width: f64,
    /// Tentative distances, as `f64` bits.
    dist: Vec<AtomicU64>,
    /// The last frontier (numbered from 1) each vertex was put in, so that
    /// a frontier holds each vertex once.
    queued: Vec<AtomicU32>,
    /// The last heavy pass (numbered from 1) each vertex is waiting for.
    settled: Vec<AtomicU32>,
    /// The number of light arcs of each vertex.
    light: Vec<u32>,
}

/// The number after `no`, for the stamps of frontiers and heavy passes
/// (which must not wrap around: a stale stamp would then look fresh).
fn next_no(no: u32) -> u32 {
    no.checked_add(1).expect("more than 2^32 phases")
}

/// Which arcs of a vertex a phase relaxes.
#[derive(Clone, Copy)]
enum Arcs {
    Light,
    Heavy,
}

impl Search<'_> {
    #[inline]
    fn dist(&self, v: u32) -> f64 {
        f64::from_bits(self.dist[v as usize].load(Relaxed))
    }

    /// The bucket of a (finite) distance; saturates for huge ones.
    #[inline]
    fn bucket(&self, d: f64) -> u64 {
        (d / self.width) as u64
    }

    fn run(&self, root: u32) {
        let mut buckets: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        buckets.insert(0, vec![root]);
        let (mut frontier_no, mut heavy_no) = (0u32, 1u32);
        while let Some((i, waiting)) = buckets.pop_first() {
            // Vertices whose distance fell below this bucket since they were
            // put in it have been processed already. Frontiers are sorted:
            // their adjacencies are then read in memory order.
            frontier_no = next_no(frontier_no);
            let mut frontier: Vec<u32> = waiting
                .into_par_iter()
                .filter(|&v| {
                    self.bucket(self.dist(v)) == i && self.queued[v as usize].swap(frontier_no, Relaxed) != frontier_no
                })
                .collect();
            frontier.par_sort_unstable();
            let mut settled: Vec<u32> = Vec::new();
            loop {
                while !frontier.is_empty() {
                    settled.par_extend(
                        frontier
                            .par_iter()
                            .copied()
                            .filter(|&v| self.settled[v as usize].swap(heavy_no, Relaxed) != heavy_no),
                    );
                    let improved = self.relax(&frontier, Arcs::Light);
                    frontier_no = next_no(frontier_no);
                    frontier = self.route(improved, i, frontier_no, &mut buckets);
                }
                // The bucket is settled (unless its heavy arcs reopen it, which
                // rounding may make possible): relax its heavy arcs once.
                settled.par_sort_unstable();
                let improved = self.relax(&settled, Arcs::Heavy);
                settled.clear();
                heavy_no = next_no(heavy_no);
                frontier_no = next_no(frontier_no);
                frontier = self.route(improved, i, frontier_no, &mut buckets);
                if frontier.is_empty() {
                    break;
                }
            }
        }
    }

    /// Relaxes the light or heavy arcs of `vertices` in parallel; returns
    /// the vertices improved, once per improvement, with the bucket of the
    /// distance they were given (a later improvement only lowers it).
    fn relax(&self, vertices: &[u32], arcs: Arcs) -> Vec<(u64, u32)> {
        vertices
            .par_iter()
            .fold(Vec::new, |mut out, &u| {
                let du = self.dist(u);
                let (heads, weights) = self.g.adjacency(u);
                let light = self.light[u as usize] as usize;
                let (heads, weights) = match arcs {
                    Arcs::Light => (&heads[..light], &weights[..light]),
                    Arcs::Heavy => (&heads[light..], &weights[light..]),
                };
                if heads.len() <= SPLIT_ARCS {
                    self.relax_arcs(du, heads, weights, &mut out);
                } else {
                    out.par_extend(heads.par_chunks(SPLIT_ARCS).zip(weights.par_chunks(SPLIT_ARCS)).flat_map_iter(
                        |(h, w)| {
                            let mut part = Vec::new();
                            self.relax_arcs(du, h, w, &mut part);
                            part
                        },
                    ));
                }
                out
            })
            .reduce(Vec::new, |mut a, mut b| {
                if a.len() < b.len() {
                    std::mem::swap(&mut a, &mut b);
                }
                a.extend_from_slice(&b);
                a
            })
    }

    #[inline]
    fn relax_arcs(&self, du: f64, heads: &[u32], weights: &[f32], out: &mut Vec<(u64, u32)>) {
        for (&v, &w) in heads.iter().zip(weights) {
            let candidate = du + f64::from(w);
            let bits = candidate.to_bits();
            let slot = &self.dist[v as usize];
            // Read first: most arcs do not improve, and a read is cheaper
            // than a read-modify-write on a contended line.
            if bits < slot.load(Relaxed) && bits < slot.fetch_min(bits, Relaxed) {
                out.push((self.bucket(candidate), v));
            }
        }
    }

    /// Sends improved vertices to the next frontier of bucket `i` (those
    /// given a distance in bucket `i` or below, each once, in order) or to
    /// the later bucket of the distance they were given.
    fn route(
        &self,
        improved: Vec<(u64, u32)>,
        i: u64,
        frontier_no: u32,
        buckets: &mut BTreeMap<u64, Vec<u32>>,
    ) -> Vec<u32> {
        let mut next: Vec<u32> = improved
            .par_iter()
            .filter(|&&(b, v)| b <= i && self.queued[v as usize].swap(frontier_no, Relaxed) != frontier_no)
            .map(|&(_, v)| v)
            .collect();
        next.par_sort_unstable();
        let mut last: Option<(u64, &mut Vec<u32>)> = None;
        for (b, v) in improved {
            if b <= i {
                continue;
            }
            match &mut last {
                Some((lb, list)) if *lb == b => list.push(v),
                _ => {
                    let list = buckets.entry(b).or_default();
                    list.push(v);
                    last = Some((b, list));
                }
            }
        }
        next
    }
}

/// The parent of every reached vertex, from the final distances: a
/// neighbour `u` of `v` with `dist[u] + f64::from(w) == dist[v]` exactly.
///
/// One always exists. The last successful relaxation of `v` came from a
/// neighbour `u` whose distance then, `d`, was at least its final `dist[u]`,
/// and set `dist[v] = d + w`. If `dist[u] + w` were lower than that, the
/// relaxation that lowered `u` to its final distance would have queued `u`,
/// and relaxing `u` again would have lowered `v` again, which it did not
/// (floating-point addition is monotone, so `dist[u] + w <= d + w`). So
/// `dist[u] + w == dist[v]`.
///
/// Where such a neighbour is strictly closer to the root, it is taken
/// (first in the adjacency). A vertex whose only such neighbours are at the
/// same distance (arcs of weight 0, or too light to change the sum) could
/// make a cycle with them, so these few vertices are linked afterwards, by
/// a breadth-first search over those arcs from the vertices already linked:
/// each gets a parent linked before it, so the pointers form a tree. All
/// are reached by it: Dijkstra's tree (each parent settled before its
/// child) shows that every reached vertex has a path from the root of arcs
/// meeting the equality, whose last vertex closer than the end is linked in
/// the first pass.
fn parents(g: &Csr, root: u32, dist: &[f64]) -> Vec<u64> {
    let mut parent: Vec<u64> = (0..g.hi)
        .into_par_iter()
        .map(|v| {
            let dv = dist[v as usize];
            if v == root {
                u64::from(root)
            } else if dv == f64::INFINITY {
                NO_PARENT
            } else {
                let (heads, weights) = g.adjacency(v);
                heads
                    .iter()
                    .zip(weights)
                    .find(|&(&u, &w)| {
                        let du = dist[u as usize];
                        du < dv && du + f64::from(w) == dv
                    })
                    .map_or(NO_PARENT, |(&u, _)| u64::from(u))
            }
        })
        .collect();
    let unlinked: Vec<u32> = (0..g.hi)
        .into_par_iter()
        .filter(|&v| parent[v as usize] == NO_PARENT && dist[v as usize].is_finite())
        .collect();
    if unlinked.is_empty() {
        return parent;
    }
    let tight = |u: u32, w: f32, v: u32| dist[u as usize] + f64::from(w) == dist[v as usize];
    let mut queue = Vec::new();
    for &v in &unlinked {
        let (heads, weights) = g.adjacency(v);
        if let Some((&u, _)) =
            heads.iter().zip(weights).find(|&(&u, &w)| parent[u as usize] != NO_PARENT && tight(u, w, v))
        {
            parent[v as usize] = u64::from(u);
            queue.push(v);
        }
    }
    let mut next = 0;
    while let Some(&u) = queue.get(next) {
        next += 1;
        let (heads, weights) = g.adjacency(u);
        for (&v, &w) in heads.iter().zip(weights) {
            if parent[v as usize] == NO_PARENT && dist[v as usize].is_finite() && tight(u, w, v) {
                parent[v as usize] = u64::from(u);
                queue.push(v);
            }
        }
    }
    assert_eq!(queue.len(), unlinked.len(), "reached vertices without a parent (a bug of the search)");
    parent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Edge;

    #[test]
    fn small_graph() {
        let edges = [
            Edge { u: 0, v: 1, w: 0.5 },
            Edge { u: 1, v: 2, w: 0.25 },
            Edge { u: 0, v: 2, w: 0.875 },
            Edge { u: 3, v: 3, w: 0.125 },
        ];
        let g = Csr::from_edges(0, 4, &edges);
        for delta in [0.1, 0.3, 1.0, 10.0] {
            let t = delta_stepping(&g, 0, delta);
            assert_eq!(t.dist, vec![0.0, 0.5, 0.75, f64::INFINITY]);
            assert_eq!(t.parent, vec![0, 0, 1, NO_PARENT]);
        }
    }

    #[test]
    fn zero_weight_cycle_gets_a_tree() {
        // 1, 2 and 3 are all at distance 0.5, joined by arcs of weight 0.
        let edges = [
            Edge { u: 0, v: 1, w: 0.5 },
            Edge { u: 1, v: 2, w: 0.0 },
            Edge { u: 2, v: 3, w: 0.0 },
            Edge { u: 3, v: 1, w: 0.0 },
            Edge { u: 2, v: 2, w: 0.0 },
        ];
        let g = Csr::from_edges(0, 4, &edges);
        let t = delta_stepping(&g, 0, 0.1);
        assert_eq!(t.dist, vec![0.0, 0.5, 0.5, 0.5]);
        assert_eq!(t.parent[1], 0);
        // 2 and 3 hang from 1 (directly or through the other).
        let to_root = |mut v: usize| {
            for _ in 0..4 {
                if v == 0 {
                    return true;
                }
                v = t.parent[v] as usize;
            }
            false
        };
        assert!((1..4).all(to_root));
    }
}
