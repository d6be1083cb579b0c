//! Construction: every thread generates (or reads) its share of the edge
//! list and sends each arc to the part that owns its tail, in batches of
//! asynchronous delegation; then every part builds its CSR.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::layout::Layout;
use super::peers::{self, Outbox};
use crate::graph::{edgelist, Arc, Edge, Spec};

/// Arcs per batch during construction.
const BATCH: usize = 4096;
/// Edges generated or read at a time.
const CHUNK: u64 = 1 << 16;

/// Where the edges come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Source {
    /// The Kronecker generator.
    Kronecker(Spec),
    /// An edge-list file (see [`edgelist`]) at the same path on every host.
    File(PathBuf),
}

impl Source {
    /// Vertices and edges of the graph.
    pub fn size(&self) -> Result<(u64, u64), String> {
        match self {
            Source::Kronecker(s) => Ok((s.vertices(), s.edges())),
            Source::File(p) => {
                let h = edgelist::read_header(p).map_err(|e| file_error(p, e))?;
                Ok((h.vertices, h.edges))
            }
        }
    }

    /// Edges `range` of the list.
    pub fn edges(&self, range: std::ops::Range<u64>) -> Result<Vec<Edge>, String> {
        match self {
            Source::Kronecker(s) => Ok(s.generate(range)),
            Source::File(p) => edgelist::read_range(p, range).map_err(|e| file_error(p, e)),
        }
    }
}

/// One thread's share of the construction: its edges, sent as arcs to
/// their owners. Returns the number of edges, or what went wrong.
pub fn generate_step((source, layout, edges): (Source, Layout, u64)) -> Result<u64, String> {
    let parts = peers::get();
    let t = gossamer::current_thread().expect("a step runs on a worker");
    let share = Layout::share(edges, parts.len(), t);
    let mut out = Outbox::<Arc>::new(BATCH);
    let mut at = share.start;
    let mut result = Ok(share.end - share.start);
    while at < share.end {
        let end = (at + CHUNK).min(share.end);
        match source.edges(at..end) {
            Ok(chunk) => {
                for e in chunk {
                    out.push(layout.owner(e.u), Arc { from: e.u, to: e.v, w: e.w });
                    out.push(layout.owner(e.v), Arc { from: e.v, to: e.u, w: e.w });
                }
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        at = end;
    }
    // Even after an error: what was sent must land before the step ends.
    out.finish();
    result
}

/// Builds the calling thread's CSR: (arcs, bytes).
pub fn build_step((): ()) -> (u64, u64) {
    let parts = peers::get();
    let t = gossamer::current_thread().expect("a step runs on a worker");
    parts[t].apply(|p| p.build())
}

/// An edge-list error as a message that names the file once.
pub fn file_error(path: &std::path::Path, e: edgelist::EdgeListError) -> String {
    match e {
        edgelist::EdgeListError::Io { .. } => e.to_string(),
        e => format!("{}: {e}", path.display()),
    }
}
