//! One thread's share of the graph and of a search: the property each
//! trustee holds. Everything here is plain sequential code run inside
//! delegated closures on the part's trustee; the delegation around it lives
//! in [`super::search`], [`super::build`] and [`super::check`].

use serde::{Deserialize, Serialize};

use super::layout::Layout;
use super::sent::Sent;
use crate::graph::{Arc, Csr};
use crate::{Tree, NO_PARENT};

/// A relaxation sent to the owner of `v`: "`v` can be reached at distance
/// `d` through `p`".
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Relax {
    /// The head (global id).
    pub v: u32,
    /// Candidate distance.
    pub d: f64,
    /// The tail that offers it (global id).
    pub p: u32,
}

/// Which arcs of the frontier a step relaxes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arcs {
    /// Arcs lighter than delta, of the vertices now in the current bucket.
    Light,
    /// The other arcs, of every vertex settled in the current bucket.
    Heavy,
}

/// The vertices `lo..hi` of the graph: their arcs, and the state of the
/// search running over them.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Part {
    layout: Layout,
    index: usize,
    /// Arcs received during construction, before [`Part::build`], in the
    /// batches they came in (moved, not copied, within a process).
    #[serde(skip)]
    incoming: Vec<Vec<Arc>>,
    #[serde(skip)]
    csr: Csr,
    #[serde(skip)]
    search: Search,
}

#[derive(Debug, Default)]
struct Search {
    delta: f32,
    /// Distances and parents of our vertices (indexed from `lo`).
    tree: Tree,
    /// Local indices by bucket number; may hold stale entries (a vertex
    /// whose distance has since moved to a lower bucket), skipped when
    /// taken.
    buckets: Buckets,
    /// Vertices settled in the current bucket (for the heavy arcs).
    settled: Vec<u32>,
    in_settled: Vec<bool>,
    /// Round stamps, so a vertex enters a frontier once per round.
    stamp: Vec<u32>,
    round: u32,
    /// The frontier being expanded and how far.
    frontier: Vec<u32>,
    cursor: usize,
    arcs: Option<Arcs>,
    /// Outgoing relaxations per destination part, and full batches.
    out: Vec<Vec<Relax>>,
    /// Lowest distance of the relaxations sent since [`Part::begin`].
    sent_min: f64,
    /// What went to each remote vertex in this search: a relaxation no
    /// better than one sent is dropped.
    sent: Sent,
    /// Relaxations so dropped since [`Part::begin`].
    dropped: u64,
    /// Light arcs of each vertex for `light_delta` (a prefix of its
    /// adjacency, found once per delta instead of at every expansion).
    light: Vec<u32>,
    light_delta: f32,
}

/// Buckets of local vertex indices, by number: a vector indexed by bucket
/// (there are about as many as the longest distance over delta), with the
/// lowest possibly non-empty one remembered.
#[derive(Debug, Default)]
struct Buckets {
    lists: Vec<Vec<u32>>,
    /// No bucket below this one has entries (lowered by pushes; buckets
    /// are taken in increasing order, so raising it is left to `min`).
    low: usize,
    /// Entries in all lists.
    len: usize,
}

/// The most buckets a search may use (about `longest distance / delta`).
const MAX_BUCKETS: u64 = 1 << 26;

impl Buckets {
    fn clear(&mut self) {
        for l in &mut self.lists {
            l.clear();
        }
        self.low = 0;
        self.len = 0;
    }

    #[inline]
    fn push(&mut self, b: u64, i: u32) {
        assert!(b < MAX_BUCKETS, "bucket {b}: delta is too small for these distances");
        let b = b as usize;
        if b >= self.lists.len() {
            self.lists.resize_with(b + 1, Vec::new);
        }
        self.lists[b].push(i);
        self.low = self.low.min(b);
        self.len += 1;
    }

    fn take(&mut self, b: u64) -> Vec<u32> {
        match self.lists.get_mut(b as usize) {
            Some(l) => {
                self.len -= l.len();
                std::mem::take(l)
            }
            None => Vec::new(),
        }
    }

