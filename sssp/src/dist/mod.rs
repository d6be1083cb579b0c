//! The graph and the search over a Gossamer program: each thread of the
//! program (in any process, on any host) holds one [`Part`] — a block of
//! vertices with their arcs and search state — as a property of which it
//! is the trustee, and everything else happens by delegation to parts.
//!
//! * [`layout`]: who owns which vertex;
//! * [`part`]: the property (sequential code, run on its trustee);
//! * [`peers`]: every thread's handles on the parts, and the outbox of
//!   batched asynchronous delegation;
//! * [`packed`]: batches between processes as packed records;
//! * [`build`]: parallel generation and construction;
//! * [`search`]: delta-stepping rounds with termination by
//!   acknowledgement;
//! * [`sent`]: what a part already offered other parts in a search;
//! * [`check`]: validation where the result lives.
//!
//! [`Graph`] is the whole of it for the program's main fiber:
//!
//! ```
//! use gossamer_sssp::dist::{Graph, Source};
//! use gossamer_sssp::graph::Spec;
//!
//! gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
//!     let g = Graph::build(&Source::Kronecker(Spec::new(8, 4, 1)), |_| {}).unwrap();
//!     let root = g.roots(1, 7).unwrap()[0];
//!     g.search(root, 0.1);
//!     let edges = g.validate(root).unwrap();
//!     assert!(edges > 0);
//! });
//! ```

pub mod build;
pub mod check;
pub mod layout;
pub mod packed;
pub mod part;
pub mod peers;
pub mod search;
pub mod sent;

use std::collections::HashSet;

use gossamer::{Transferable, Trust};

pub use build::Source;
pub use layout::Layout;
pub use part::Part;
pub use search::SearchStats;

use crate::Tree;

/// Errors of the distributed graph.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The edges could not be generated or read.
    #[error("reading the graph: {0}")]
    Source(String),
    /// Not enough vertices with an arc to search from.
    #[error("only {found} of the {wanted} roots asked for have degree > 0")]
    Roots {
        /// Found.
        found: usize,
        /// Asked for.
        wanted: usize,
    },
    /// A search's result broke a Graph500 rule.
    #[error("validation of the search from {root} failed: {error}")]
    Invalid {
        /// The root.
        root: u32,
        /// The broken rule(s).
        error: String,
    },
}

/// Runs `f(arg)` in a fiber on every thread of the program and returns the
/// results in thread order.
///
/// # Panics
/// If a fiber panicked (the panic is resumed here with its thread).
pub fn on_all<A, R>(f: fn(A) -> R, arg: A) -> Vec<R>
where
    A: Transferable + Clone,
    R: Transferable,
{
    let n = gossamer::threads();
    let handles: Vec<_> = (0..n).map(|t| gossamer::spawn_with(t, f, arg.clone())).collect();
    handles
        .into_iter()
        .enumerate()
        .map(|(t, h)| h.join().unwrap_or_else(|e| panic!("gossamer-sssp: the step on thread {t} failed: {e}")))
        .collect()
}

/// Construction phases, for progress reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Parts entrusted.
    Entrusted,
    /// Edges generated (or read) and routed to their parts.
    Generated,
    /// CSRs built.
    Built,
}

/// A graph spread over every thread of the program.
pub struct Graph {
    parts: Vec<Trust<Part>>,
    layout: Layout,
    /// Input (undirected) edges.
    pub edges: u64,
    /// Arcs stored (two per edge).
    pub arcs: u64,
    /// Bytes held by all parts (graph and search state).
    pub bytes: u64,
}

impl Graph {
    /// Entrusts a part to every thread, generates or reads the edges on
    /// every thread and builds the parts. `progress` hears of each phase.
    pub fn build(source: &Source, mut progress: impl FnMut(Phase)) -> Result<Graph, GraphError> {
        let (vertices, edges) = source.size().map_err(GraphError::Source)?;
        let n = gossamer::threads();
        let layout = Layout::new(vertices, n);
        let parts: Vec<Trust<Part>> = (0..n).map(|t| gossamer::entrust_on(t, Part::new(layout, t))).collect();
        on_all(|p: Vec<Trust<Part>>| peers::install(p), parts.clone());
        let mut g = Graph { parts, layout, edges, arcs: 0, bytes: 0 };
        progress(Phase::Entrusted);
        for r in on_all(build::generate_step, (source.clone(), layout, edges)) {
            r.map_err(GraphError::Source)?;
        }
        progress(Phase::Generated);
        for (arcs, bytes) in on_all(build::build_step, ()) {
            g.arcs += arcs;
            g.bytes += bytes;
        }
        progress(Phase::Built);
        Ok(g)
    }

    /// Vertices.
    pub fn vertices(&self) -> u64 {
        self.layout.vertices
    }

    /// The layout of the parts.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Degree of `v`, asked of its part.
    pub fn degree(&self, v: u32) -> u64 {
        self.parts[self.layout.owner(v)].apply_with(|p, v: u32| p.degree(v), v)
    }

    /// `count` distinct pseudo-random vertices of degree > 0, the same for
    /// the same `seed` (Graph500 searches from random non-isolated roots).
    pub fn roots(&self, count: usize, seed: u64) -> Result<Vec<u32>, GraphError> {
        let n = self.layout.vertices;
        let mut seen = HashSet::new();
        let mut roots = Vec::with_capacity(count);
        let mut x = seed ^ 0x5353_5350_726f_6f74; // "SSSProot"
        let mut tries = 0u64;
        while roots.len() < count && (seen.len() as u64) < n && tries < 64 * n.max(1) {
            tries += 1;
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let v = (mix(x) % n) as u32;
            if seen.insert(v) && self.degree(v) > 0 {
                roots.push(v);
            }
        }
        if roots.len() < count {
            return Err(GraphError::Roots { found: roots.len(), wanted: count });
        }
        Ok(roots)
    }

    /// Runs a search from `root` (delta-stepping with bucket width
    /// `delta`); the result stays in the parts.
    pub fn search(&self, root: u32, delta: f32) -> SearchStats {
        assert!(u64::from(root) < self.layout.vertices, "root {root} is not a vertex");
        assert!(delta > 0.0 && delta.is_finite(), "delta must be positive, not {delta}");
        search::search(root, delta)
    }

    /// Validates the last search's result by the Graph500 rules; returns
    /// the number of input edges in the root's component.
    pub fn validate(&self, root: u32) -> Result<u64, GraphError> {
        check::check(&self.parts, self.layout, root).map_err(|error| GraphError::Invalid { root, error })
    }

    /// Lengthens the last search's distance of `v` by `by`: a wrong result
    /// that [`Graph::validate`] must reject (for tests of validation).
    pub fn perturb(&self, v: u32, by: f64) {
        self.parts[self.layout.owner(v)].apply_with(|p, (v, by): (u32, f64)| p.perturb(v, by), (v, by));
    }

    /// The last search's result, whole, in this thread.
    pub fn gather(&self) -> Tree {
        check::gather(self.layout.vertices)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // Every thread drops its handles; the parts go with the last trust.
        on_all(|(): ()| peers::uninstall(), ());
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
