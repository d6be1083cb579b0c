//! The Graph500 SSSP validation rules, on a whole graph ([`validate`]) or
//! one part of it at a time ([`validate_part`] and [`check_chains`]), as a
//! distributed program validates: each thread checks the arcs of its own
//! vertices, reading the distance and parent of other vertices through a
//! [`Lookup`].
//!
//! The rules (after Graph500's `validate.c` and `validate.m`, made exact:
//! every implementation relaxes an arc `(u, v, w)` as
//! `dist[u] + f64::from(w)`, so no tolerance is needed):
//! 1. the root has distance 0 and is its own parent;
//! 2. a vertex has a parent if and only if its distance is finite;
//!    distances are neither negative nor NaN; parents are vertex ids;
//! 3. every reached vertex `v` but the root is joined to its parent `p` by
//!    an arc of weight `w` with `dist[p] + f64::from(w) == dist[v]` (the
//!    tree edge exists and its weight matches);
//! 4. for every arc `u -> v` of weight `w`: if `u` is reached, so is `v`,
//!    and `dist[v] <= dist[u] + f64::from(w)` (the triangle rule);
//! 5. the parents form a tree rooted at the root. By rule 3 a parent is
//!    never farther than its child, so a cycle of parents can only join
//!    vertices at one distance (by arcs of weight 0): from each vertex at
//!    its parent's distance, the chain of parents must reach the root or a
//!    strictly closer vertex within as many steps as there are vertices.
//!
//! Rules 1 to 4 only read the vertices of an arc; rule 5 follows chains,
//! which in Graph500 graphs (weights uniform in `[0, 1)`) are almost never
//! longer than one step.

use std::collections::HashSet;

use crate::graph::Csr;
use crate::{Tree, NO_PARENT};

/// A broken validation rule, naming the vertices and values concerned.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ValidationError {
    /// The root's distance is not 0.
    #[error("the root {root} has distance {dist}, not 0")]
    RootDistance {
        /// The root.
        root: u32,
        /// Its distance.
        dist: f64,
    },
    /// The root is not its own parent.
    #[error("the root {root} has parent {parent}, not itself")]
    RootParent {
        /// The root.
        root: u32,
        /// Its parent.
        parent: u64,
    },
    /// A distance is negative or NaN.
    #[error("vertex {vertex} has distance {dist}, negative or NaN")]
    InvalidDistance {
        /// The vertex.
        vertex: u32,
        /// Its distance.
        dist: f64,
    },
    /// A parent is not a vertex id (nor [`NO_PARENT`]).
    #[error("vertex {vertex} has parent {parent}, not a vertex of a graph of {vertices} vertices")]
    ParentOutOfRange {
        /// The vertex.
        vertex: u32,
        /// Its parent.
        parent: u64,
        /// The number of vertices of the graph.
        vertices: u64,
    },
    /// A vertex has a finite distance but no parent.
    #[error("vertex {vertex} has distance {dist} but no parent")]
    DistanceWithoutParent {
        /// The vertex.
        vertex: u32,
        /// Its distance.
        dist: f64,
    },
    /// A vertex has a parent but an infinite distance.
    #[error("vertex {vertex} has parent {parent} but infinite distance")]
    ParentWithoutDistance {
        /// The vertex.
        vertex: u32,
        /// Its parent.
        parent: u64,
    },
    /// A vertex's parent is not one of its neighbours.
    #[error("vertex {vertex} has parent {parent}, which is not adjacent to it")]
    ParentNotAdjacent {
        /// The vertex.
        vertex: u32,
        /// Its parent.
        parent: u64,
    },
    /// No arc between a vertex and its parent has the weight that makes up
    /// the difference of their distances.
    #[error(
        "vertex {vertex} at distance {dist} has parent {parent} at distance {parent_dist}, \
         but no arc between them of a weight that adds up (lightest {lightest})"
    )]
    ParentWeightMismatch {
        /// The vertex.
        vertex: u32,
        /// Its distance.
        dist: f64,
        /// Its parent.
        parent: u32,
        /// The parent's distance.
        parent_dist: f64,
        /// The lightest arc between them.
        lightest: f32,
    },
    /// An arc joins a reached vertex to an unreached one.
    #[error("arc {from} -> {to} of weight {w} joins a reached vertex (distance {from_dist}) to an unreached one")]
    ReachedToUnreached {
        /// The reached tail.
        from: u32,
        /// The unreached head.
        to: u32,
        /// The arc's weight.
        w: f32,
        /// The tail's distance.
        from_dist: f64,
    },
    /// An arc would shorten the path to its head.
    #[error("arc {from} -> {to} of weight {w} breaks the triangle rule: {from_dist} + {w} < {to_dist}")]
    Triangle {
        /// The tail.
        from: u32,
        /// The head.
        to: u32,
        /// The arc's weight.
        w: f32,
        /// The tail's distance.
        from_dist: f64,
        /// The head's distance, greater than `from_dist + w`.
        to_dist: f64,
    },
    /// The chain of parents from a vertex does not reach the root (nor a
    /// strictly closer vertex) within as many steps as there are vertices,
    /// or comes back to a vertex.
    #[error("the parents from vertex {vertex} make a cycle (through vertex {at}, all at distance {dist})")]
    ParentCycle {
        /// Where the chain started.
        vertex: u32,
        /// A vertex on the cycle (or where the chain was given up).
        at: u32,
        /// The distance of the chain's vertices.
        dist: f64,
    },
}