    fn min(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        self.lists[self.low..].iter().position(|l| !l.is_empty()).map(|k| (self.low + k) as u64)
    }
}

/// Bucket of a distance (the same function everywhere, so that a vertex's
/// bucket never depends on who computed it).
#[inline]
pub fn bucket(d: f64, delta: f32) -> u64 {
    (d / f64::from(delta)) as u64
}

impl Part {
    /// An empty part number `index` of `layout`.
    pub fn new(layout: Layout, index: usize) -> Self {
        Part { layout, index, ..Default::default() }
    }

    /// Its vertex range.
    pub fn range(&self) -> std::ops::Range<u32> {
        self.layout.range(self.index)
    }

    /// Vertices of the whole graph.
    pub fn vertices(&self) -> u64 {
        self.layout.vertices
    }

    /// The part's CSR (empty before [`Part::build`]).
    pub fn csr(&self) -> &Csr {
        &self.csr
    }

    /// Takes arcs whose tails are ours (construction).
    ///
    /// # Panics
    /// If an arc is not ours or names no vertex.
    pub fn receive(&mut self, arcs: Vec<Arc>) {
        let (r, n) = (self.range(), self.layout.vertices);
        if let Some(a) = arcs.iter().find(|a| !r.contains(&a.from) || u64::from(a.to) >= n) {
            panic!("gossamer-sssp: part {} ({r:?}) was sent the arc {a:?}", self.index);
        }
        self.incoming.push(arcs);
    }

    /// Builds the CSR from the arcs received (sequentially: every thread
    /// of the program builds its own part at the same time). Returns the
    /// number of arcs and the bytes the part holds.
    pub fn build(&mut self) -> (u64, u64) {
        let r = self.range();
        let incoming = std::mem::take(&mut self.incoming);
        self.csr = Csr::from_arc_batches(r.start, r.end, incoming);
        let n = self.csr.offsets.len().saturating_sub(1);
        self.search = Search {
            tree: Tree::unreached(n),
            in_settled: vec![false; n],
            stamp: vec![0; n],
            out: vec![Vec::new(); self.layout.parts],
            sent: Sent::new(self.layout.vertices),
            ..Default::default()
        };
        (self.csr.arcs() as u64, self.bytes())
    }

    /// Bytes held by the graph and the search state.
    pub fn bytes(&self) -> u64 {
        let c = &self.csr;
        let n = c.offsets.len() as u64;
        (c.offsets.len() * 8 + c.heads.len() * 4 + c.weights.len() * 4) as u64 + n * (8 + 8 + 1 + 4)
    }

    /// Degree of `v` (ours).
    pub fn degree(&self, v: u32) -> u64 {
        self.csr.degree(v) as u64
    }

    /// Starts a search from `root` with bucket width `delta`: forgets the
    /// last one. Returns the lowest non-empty bucket.
    pub fn init(&mut self, root: u32, delta: f32) -> Option<u64> {
        let mine = self.range().contains(&root);
        if self.search.light_delta != delta || self.search.light.is_empty() {
            let c = &self.csr;
            self.search.light = c.range().map(|v| c.light(v, delta) as u32).collect();
            self.search.light_delta = delta;
        }
        let s = &mut self.search;
        s.delta = delta;
        s.tree.dist.fill(f64::INFINITY);
        s.tree.parent.fill(NO_PARENT);
        s.buckets.clear();
        s.settled.clear();
        s.in_settled.fill(false);
        s.frontier.clear();
        s.sent.clear();
        if mine {
            let i = (root - self.csr.lo) as usize;
            s.tree.dist[i] = 0.0;
            s.tree.parent[i] = u64::from(root);
            s.buckets.push(0, i as u32);
        }
        self.min_bucket()
    }

    /// The lowest bucket that has entries (possibly only stale ones).
    pub fn min_bucket(&self) -> Option<u64> {
        self.search.buckets.min()
    }

