//! The compressed sparse row layout of a range of vertices, and its
//! builders (a counting sort by tail, then each adjacency by weight).

use std::ops::Range;

use rayon::prelude::*;

use super::Edge;

/// The adjacency of the vertices `lo..hi` of a graph: for vertex `v`,
/// `heads[offsets[v - lo]..offsets[v - lo + 1]]` are its neighbours (global
/// ids) and `weights[..]` the weights of those arcs, sorted by weight
/// (lightest first) so that the light arcs of a vertex are a prefix.
/// An undirected edge `{u, v}` appears as an arc in both `u`'s and `v`'s
/// adjacency; a self-loop appears twice in its vertex's adjacency.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Csr {
    /// First vertex of the range.
    pub lo: u32,
    /// One past the last vertex of the range.
    pub hi: u32,
    /// `hi - lo + 1` offsets into `heads` and `weights`.
    pub offsets: Vec<u64>,
    /// Arc heads (global vertex ids).
    pub heads: Vec<u32>,
    /// Arc weights, ascending within each vertex.
    pub weights: Vec<f32>,
}

impl Csr {
    /// The vertex range.
    pub fn range(&self) -> Range<u32> {
        self.lo..self.hi
    }

    /// Number of arcs.
    pub fn arcs(&self) -> usize {
        self.heads.len()
    }

    /// Heads and weights of `v`'s arcs (`v` global, within the range).
    #[inline]
    pub fn adjacency(&self, v: u32) -> (&[u32], &[f32]) {
        let i = (v - self.lo) as usize;
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        (&self.heads[a..b], &self.weights[a..b])
    }

    /// Degree of `v` (arcs, a self-loop counting twice).
    #[inline]
    pub fn degree(&self, v: u32) -> usize {
        let i = (v - self.lo) as usize;
        (self.offsets[i + 1] - self.offsets[i]) as usize
    }
}

/// Adjacency order: by weight, then head (so that every builder gives the
/// same CSR).
fn by_weight(a: &(f32, u32), b: &(f32, u32)) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
}

/// An arc `from -> to` of weight `w` (one direction of an edge).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Arc {
    /// Tail (global id).
    pub from: u32,
    /// Head (global id).
    pub to: u32,
    /// Weight.
    pub w: f32,
}

impl Csr {
    /// The CSR of vertices `lo..hi` from arcs whose tails are all in the
    /// range (the order of `arcs` does not matter). Parallel (`rayon`).
    ///
    /// # Panics
    /// If an arc's tail is outside `lo..hi`.
    pub fn from_arcs(lo: u32, hi: u32, arcs: &[Arc]) -> Csr {
        Csr::build(lo, hi, arcs)
    }

