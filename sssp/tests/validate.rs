//! The Graph500 SSSP validation rules: a valid result passes, and each
//! rule broken by hand gives its own error; validating by parts gives what
//! validating the whole graph gives.

use gossamer_sssp::baseline::dijkstra::dijkstra;
use gossamer_sssp::baseline::rayon_delta::delta_stepping;
use gossamer_sssp::graph::{Csr, Edge};
use gossamer_sssp::validate::{check_chains, validate, validate_part, Lookup, ValidationError};
use gossamer_sssp::{Tree, NO_PARENT};

/// A tiny deterministic generator (splitmix64).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u32) -> u32 {
        (((self.next() >> 32) * u64::from(n)) >> 32) as u32
    }
}

/// A graph, a root and a valid result.
struct Fixture {
    n: u32,
    edges: Vec<Edge>,
    g: Csr,
    root: u32,
    tree: Tree,
}

impl Fixture {
    /// Random edges of weights in `(0, 1]` over 64 vertices (some left
    /// out of the root's component), plus a self-loop and a duplicate
    /// edge at the root.
    fn random() -> Fixture {
        let n = 64;
        let mut r = SplitMix(42);
        let mut edges: Vec<Edge> = (0..150)
            .map(|_| Edge { u: r.below(n - 8), v: r.below(n - 8), w: ((r.next() >> 40) + 1) as f32 / (1 << 24) as f32 })
            .collect();
        edges.push(Edge { u: n - 3, v: n - 2, w: 0.5 }); // Another component.
        edges.push(Edge { u: 0, v: 0, w: 0.5 });
        edges.push(Edge { u: 0, v: 1, w: 0.75 });
        edges.push(Edge { u: 0, v: 1, w: 0.75 });
        Fixture::new(n, edges, 0)
    }

    /// 1, 2 and 3 at distance 0.5 from 0, joined by arcs of weight 0; 4 at
    /// 0.75, with a self-loop of weight 0; 6 and 7 out of reach.
    fn zero_weights() -> Fixture {
        let e = |u, v, w| Edge { u, v, w };
        let edges = vec![
            e(0, 1, 0.5),
            e(1, 2, 0.0),
            e(2, 3, 0.0),
            e(3, 1, 0.0),
            e(3, 4, 0.25),
            e(0, 5, 0.75),
            e(5, 4, 0.125),
            e(4, 4, 0.0),
            e(6, 7, 0.5),
        ];
        Fixture::new(8, edges, 0)
    }

    fn new(n: u32, edges: Vec<Edge>, root: u32) -> Fixture {
        let g = Csr::from_edges(0, n, &edges);
        let tree = dijkstra(&g, root);
        Fixture { n, edges, g, root, tree }
    }

    fn check(&self, tree: &Tree) -> Result<u64, ValidationError> {
        validate(&self.g, self.root, tree)
    }

    /// The input edges with both ends reached.
    fn edges_reached(&self) -> u64 {
        self.edges.iter().filter(|e| self.tree.dist[e.u as usize].is_finite()).count() as u64
    }

    /// Reached vertices other than the root.
    fn reached(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.n).filter(|&v| v != self.root && self.tree.dist[v as usize].is_finite())
    }

    /// Reached vertices other than the root that are no one's parent.
    fn leaves(&self) -> impl Iterator<Item = u32> + '_ {
        self.reached().filter(|&v| (0..self.n).all(|u| u == v || self.tree.parent[u as usize] != u64::from(v)))
    }

    /// The arcs between `u` and `v`, by weight.
    fn arcs(&self, u: u32, v: u32) -> Vec<f32> {
        let (heads, weights) = self.g.adjacency(u);
        heads.iter().zip(weights).filter(|&(&h, _)| h == v).map(|(_, &w)| w).collect()
    }

    fn corrupt(&self, f: impl FnOnce(&mut Tree)) -> Result<u64, ValidationError> {
        let mut tree = self.tree.clone();
        f(&mut tree);
        self.check(&tree)
    }
}

#[test]
fn valid_results_pass_and_count_the_edges_in_the_component() {
    let f = Fixture::random();
    assert!(f.tree.reached() > 30 && f.tree.reached() < 64, "{} reached", f.tree.reached());
    assert_eq!(f.check(&f.tree), Ok(f.edges_reached()));
    assert_eq!(f.check(&delta_stepping(&f.g, f.root, 0.1)), Ok(f.edges_reached()));
    let z = Fixture::zero_weights();
    // 0-1, 1-2, 2-3, 3-1, 3-4, 0-5, 5-4 and the self-loop 4-4.
    assert_eq!(z.edges_reached(), 8);
    assert_eq!(z.check(&z.tree), Ok(8));
    assert_eq!(z.check(&delta_stepping(&z.g, z.root, 0.1)), Ok(8));
    // From a vertex out of the main component.
    let other = Fixture::new(8, z.edges.clone(), 6);
    assert_eq!(other.check(&other.tree), Ok(1));
}