    /// A lower bound of the lowest non-empty bucket of the whole program
    /// once every part's step has ended: ours, or the lowest bucket of what
    /// we sent since [`Part::begin`] (which the receivers may not have had
    /// when they reported theirs). Stale at worst, which costs an empty
    /// round, never a missed bucket.
    pub fn next_bucket(&self) -> Option<u64> {
        let sent = self.search.sent_min;
        let sent = (sent < f64::INFINITY).then(|| bucket(sent, self.search.delta));
        self.min_bucket().into_iter().chain(sent).min()
    }

    /// Relaxations of remote vertices not sent since [`Part::begin`]
    /// because one no worse had gone earlier in the search (see
    /// [`super::sent`]).
    pub fn dropped(&self) -> u64 {
        self.search.dropped
    }

    /// Applies relaxations of our vertices.
    ///
    /// # Panics
    /// If a relaxation is not for one of our vertices.
    pub fn relax_all(&mut self, batch: &[Relax]) {
        let range = self.csr.range();
        if let Some(r) = batch.iter().find(|r| !range.contains(&r.v)) {
            panic!("gossamer-sssp: part {} ({range:?}) was sent the relaxation {r:?}", self.index);
        }
        for r in batch {
            let i = (r.v - self.csr.lo) as usize;
            self.relax_local(i, r.d, r.p);
        }
    }

    #[inline]
    fn relax_local(&mut self, i: usize, d: f64, p: u32) {
        let s = &mut self.search;
        if d < s.tree.dist[i] {
            s.tree.dist[i] = d;
            s.tree.parent[i] = u64::from(p);
            s.buckets.push(bucket(d, s.delta), i as u32);
        }
    }

    /// Begins a step on bucket `b`: the light arcs of the vertices now in
    /// it (which leave it, and join the settled set), or the heavy arcs of
    /// the settled set. Returns the size of the frontier.
    pub fn begin(&mut self, b: u64, arcs: Arcs) -> u64 {
        let s = &mut self.search;
        s.cursor = 0;
        s.arcs = Some(arcs);
        s.sent_min = f64::INFINITY;
        s.dropped = 0;
        match arcs {
            Arcs::Light => {
                s.round = s.round.wrapping_add(1).max(1);
                let mut taken = s.buckets.take(b);
                // In vertex order: the part's arrays are then read in one
                // sweep instead of at random.
                taken.sort_unstable();
                s.frontier.clear();
                for i in taken {
                    let iu = i as usize;
                    if bucket(s.tree.dist[iu], s.delta) == b && s.stamp[iu] != s.round {
                        s.stamp[iu] = s.round;
                        s.frontier.push(i);
                        if !s.in_settled[iu] {
                            s.in_settled[iu] = true;
                            s.settled.push(i);
                        }
                    }
                }
            }
            Arcs::Heavy => {
                s.frontier = std::mem::take(&mut s.settled);
                s.frontier.sort_unstable();
                for &i in &s.frontier {
                    s.in_settled[i as usize] = false;
                }
            }
        }
        s.frontier.len() as u64
    }

