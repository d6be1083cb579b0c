//! # gossamer-sssp: single-source shortest paths by delegation
//!
//! The Graph500 SSSP kernel (§3.3.3 of the Gossamer thesis) as a Gossamer
//! program: a Kronecker graph is generated in parallel by every thread of
//! the program, each thread's share of the vertices (a CSR part) becomes a
//! property of that thread, and a delta-stepping search sends relaxations
//! of edges whose head lives elsewhere to the head's trustee as batched,
//! asynchronous delegation. The same binary runs on one process, on several
//! processes of a host, and on several hosts.
//!
//! Layers, bottom up:
//! * [`graph`]: the Kronecker generator, the binary edge-list file and the
//!   CSR layout (no Gossamer in it);
//! * [`baseline`]: what a Rust user would run on one machine instead — a
//!   sequential Dijkstra and a `rayon` delta-stepping with atomics;
//! * [`validate`]: the Graph500 SSSP validation rules;
//! * [`dist`]: the parts, construction and search over a Gossamer program;
//! * [`report`]: figures, CSV and plots.

pub mod baseline;
pub mod dist;
pub mod graph;
pub mod report;
pub mod validate;

/// No parent: the vertex is not reached (or not yet).
pub const NO_PARENT: u64 = u64::MAX;

/// The result of a search from one root: a distance and a parent for every
/// vertex of the graph (or of one part of it).
///
/// Unreached vertices have distance `f64::INFINITY` and parent
/// [`NO_PARENT`]; the root has distance 0 and is its own parent. Every
/// implementation relaxes an edge `(u, v, w)` the same way —
/// `dist[u] + f64::from(w)` — so that results can be compared exactly.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tree {
    /// Distance from the root.
    pub dist: Vec<f64>,
    /// Parent in the shortest-path tree.
    pub parent: Vec<u64>,
}

impl Tree {
    /// A tree over `n` vertices with nothing reached.
    pub fn unreached(n: usize) -> Self {
        Tree { dist: vec![f64::INFINITY; n], parent: vec![NO_PARENT; n] }
    }

    /// Number of vertices reached.
    pub fn reached(&self) -> usize {
        self.parent.iter().filter(|&&p| p != NO_PARENT).count()
    }
}
