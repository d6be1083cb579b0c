//! The distributed graph within one process of several threads: exact
//! distances against Dijkstra for several deltas, the edge-list source,
//! validation catching a wrong result, and errors for bad input.

use gossamer_sssp::baseline::dijkstra::dijkstra;
use gossamer_sssp::dist::{Graph, GraphError, Phase, Source};
use gossamer_sssp::graph::{edgelist, Csr, Spec};
use gossamer_sssp::validate;

fn runtime(threads: usize) -> gossamer::Runtime {
    // Strict: every worker its own simulated process, so the graph keeps
    // the rules it keeps across processes.
    gossamer::Runtime::builder().workers(threads).strict(1).build().unwrap()
}

#[test]
fn distances_equal_dijkstra_for_every_delta() {
    let spec = Spec::new(10, 8, 3);
    let whole = Csr::from_edges(0, spec.vertices() as u32, &spec.generate_all());
    runtime(3).block_on(move || {
        let mut phases = Vec::new();
        let g = Graph::build(&Source::Kronecker(spec), |p| phases.push(p)).unwrap();
        assert_eq!(phases, vec![Phase::Entrusted, Phase::Generated, Phase::Built]);
        assert_eq!((g.edges, g.arcs), (spec.edges(), 2 * spec.edges()));
        let roots = g.roots(3, 11).unwrap();
        assert_eq!(roots, g.roots(3, 11).unwrap(), "the root choice is deterministic");
        for &root in &roots {
            assert!(g.degree(root) > 0);
            let want = dijkstra(&whole, root);
            let edges = validate::validate(&whole, root, &want).unwrap();
            for delta in [0.02, 0.1, 0.5, 4.0] {
                let stats = g.search(root, delta);
                assert!(stats.buckets > 0 && stats.rounds >= 2 * stats.buckets, "{stats:?}");
                assert_eq!(g.validate(root).unwrap(), edges);
                let got = g.gather();
                assert_eq!(got.dist, want.dist, "root {root}, delta {delta}");
                assert_eq!(got.reached(), want.reached());
            }
        }
    });
}

#[test]
fn a_file_gives_the_graph_the_generator_gives() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("g.edges");
    let spec = Spec::new(9, 4, 8);
    edgelist::write_spec(&file, &spec).unwrap();
    runtime(2).block_on(move || {
        let a = Graph::build(&Source::Kronecker(spec), |_| {}).unwrap();
        let b = Graph::build(&Source::File(file.clone()), |_| {}).unwrap();
        let root = a.roots(1, 5).unwrap()[0];
        assert_eq!(b.roots(1, 5).unwrap()[0], root);
        a.search(root, 0.1);
        b.search(root, 0.1);
        assert_eq!(a.gather(), b.gather());
        assert_eq!(a.validate(root).unwrap(), b.validate(root).unwrap());
    });
}

#[test]
fn a_lengthened_distance_fails_validation() {
    runtime(2).block_on(|| {
        let g = Graph::build(&Source::Kronecker(Spec::new(8, 8, 1)), |_| {}).unwrap();
        let root = g.roots(1, 1).unwrap()[0];
        g.search(root, 0.1);
        g.validate(root).unwrap();
        // A vertex other than the root, in another part if there is one.
        let tree = g.gather();
        let v = (0..tree.dist.len() as u32).rev().find(|&v| v != root && tree.dist[v as usize].is_finite()).unwrap();
        g.perturb(v, 0.25);
        match g.validate(root) {
            Err(GraphError::Invalid { root: r, error }) => {
                assert_eq!(r, root);
                assert!(!error.is_empty());
            }
            other => panic!("a wrong distance passed validation: {other:?}"),
        }
    });
}

#[test]
fn bad_sources_and_root_counts_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.edges");
    std::fs::write(&file, b"not an edge list").unwrap();
    runtime(2).block_on(move || {
        match Graph::build(&Source::File(file.clone()), |_| {}) {
            Err(GraphError::Source(m)) => assert!(m.contains("bad.edges"), "{m}"),
            Ok(_) => panic!("a bad file was accepted"),
            Err(e) => panic!("wrong error: {e}"),
        }
        let missing = Graph::build(&Source::File(file.with_extension("missing")), |_| {});
        assert!(matches!(missing, Err(GraphError::Source(_))));
        // A tiny graph has fewer vertices of degree > 0 than asked for.
        let g = Graph::build(&Source::Kronecker(Spec::new(2, 1, 1)), |_| {}).unwrap();
        match g.roots(5, 1) {
            Err(GraphError::Roots { found, wanted: 5 }) => assert!(found < 5),
            other => panic!("{:?}", other.map(|r| r.len())),
        }
    });
}
