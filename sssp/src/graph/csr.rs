//! The compressed sparse row layout of a range of vertices.
//!
//! TODO(helper): builders.

use std::ops::Range;

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