#[test]
fn root_distance() {
    let f = Fixture::random();
    assert_eq!(f.corrupt(|t| t.dist[0] = 0.25), Err(ValidationError::RootDistance { root: 0, dist: 0.25 }));
    assert_eq!(
        f.corrupt(|t| t.dist[0] = f64::INFINITY),
        Err(ValidationError::RootDistance { root: 0, dist: f64::INFINITY })
    );
}

#[test]
fn root_parent() {
    let f = Fixture::random();
    assert_eq!(f.corrupt(|t| t.parent[0] = 1), Err(ValidationError::RootParent { root: 0, parent: 1 }));
    assert_eq!(f.corrupt(|t| t.parent[0] = NO_PARENT), Err(ValidationError::RootParent { root: 0, parent: NO_PARENT }));
}

#[test]
fn distance_without_parent() {
    let f = Fixture::random();
    let v = f.reached().nth(3).unwrap();
    let dist = f.tree.dist[v as usize];
    assert_eq!(
        f.corrupt(|t| t.parent[v as usize] = NO_PARENT),
        Err(ValidationError::DistanceWithoutParent { vertex: v, dist })
    );
}

#[test]
fn parent_without_distance() {
    let f = Fixture::random();
    let v = f.reached().nth(3).unwrap();
    let parent = f.tree.parent[v as usize];
    assert_eq!(
        f.corrupt(|t| t.dist[v as usize] = f64::INFINITY),
        Err(ValidationError::ParentWithoutDistance { vertex: v, parent })
    );
    // An unreached vertex given a parent.
    let u = (0..f.n).find(|&u| f.tree.dist[u as usize] == f64::INFINITY).unwrap();
    assert_eq!(
        f.corrupt(|t| t.parent[u as usize] = u64::from(v)),
        Err(ValidationError::ParentWithoutDistance { vertex: u, parent: u64::from(v) })
    );
}

#[test]
fn negative_or_nan_distance() {
    let f = Fixture::random();
    let v = f.reached().nth(5).unwrap();
    assert_eq!(
        f.corrupt(|t| t.dist[v as usize] = -1.0),
        Err(ValidationError::InvalidDistance { vertex: v, dist: -1.0 })
    );
    let e = f.corrupt(|t| t.dist[v as usize] = f64::NAN);
    assert!(
        matches!(e, Err(ValidationError::InvalidDistance { vertex, dist }) if vertex == v && dist.is_nan()),
        "{e:?}"
    );
    // On an unreached vertex too.
    let u = (0..f.n).find(|&u| f.tree.dist[u as usize] == f64::INFINITY).unwrap();
    assert_eq!(
        f.corrupt(|t| t.dist[u as usize] = f64::NEG_INFINITY),
        Err(ValidationError::InvalidDistance { vertex: u, dist: f64::NEG_INFINITY })
    );
}

#[test]
fn parent_out_of_range() {
    let f = Fixture::random();
    let v = f.reached().nth(2).unwrap();
    assert_eq!(
        f.corrupt(|t| t.parent[v as usize] = 64),
        Err(ValidationError::ParentOutOfRange { vertex: v, parent: 64, vertices: 64 })
    );
}

#[test]
fn parent_not_adjacent() {
    let f = Fixture::random();
    let v = f.reached().nth(2).unwrap();
    let u = f.reached().find(|&u| u != v && f.arcs(v, u).is_empty()).unwrap();
    assert_eq!(
        f.corrupt(|t| t.parent[v as usize] = u64::from(u)),
        Err(ValidationError::ParentNotAdjacent { vertex: v, parent: u64::from(u) })
    );
}

#[test]
fn parent_edge_weight_mismatch() {
    let f = Fixture::random();
    let d = &f.tree.dist;
    let (v, u) = f
        .reached()
        .flat_map(|v| f.g.adjacency(v).0.iter().map(move |&u| (v, u)))
        .find(|&(v, u)| {
            u != v
                && u64::from(u) != f.tree.parent[v as usize]
                && d[u as usize].is_finite()
                && f.arcs(v, u).iter().all(|&w| d[u as usize] + f64::from(w) != d[v as usize])
        })
        .unwrap();
    let lightest = f.arcs(v, u)[0];
    assert_eq!(
        f.corrupt(|t| t.parent[v as usize] = u64::from(u)),
        Err(ValidationError::ParentWeightMismatch {
            vertex: v,
            dist: d[v as usize],
            parent: u,
            parent_dist: d[u as usize],
            lightest
        })
    );
}

#[test]
fn triangle_rule() {
    // Hang a leaf from a neighbour that gives it a longer path: its tree
    // edge is right, but the arc from its old parent is shorter.
    let f = Fixture::random();
    let d = &f.tree.dist;
    let (v, u, w) = f
        .leaves()
        .flat_map(|v| f.g.adjacency(v).0.iter().map(move |&u| (v, u)))
        .map(|(v, u)| (v, u, f.arcs(v, u)[0]))
        .find(|&(v, u, w)| u != v && d[u as usize] + f64::from(w) > d[v as usize])
        .unwrap();
    let e = f.corrupt(|t| {
        t.parent[v as usize] = u64::from(u);
        t.dist[v as usize] = t.dist[u as usize] + f64::from(w);
    });
    assert!(matches!(e, Err(ValidationError::Triangle { from, to, .. }) if to == v || from == v), "{e:?}");
}

