//! Validation of a search where its result lives: every thread checks its
//! own part against the Graph500 rules ([`crate::validate`]), fetching the
//! distances and parents of the other parts' vertices it needs through
//! delegation; rank 0 then follows the rare zero-weight parent chains.
//! Also: gathering the whole result in one place (for comparisons).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use gossamer::Trust;

use super::part::Part;
use super::{on_all, peers};
use crate::validate::{self, Lookup};
use crate::{Tree, NO_PARENT};

/// A multiplicative hash for `u32` vertex ids (SipHash costs more than
/// the lookups it guards; these keys are not chosen by an adversary).
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (u64::from(v) ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

/// Remote vertices' (distance, parent), by id.
pub type Fetched = HashMap<u32, (f64, u64), BuildHasherDefault<IdHasher>>;

/// Vertices asked for per request.
const ASK: usize = 8192;

/// What a thread's check found: (edges in the root's component counted
/// by this part, vertices whose distance equals their parent's).
pub type PartResult = Result<(u64, Vec<u32>), String>;

/// One thread's check of its part.
pub fn check_step(root: u32) -> PartResult {
    let parts = peers::get();
    let t = gossamer::current_thread().expect("a step runs on a worker");
    let needs = parts[t].apply(|p| p.remote_needs());
    let layout = parts[t].apply(|p| p.layout());
    let mut remote = Remote { dense: vec![None; parts.len()], sparse: Fetched::default() };
    for (owner, ids) in needs.into_iter().enumerate() {
        let range = layout.range(owner);
        if ids.len() * DENSE >= range.len() && !ids.is_empty() {
            // Most of that part: take all of it, and index it directly.
            let tree = parts[owner].apply_with(|p, ()| p.tree().clone(), ());
            remote.dense[owner] = Some((range.start, tree));
            continue;
        }
        for chunk in ids.chunks(ASK) {
            let got = parts[owner].apply_with(|p, ids: Vec<u32>| p.lookup(&ids), chunk.to_vec());
            remote.sparse.extend(chunk.iter().copied().zip(got));
        }
    }
    parts[t].apply_with(|p, (root, remote): (u32, Remote)| p.check(root, remote), (root, remote))
}

/// Another part is fetched whole when we need at least 1/DENSE of it.
const DENSE: usize = 4;

/// What a part fetched of the others: whole parts (first vertex, their
/// trees), and single vertices.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Remote {
    dense: Vec<Option<(u32, Tree)>>,
    sparse: Fetched,
}

impl Part {
    /// Checks our vertices and arcs, with `remote` holding every other
    /// vertex we refer to.
    pub fn check(&self, root: u32, remote: Remote) -> PartResult {
        let all = PartLookup { part: self, layout: self.layout(), remote };
        validate::validate_part(self.csr(), self.tree(), root, self.vertices(), &all)
            .map(|c| (c.edges_in_component, c.equal_distance))
            .map_err(|e| e.to_string())
    }
}

struct PartLookup<'a> {
    part: &'a Part,
    layout: super::Layout,
    remote: Remote,
}

impl Lookup for PartLookup<'_> {
    fn get(&self, v: u32) -> (f64, u64) {
        let own = self.part.range();
        if own.contains(&v) {
            let i = (v - own.start) as usize;
            let t = self.part.tree();
            return (t.dist[i], t.parent[i]);
        }
        if u64::from(v) < self.layout.vertices {
            if let Some((lo, t)) = &self.remote.dense[self.layout.owner(v)] {
                let i = (v - lo) as usize;
                return (t.dist[i], t.parent[i]);
            }
        }
        // Everything the part refers to was fetched; anything else is
        // answered as unreached, which the rules then report.
        self.remote.sparse.get(&v).copied().unwrap_or((f64::INFINITY, NO_PARENT))
    }
}

/// Looks vertices up wherever they live, one delegation each (for the
/// rare parent chains).
pub struct RemoteLookup<'a> {
    /// The parts.
    pub parts: &'a [Trust<Part>],
    /// Their layout.
    pub layout: super::Layout,
}

impl Lookup for RemoteLookup<'_> {
    fn get(&self, v: u32) -> (f64, u64) {
        if u64::from(v) >= self.layout.vertices {
            return (f64::INFINITY, NO_PARENT);
        }
        self.parts[self.layout.owner(v)].apply_with(|p, v: u32| p.lookup(&[v])[0], v)
    }
}

/// Validates the search's result everywhere; returns the number of input
/// edges in the root's component (what TEPS divides).
pub fn check(parts: &[Trust<Part>], layout: super::Layout, root: u32) -> Result<u64, String> {
    let mut edges = 0;
    let mut chains = Vec::new();
    let mut errors = Vec::new();
    for (t, r) in on_all(check_step, root).into_iter().enumerate() {
        match r {
            Ok((e, c)) => {
                edges += e;
                chains.extend(c);
            }
            Err(e) => errors.push(format!("part {t}: {e}")),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    validate::check_chains(&chains, root, layout.vertices, &RemoteLookup { parts, layout })
        .map_err(|e| e.to_string())?;
    Ok(edges)
}

/// One thread's result: (first vertex, its part's tree).
pub fn gather_step((): ()) -> (u32, Tree) {
    let parts = peers::get();
    let t = gossamer::current_thread().expect("a step runs on a worker");
    parts[t].apply(|p| (p.range().start, p.tree().clone()))
}

/// The whole result in one `Tree`.
pub fn gather(vertices: u64) -> Tree {
    let mut all = Tree::unreached(vertices as usize);
    for (lo, t) in on_all(gather_step, ()) {
        let lo = lo as usize;
        all.dist[lo..lo + t.dist.len()].copy_from_slice(&t.dist);
        all.parent[lo..lo + t.parent.len()].copy_from_slice(&t.parent);
    }
    all
}