    /// Relaxes the arcs of the frontier, at most about `budget` of them:
    /// our own heads at once, the others into batches of at most `batch`
    /// relaxations per destination part. Returns the batches to send and
    /// whether the frontier is done (then every partial batch is included).
    pub fn expand(&mut self, budget: usize, batch: usize) -> (Vec<(usize, Vec<Relax>)>, bool) {
        let mut ready = Vec::new();
        let mut spent = 0;
        let lo = self.csr.lo;
        let hi = self.csr.hi;
        let arcs = self.search.arcs.expect("expand before begin");
        while self.search.cursor < self.search.frontier.len() && spent < budget {
            let i = self.search.frontier[self.search.cursor] as usize;
            self.search.cursor += 1;
            let v = lo + i as u32;
            let du = self.search.tree.dist[i];
            let (a, b) = (self.csr.offsets[i] as usize, self.csr.offsets[i + 1] as usize);
            let split = a + self.search.light[i] as usize;
            let (a, b) = match arcs {
                Arcs::Light => (a, split),
                Arcs::Heavy => (split, b),
            };
            spent += b - a + 1;
            for k in a..b {
                let (h, w) = (self.csr.heads[k], self.csr.weights[k]);
                let d = du + f64::from(w);
                if (lo..hi).contains(&h) {
                    self.relax_local((h - lo) as usize, d, v);
                } else if !self.search.sent.offer(h, d) {
                    self.search.dropped += 1;
                } else {
                    let t = self.layout.owner(h);
                    self.search.sent_min = self.search.sent_min.min(d);
                    let out = &mut self.search.out[t];
                    out.push(Relax { v: h, d, p: v });
                    if out.len() >= batch {
                        ready.push((t, std::mem::take(out)));
                    }
                }
            }
        }
        let done = self.search.cursor >= self.search.frontier.len();
        if done {
            for (t, out) in self.search.out.iter_mut().enumerate() {
                if !out.is_empty() {
                    ready.push((t, std::mem::take(out)));
                }
            }
            self.search.frontier.clear();
            self.search.cursor = 0;
        }
        (ready, done)
    }

    /// Lengthens the distance of our vertex `v` by `by` (to check that
    /// validation catches a wrong result).
    pub fn perturb(&mut self, v: u32, by: f64) {
        let i = (v - self.csr.lo) as usize;
        self.search.tree.dist[i] += by;
    }

    /// Distance and parent of our vertices `ids`.
    pub fn lookup(&self, ids: &[u32]) -> Vec<(f64, u64)> {
        ids.iter()
            .map(|&v| {
                let i = (v - self.csr.lo) as usize;
                (self.search.tree.dist[i], self.search.tree.parent[i])
            })
            .collect()
    }

    /// The part of the search's result: distances and parents of our
    /// vertices.
    pub fn tree(&self) -> &Tree {
        &self.search.tree
    }

    /// Vertices of other parts that validating our result needs (heads of
    /// our arcs and our vertices' parents), deduplicated and in order, by
    /// owner: marked in a bitmap over the graph, then read out part by
    /// part (no sort of the arcs' heads).
    pub fn remote_needs(&self) -> Vec<Vec<u32>> {
        let n = self.layout.vertices;
        let r = self.range();
        let mut marks = vec![0u64; n.div_ceil(64) as usize];
        let mut mark = |v: u32| marks[(v / 64) as usize] |= 1 << (v % 64);
        for &h in &self.csr.heads {
            if !r.contains(&h) {
                mark(h);
            }
        }
        for &p in &self.search.tree.parent {
            if p < n && !r.contains(&(p as u32)) {
                mark(p as u32);
            }
        }
        (0..self.layout.parts)
            .map(|o| {
                let range = self.layout.range(o);
                let mut ids = Vec::new();
                if o == self.index || range.is_empty() {
                    return ids;
                }
                let (first, last) = (range.start / 64, (range.end - 1) / 64);
                for w in first..=last {
                    let mut bits = marks[w as usize];
                    while bits != 0 {
                        let v = w * 64 + bits.trailing_zeros();
                        bits &= bits - 1;
                        if range.contains(&v) {
                            ids.push(v);
                        }
                    }
                }
                ids
            })
            .collect()
    }