    /// As [`Csr::from_arcs`], on the calling thread only (for code that
    /// already runs on every core, such as one part per worker thread),
    /// from arcs in batches, and lean: the arcs are written straight into
    /// place and dropped before the adjacencies are sorted, so the peak is
    /// the arcs plus the CSR.
    pub fn from_arc_batches(lo: u32, hi: u32, batches: Vec<Vec<Arc>>) -> Csr {
        let n = (hi - lo) as usize;
        let mut offsets = vec![0u64; n + 1];
        for a in batches.iter().flatten() {
            assert!((lo..hi).contains(&a.from), "arc {a:?} outside the range {lo}..{hi}");
            offsets[(a.from - lo) as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let total = offsets[n] as usize;
        let mut fill: Vec<u64> = offsets[..n].to_vec();
        let (mut heads, mut weights) = (vec![0u32; total], vec![0f32; total]);
        for batch in batches {
            for a in batch {
                let k = &mut fill[(a.from - lo) as usize];
                heads[*k as usize] = a.to;
                weights[*k as usize] = a.w;
                *k += 1;
            }
        }
        drop(fill);
        let mut buf: Vec<(f32, u32)> = Vec::new();
        for i in 0..n {
            let (a, b) = (offsets[i] as usize, offsets[i + 1] as usize);
            buf.clear();
            buf.extend(weights[a..b].iter().copied().zip(heads[a..b].iter().copied()));
            buf.sort_unstable_by(by_weight);
            for (k, &(w, h)) in buf.iter().enumerate() {
                weights[a + k] = w;
                heads[a + k] = h;
            }
        }
        Csr { lo, hi, offsets, heads, weights }
    }

    fn build(lo: u32, hi: u32, arcs: &[Arc]) -> Csr {
        let n = (hi - lo) as usize;
        let mut offsets = vec![0u64; n + 1];
        for a in arcs {
            assert!((lo..hi).contains(&a.from), "arc {a:?} outside the range {lo}..{hi}");
            offsets[(a.from - lo) as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill: Vec<u64> = offsets[..n].to_vec();
        let mut pairs = vec![(0f32, 0u32); arcs.len()];
        for a in arcs {
            let k = &mut fill[(a.from - lo) as usize];
            pairs[*k as usize] = (a.w, a.to);
            *k += 1;
        }
        // Sort each adjacency by weight (then head, for determinism).
        let mut rest: &mut [(f32, u32)] = &mut pairs;
        let mut chunks = Vec::with_capacity(n);
        for i in 0..n {
            let (c, r) = rest.split_at_mut((offsets[i + 1] - offsets[i]) as usize);
            chunks.push(c);
            rest = r;
        }
        chunks.into_par_iter().for_each(|c| c.sort_unstable_by(by_weight));
        let weights = pairs.par_iter().map(|p| p.0).collect();
        let heads = pairs.par_iter().map(|p| p.1).collect();
        Csr { lo, hi, offsets, heads, weights }
    }

    /// The CSR of vertices `lo..hi` of the undirected graph made of
    /// `edges`: every edge with an end in the range gives the arcs of that
    /// end (a self-loop gives two arcs).
    pub fn from_edges(lo: u32, hi: u32, edges: &[Edge]) -> Csr {
        let mut arcs = Vec::new();
        for e in edges {
            if (lo..hi).contains(&e.u) {
                arcs.push(Arc { from: e.u, to: e.v, w: e.w });
            }
            if (lo..hi).contains(&e.v) {
                arcs.push(Arc { from: e.v, to: e.u, w: e.w });
            }
        }
        Csr::from_arcs(lo, hi, &arcs)
    }

    /// Number of light arcs of `v` (weight below `delta`): a prefix of its
    /// adjacency.
    #[inline]
    pub fn light(&self, v: u32, delta: f32) -> usize {
        self.adjacency(v).1.partition_point(|&w| w < delta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arcs_in_both_directions_sorted_by_weight() {
        let edges = [
            Edge { u: 0, v: 1, w: 0.5 },
            Edge { u: 1, v: 2, w: 0.25 },
            Edge { u: 2, v: 2, w: 0.75 },
            Edge { u: 0, v: 2, w: 0.125 },
        ];
        let g = Csr::from_edges(0, 3, &edges);
        assert_eq!(g.adjacency(0), (&[2, 1][..], &[0.125, 0.5][..]));
        assert_eq!(g.adjacency(1), (&[2, 0][..], &[0.25, 0.5][..]));
        assert_eq!(g.adjacency(2), (&[0, 1, 2, 2][..], &[0.125, 0.25, 0.75, 0.75][..]));
        assert_eq!(g.arcs(), 8);
        assert_eq!(g.light(2, 0.5), 2);
        let whole = Csr::from_arc_batches(
            0,
            3,
            edges
                .iter()
                .map(|e| vec![Arc { from: e.u, to: e.v, w: e.w }, Arc { from: e.v, to: e.u, w: e.w }])
                .collect(),
        );
        assert_eq!(whole, g);
        let part = Csr::from_edges(1, 2, &edges);
        assert_eq!(part.offsets, vec![0, 2]);
        assert_eq!(part.adjacency(1), (&[2, 0][..], &[0.25, 0.5][..]));
    }
}