/// The distance and parent of any vertex of the graph, for validating one
/// part of it: local reads, or remote ones in a distributed program.
pub trait Lookup {
    /// `(dist, parent)` of vertex `v`.
    fn get(&self, v: u32) -> (f64, u64);
}

/// A whole graph's tree, indexed by vertex.
impl Lookup for Tree {
    #[inline]
    fn get(&self, v: u32) -> (f64, u64) {
        (self.dist[v as usize], self.parent[v as usize])
    }
}

/// Any function from a vertex to its `(dist, parent)`.
impl<F: Fn(u32) -> (f64, u64)> Lookup for F {
    #[inline]
    fn get(&self, v: u32) -> (f64, u64) {
        self(v)
    }
}

/// What [`validate_part`] found in a part that keeps the rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartCheck {
    /// The part's share of the input edges in the root's component (see
    /// [`validate_part`]); the parts' shares add up to the whole count.
    pub edges_in_component: u64,
    /// The part's reached vertices (not the root) at the same distance as
    /// their parent, whose chains of parents [`check_chains`] must follow.
    pub equal_distance: Vec<u32>,
}

/// Checks rules 1 to 4 (see the [module](self)) for the vertices of `part`
/// and their arcs, and counts the part's share of the input edges in the
/// root's component.
///
/// `local` holds the part's distances and parents (indexed by
/// `v - part.lo`), `vertices` is the number of vertices of the whole graph
/// and `all` gives the distance and parent of any vertex (the arcs' heads
/// may be in other parts). The errors are looked for in the order of the
/// rules (the root, then every vertex's values, then the arcs vertex by
/// vertex), and the first found is returned.
///
/// The edge count is Graph500's *m* of TEPS: the input edges (undirected
/// tuples `(u, v, w)`, multiple edges included) whose ends are reached,
/// each once, with a self-loop counting once too, as the specification
/// says (the reference code leaves self-loops out of its CSR, and so of
/// its count). Each edge `{u, v}` with `u < v` is two arcs, counted at the
/// arc `u -> v`, in the part of `u`; a self-loop is two arcs of the same
/// vertex, counted as one.
///
/// # Panics
/// If `local` does not have one entry per vertex of the part. Arc heads
/// must be vertices of the graph (below `vertices`).
pub fn validate_part(
    part: &Csr,
    local: &Tree,
    root: u32,
    vertices: u64,
    all: &impl Lookup,
) -> Result<PartCheck, ValidationError> {
    let n = (part.hi - part.lo) as usize;
    assert!(
        local.dist.len() == n && local.parent.len() == n,
        "a part of {n} vertices with {} distances and {} parents",
        local.dist.len(),
        local.parent.len()
    );
    let at = |v: u32| {
        let i = (v - part.lo) as usize;
        (local.dist[i], local.parent[i])
    };
    if part.range().contains(&root) {
        let (dist, parent) = at(root);
        if dist != 0.0 {
            return Err(ValidationError::RootDistance { root, dist });
        }
        if parent != u64::from(root) {
            return Err(ValidationError::RootParent { root, parent });
        }
    }
    for v in part.range() {
        let (dist, parent) = at(v);
        check_vertex(v, dist, parent, vertices)?;
    }
    let mut check = PartCheck::default();
    let mut self_loop_arcs = 0u64;
    for v in part.range() {
        let (dist, parent) = at(v);
        let (heads, weights) = part.adjacency(v);
        if dist == f64::INFINITY {
            // Arcs from an unreached vertex: the other direction is checked
            // at the head.
            continue;
        }
        // Rule 3: an arc to the parent whose weight makes up the difference
        // (the parent's distance is read with the arcs' heads).
        let parent = (v != root).then_some(parent as u32);
        let (mut parent_dist, mut matches, mut lightest) = (None, false, f32::INFINITY);
        for (&u, &w) in heads.iter().zip(weights) {
            let head_dist = if part.range().contains(&u) { at(u).0 } else { all.get(u).0 };
            if head_dist == f64::INFINITY {
                return Err(ValidationError::ReachedToUnreached { from: v, to: u, w, from_dist: dist });
            }
            if head_dist > dist + f64::from(w) {
                return Err(ValidationError::Triangle { from: v, to: u, w, from_dist: dist, to_dist: head_dist });
            }
            if Some(u) == parent {
                parent_dist = Some(head_dist);
                lightest = lightest.min(w);
                matches |= head_dist + f64::from(w) == dist;
            }
            match u.cmp(&v) {
                std::cmp::Ordering::Greater => check.edges_in_component += 1,
                std::cmp::Ordering::Equal => self_loop_arcs += 1,
                std::cmp::Ordering::Less => {}
            }
        }
        if let Some(p) = parent {
            let Some(parent_dist) = parent_dist else {
                return Err(ValidationError::ParentNotAdjacent { vertex: v, parent: u64::from(p) });
            };
            if !matches {
                return Err(ValidationError::ParentWeightMismatch {
                    vertex: v,
                    dist,
                    parent: p,
                    parent_dist,
                    lightest,
                });
            }
            if parent_dist == dist {
                check.equal_distance.push(v);
            }
        }
    }
    check.edges_in_component += self_loop_arcs / 2;
    Ok(check)
}