#[test]
fn reached_to_unreached() {
    let f = Fixture::random();
    let v = f.leaves().next().unwrap();
    let e = f.corrupt(|t| {
        t.dist[v as usize] = f64::INFINITY;
        t.parent[v as usize] = NO_PARENT;
    });
    assert!(matches!(e, Err(ValidationError::ReachedToUnreached { to, .. }) if to == v), "{e:?}");
}

#[test]
fn parent_cycle_through_zero_weight_edges() {
    let z = Fixture::zero_weights();
    assert_eq!(&z.tree.dist[..6], &[0.0, 0.5, 0.5, 0.5, 0.75, 0.75]);
    // 1 -> 3 -> 2 -> 1: every tree edge exists and adds up (weight 0).
    let e = z.corrupt(|t| {
        t.parent[1] = 3;
        t.parent[3] = 2;
        t.parent[2] = 1;
    });
    assert!(matches!(e, Err(ValidationError::ParentCycle { dist: 0.5, .. })), "{e:?}");
    // Two vertices as each other's parent.
    let e = z.corrupt(|t| {
        t.parent[2] = 3;
        t.parent[3] = 2;
    });
    assert!(matches!(e, Err(ValidationError::ParentCycle { dist: 0.5, .. })), "{e:?}");
    // A vertex its own parent, through its self-loop of weight 0.
    assert_eq!(z.corrupt(|t| t.parent[4] = 4), Err(ValidationError::ParentCycle { vertex: 4, at: 4, dist: 0.75 }));
}

#[test]
fn messages_name_vertices_and_values() {
    let f = Fixture::random();
    let v = f.reached().nth(3).unwrap();
    let e = f.corrupt(|t| t.parent[v as usize] = 1000).unwrap_err().to_string();
    assert!(e.contains(&format!("vertex {v}")) && e.contains("1000") && e.contains("64"), "{e}");
    let e = f.corrupt(|t| t.dist[0] = 0.25).unwrap_err().to_string();
    assert!(e.contains("root 0") && e.contains("0.25"), "{e}");
}

/// Validates by parts split at `cuts`, each looking the others up in the
/// whole tree; returns the total edge count.
fn by_parts(f: &Fixture, tree: &Tree, cuts: &[u32], all: &impl Lookup) -> Result<u64, ValidationError> {
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(f.n);
    let (mut edges, mut chains) = (0, Vec::new());
    for b in bounds.windows(2) {
        let (lo, hi) = (b[0], b[1]);
        let part = Csr::from_edges(lo, hi, &f.edges);
        let local = Tree {
            dist: tree.dist[lo as usize..hi as usize].to_vec(),
            parent: tree.parent[lo as usize..hi as usize].to_vec(),
        };
        let check = validate_part(&part, &local, f.root, u64::from(f.n), all)?;
        edges += check.edges_in_component;
        chains.extend(check.equal_distance);
    }
    check_chains(&chains, f.root, u64::from(f.n), all)?;
    Ok(edges)
}

#[test]
fn parts_give_the_whole_graphs_answer() {
    let f = Fixture::random();
    for cuts in [&[32][..], &[10, 50], &[0, 1, 63], &[5, 40, 41]] {
        assert_eq!(by_parts(&f, &f.tree, cuts, &f.tree), Ok(f.edges_reached()), "cuts {cuts:?}");
        let lookup = |v: u32| (f.tree.dist[v as usize], f.tree.parent[v as usize]);
        assert_eq!(by_parts(&f, &f.tree, cuts, &lookup), Ok(f.edges_reached()), "cuts {cuts:?}");
    }
    // Errors are found by the part holding them.
    let v = f.leaves().next().unwrap();
    let mut broken = f.tree.clone();
    broken.dist[v as usize] = f64::INFINITY;
    broken.parent[v as usize] = NO_PARENT;
    let e = by_parts(&f, &broken, &[v, v + 1], &broken);
    assert!(matches!(e, Err(ValidationError::ReachedToUnreached { to, .. }) if to == v), "{e:?}");

    let z = Fixture::zero_weights();
    for cuts in [&[2][..], &[1, 3, 5]] {
        assert_eq!(by_parts(&z, &z.tree, cuts, &z.tree), Ok(8), "cuts {cuts:?}");
        // Each part sees nothing wrong with the cycle; the chains do.
        let mut cycle = z.tree.clone();
        cycle.parent[2] = 3;
        cycle.parent[3] = 2;
        let e = by_parts(&z, &cycle, cuts, &cycle);
        assert!(matches!(e, Err(ValidationError::ParentCycle { .. })), "{e:?}");
    }
    // The chains to follow are those at their parent's distance.
    let part = Csr::from_edges(0, 8, &z.edges);
    let check = validate_part(&part, &z.tree, 0, 8, &z.tree).unwrap();
    let mut equal = check.equal_distance.clone();
    equal.sort_unstable();
    let expected: Vec<u32> = (1..4).filter(|&v| z.tree.parent[v as usize] != 0).collect();
    assert_eq!(equal, expected);
    assert_eq!(check.edges_in_component, 8);
}
