//! Graphs: the Graph500 Kronecker generator ([`kronecker`]), the binary
//! edge-list file ([`edgelist`]) and the CSR layout ([`csr`]).
//!
//! Graphs are undirected and weighted, as the Graph500 SSSP kernel
//! specifies: each generated edge `(u, v, w)` is an edge in both directions
//! with weight `w` uniform in `[0, 1)`. Self-loops and duplicate edges are
//! kept. Vertex ids are `u32` (SCALE at most 32).

pub mod csr;
pub mod edgelist;
pub mod kronecker;

pub use csr::{Arc, Csr};
pub use edgelist::EdgeListError;
pub use kronecker::Spec;

/// One undirected, weighted edge of the input (12 bytes, as in the
/// edge-list file).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Edge {
    /// One end.
    pub u: u32,
    /// The other end.
    pub v: u32,
    /// Weight, uniform in `[0, 1)`.
    pub w: f32,
}
