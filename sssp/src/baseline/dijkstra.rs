//! Sequential Dijkstra with a binary heap: the reference every other
//! implementation's distances are compared with, bit for bit.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::graph::Csr;
use crate::{Tree, NO_PARENT};

/// Shortest paths from `root` over the whole graph `g`, by Dijkstra's
/// algorithm with a [`BinaryHeap`] and lazy deletion (a vertex may be in the
/// heap several times; an entry whose distance is no longer the vertex's
/// is skipped when popped).
///
/// Relaxing an arc `(u, v, w)` proposes `dist[u] + f64::from(w)` and
/// succeeds only if that is strictly less than `dist[v]`; the parent of `v`
/// is the tail of its last successful relaxation. Since floating-point
/// addition of a non-negative weight is monotone and never decreases a
/// distance, the distances are the least fixpoint of that relaxation, the
/// same for every correct implementation whatever its order of work.
///
/// Heap keys are the distances' bit patterns: non-negative `f64`s order
/// like their bits as `u64`.
///
/// # Panics
/// If `g` does not cover the whole graph (`g.lo != 0`), if `root` is not a
/// vertex of it, or if a weight is negative or NaN.
pub fn dijkstra(g: &Csr, root: u32) -> Tree {
    assert_eq!(g.lo, 0, "dijkstra needs the whole graph (its CSR starts at vertex {})", g.lo);
    assert!(root < g.hi, "root {root} is not a vertex of a graph of {} vertices", g.hi);
    assert!(g.weights.iter().all(|&w| w >= 0.0), "dijkstra needs weights that are neither negative nor NaN");
    let mut tree = Tree::unreached(g.hi as usize);
    tree.dist[root as usize] = 0.0;
    tree.parent[root as usize] = u64::from(root);
    let mut heap = BinaryHeap::new();
    heap.push(Reverse((0f64.to_bits(), root)));
    while let Some(Reverse((bits, u))) = heap.pop() {
        let du = tree.dist[u as usize];
        if bits != du.to_bits() {
            continue; // Stale: u was reached by a shorter path since.
        }
        let (heads, weights) = g.adjacency(u);
        for (&v, &w) in heads.iter().zip(weights) {
            let candidate = du + f64::from(w);
            if candidate < tree.dist[v as usize] {
                tree.dist[v as usize] = candidate;
                tree.parent[v as usize] = u64::from(u);
                heap.push(Reverse((candidate.to_bits(), v)));
            }
        }
    }
    debug_assert_eq!(tree.parent[root as usize], u64::from(root));
    debug_assert!(tree.dist.iter().zip(&tree.parent).all(|(d, &p)| d.is_finite() == (p != NO_PARENT)));
    tree
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
        let t = dijkstra(&g, 0);
        assert_eq!(t.dist, vec![0.0, 0.5, 0.75, f64::INFINITY]);
        assert_eq!(t.parent, vec![0, 0, 1, NO_PARENT]);
        let t = dijkstra(&g, 3);
        assert_eq!(t.dist, vec![f64::INFINITY, f64::INFINITY, f64::INFINITY, 0.0]);
        assert_eq!(t.parent, vec![NO_PARENT, NO_PARENT, NO_PARENT, 3]);
    }
}
