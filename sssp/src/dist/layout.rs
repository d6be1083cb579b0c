//! Which thread owns which vertices, and which thread generates which
//! edges: contiguous blocks (vertex labels are permuted by the generator,
//! so blocks of labels are balanced in expectation).

use std::ops::Range;

use serde::{Deserialize, Serialize};

/// The partition of `vertices` over `parts` threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Vertices of the graph.
    pub vertices: u64,
    /// Parts (threads of the program).
    pub parts: usize,
    block: u64,
}

impl Layout {
    /// Blocks of `ceil(vertices / parts)` vertices.
    ///
    /// # Panics
    /// If `parts` is 0 or the vertices do not fit `u32` ids.
    pub fn new(vertices: u64, parts: usize) -> Self {
        assert!(parts > 0, "a graph needs at least one part");
        assert!(vertices <= 1 << 32, "vertex ids are u32: at most 2^32 vertices");
        Layout { vertices, parts, block: vertices.div_ceil(parts as u64).max(1) }
    }

    /// The part that owns `v`.
    #[inline]
    pub fn owner(&self, v: u32) -> usize {
        (u64::from(v) / self.block) as usize
    }

    /// The vertices of part `t` (empty for trailing parts of tiny graphs).
    pub fn range(&self, t: usize) -> Range<u32> {
        let lo = (t as u64 * self.block).min(self.vertices);
        let hi = ((t as u64 + 1) * self.block).min(self.vertices);
        lo as u32..hi as u32
    }

    /// The share of `0..total` that part `t` handles (edges to generate or
    /// read).
    pub fn share(total: u64, parts: usize, t: usize) -> Range<u64> {
        let (p, t) = (parts as u64, t as u64);
        total * t / p..total * (t + 1) / p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_every_vertex_once() {
        for (n, p) in [(1u64, 1usize), (5, 3), (16, 4), (3, 5), (1 << 10, 7)] {
            let l = Layout::new(n, p);
            let mut seen = 0;
            for t in 0..p {
                for v in l.range(t) {
                    assert_eq!(l.owner(v), t);
                    seen += 1;
                }
            }
            assert_eq!(seen, n);
            let shares: u64 = (0..p).map(|t| Layout::share(100, p, t)).map(|r| r.end - r.start).sum();
            assert_eq!(shares, 100);
        }
    }
}