    /// The layout of the parts.
    pub fn layout(&self) -> Layout {
        self.layout
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Edge;

    fn part_of(edges: &[Edge], layout: Layout, index: usize) -> Part {
        let mut p = Part::new(layout, index);
        let r = layout.range(index);
        let mut arcs = Vec::new();
        for e in edges {
            if r.contains(&e.u) {
                arcs.push(Arc { from: e.u, to: e.v, w: e.w });
            }
            if r.contains(&e.v) {
                arcs.push(Arc { from: e.v, to: e.u, w: e.w });
            }
        }
        p.receive(arcs);
        p.build();
        p
    }

    #[test]
    fn light_then_heavy_within_one_part() {
        let edges = [Edge { u: 0, v: 1, w: 0.05 }, Edge { u: 1, v: 2, w: 0.5 }, Edge { u: 0, v: 3, w: 0.01 }];
        let layout = Layout::new(4, 1);
        let mut p = part_of(&edges, layout, 0);
        assert_eq!(p.init(0, 0.1), Some(0));
        assert_eq!(p.begin(0, Arcs::Light), 1);
        let (out, done) = p.expand(100, 16);
        assert!(done && out.is_empty());
        // 1 and 3 joined bucket 0; the next round takes them.
        assert_eq!(p.begin(0, Arcs::Light), 2);
        p.expand(100, 16);
        assert_eq!(p.begin(0, Arcs::Light), 0);
        assert_eq!(p.begin(0, Arcs::Heavy), 3);
        p.expand(100, 16);
        let t = p.tree().clone();
        assert_eq!(t.parent, vec![0, 0, 1, 0]);
        assert_eq!(t.dist[2], 0.05f32 as f64 + 0.5f32 as f64);
        assert_eq!(p.min_bucket(), Some(5));
    }

    #[test]
    fn remote_heads_leave_in_batches() {
        let edges: Vec<Edge> = (1..8).map(|v| Edge { u: 0, v, w: 0.01 * v as f32 }).collect();
        let layout = Layout::new(8, 2);
        let mut p = part_of(&edges, layout, 0);
        p.init(0, 1.0);
        p.begin(0, Arcs::Light);
        let (out, done) = p.expand(1000, 2);
        assert!(done);
        let sizes: Vec<(usize, usize)> = out.iter().map(|(t, b)| (*t, b.len())).collect();
        // Heads 4..8 belong to part 1: two full batches of two.
        assert_eq!(sizes, vec![(1, 2), (1, 2)]);
        let mut q = part_of(&edges, layout, 1);
        q.init(0, 1.0);
        for (_, b) in &out {
            q.relax_all(b);
        }
        assert_eq!(q.tree().parent, vec![0; 4]);
        assert_eq!(q.min_bucket(), Some(0));
        assert_eq!(p.remote_needs()[1], vec![4, 5, 6, 7]);
    }

    #[test]
    fn a_remote_head_offered_no_better_is_not_sent_again() {
        // 0 and 1 (part 0) both reach 3 (part 1): through 0 at 0.5, then
        // through 1 at 0.05 + 0.5, which is no better and stays home; a
        // new search forgets.
        let edges = [Edge { u: 0, v: 3, w: 0.5 }, Edge { u: 0, v: 1, w: 0.05 }, Edge { u: 1, v: 3, w: 0.5 }];
        let layout = Layout::new(4, 2);
        let mut p = part_of(&edges, layout, 0);
        let relaxations = |p: &mut Part| -> Vec<(u32, f64)> {
            let (out, done) = p.expand(1000, 16);
            assert!(done);
            out.into_iter()
                .flat_map(|(t, b)| b.into_iter().inspect(move |_| assert_eq!(t, 1)))
                .map(|r| (r.v, r.d))
                .collect()
        };
        p.init(0, 1.0);
        assert_eq!(p.begin(0, Arcs::Light), 1);
        assert_eq!(relaxations(&mut p), vec![(3, 0.5)]);
        assert_eq!(p.dropped(), 0);
        assert_eq!(p.begin(0, Arcs::Light), 1, "vertex 1 joined bucket 0");
        assert_eq!(relaxations(&mut p), vec![]);
        assert_eq!(p.dropped(), 1);
        // A new search from 1: 3 at 0.5 goes again.
        p.init(1, 1.0);
        assert_eq!(p.begin(0, Arcs::Light), 1);
        assert_eq!(relaxations(&mut p), vec![(3, 0.5)]);
        assert_eq!(p.dropped(), 0);
    }
}