/// Rule 2 for one vertex.
fn check_vertex(vertex: u32, dist: f64, parent: u64, vertices: u64) -> Result<(), ValidationError> {
    if dist.is_nan() || dist < 0.0 {
        return Err(ValidationError::InvalidDistance { vertex, dist });
    }
    if parent != NO_PARENT && parent >= vertices {
        return Err(ValidationError::ParentOutOfRange { vertex, parent, vertices });
    }
    match (dist.is_finite(), parent != NO_PARENT) {
        (true, false) => Err(ValidationError::DistanceWithoutParent { vertex, dist }),
        (false, true) => Err(ValidationError::ParentWithoutDistance { vertex, parent }),
        _ => Ok(()),
    }
}

/// Checks rule 5 (see the [module](self)) from the vertices `start` (the
/// [`PartCheck::equal_distance`] of the parts): the chain of parents from
/// each must reach the root or a vertex strictly closer to it, without
/// coming back to a vertex and within `vertices` steps (the number of
/// vertices of the graph). Each vertex of a chain is looked up once, and
/// chains already followed to their end are not followed again (lookups
/// may be remote).
///
/// The vertices met are checked against rule 2 on the way, so that a chain
/// ends even on values that [`validate_part`] would reject.
pub fn check_chains(start: &[u32], root: u32, vertices: u64, all: &impl Lookup) -> Result<(), ValidationError> {
    let mut good: HashSet<u32> = HashSet::new();
    let mut chain: Vec<u32> = Vec::new();
    let mut on_chain: HashSet<u32> = HashSet::new();
    for &s in start {
        if s == root || good.contains(&s) {
            continue;
        }
        chain.clear();
        on_chain.clear();
        let (mut v, mut here) = (s, all.get(s));
        loop {
            if v == root || good.contains(&v) {
                break;
            }
            let (dist, parent) = here;
            if !on_chain.insert(v) || chain.len() as u64 >= vertices {
                return Err(ValidationError::ParentCycle { vertex: s, at: v, dist });
            }
            chain.push(v);
            check_vertex(v, dist, parent, vertices)?;
            if parent == NO_PARENT {
                break; // Unreached: the chain cannot go on (rule 3 is broken, elsewhere).
            }
            let p = parent as u32;
            let there = all.get(p);
            if there.0 != dist {
                break; // Strictly closer (or, breaking rule 3, farther).
            }
            (v, here) = (p, there);
        }
        good.extend(chain.iter().copied());
    }
    Ok(())
}

/// Checks every rule for a whole graph `g` (`g.lo == 0`) and the `tree`
/// of a search from `root`, and returns the number of input edges in the
/// root's component (Graph500's *m*, see [`validate_part`]).
///
/// # Panics
/// If `g` is not a whole graph, `root` is not one of its vertices, or
/// `tree` does not have one entry per vertex.
pub fn validate(g: &Csr, root: u32, tree: &Tree) -> Result<u64, ValidationError> {
    assert_eq!(g.lo, 0, "validate needs the whole graph (its CSR starts at vertex {})", g.lo);
    assert!(root < g.hi, "root {root} is not a vertex of a graph of {} vertices", g.hi);
    let vertices = u64::from(g.hi);
    let check = validate_part(g, tree, root, vertices, tree)?;
    check_chains(&check.equal_distance, root, vertices, tree)?;
    Ok(check.edges_in_component)
}
