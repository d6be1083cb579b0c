//! The binary edge-list file: round trips, partial reads, every error from
//! a corrupted file, and decoders that never panic on arbitrary bytes.

use std::fs;
use std::path::{Path, PathBuf};

use gossamer_sssp::graph::edgelist::{self, EdgeListError, Header};
use gossamer_sssp::graph::{Edge, Spec};
use proptest::prelude::*;

fn spec() -> Spec {
    Spec::new(10, 8, 42)
}

/// A directory that lives as long as the test, and a file path in it.
fn temp_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

/// Writes `spec`'s graph, returning its edges.
fn written(path: &Path) -> Vec<Edge> {
    let s = spec();
    let header = edgelist::write_spec(path, &s).unwrap();
    assert_eq!(header, Header { scale: 10, vertices: 1024, edges: 8192 });
    s.generate_all()
}

/// Overwrites bytes of the file at `offset`.
fn patch(path: &Path, offset: usize, bytes: &[u8]) {
    let mut data = fs::read(path).unwrap();
    data[offset..offset + bytes.len()].copy_from_slice(bytes);
    fs::write(path, data).unwrap();
}

#[test]
fn round_trip_of_a_generated_graph() {
    let (_dir, path) = temp_file("g.edges");
    let edges = written(&path);
    assert_eq!(fs::metadata(&path).unwrap().len(), 32 + 12 * 8192);
    let header = edgelist::read_header(&path).unwrap();
    assert_eq!(header, Header::of(&spec()));
    assert_eq!(header.file_len(), 32 + 12 * 8192);
    assert_eq!(edgelist::read_range(&path, 0..8192).unwrap(), edges);
    // The bytes are what the format says.
    let data = fs::read(&path).unwrap();
    assert_eq!(&data[..8], b"GSMEDGE1");
    assert_eq!(data[8..12], 1u32.to_le_bytes());
    assert_eq!(data[12..16], 10u32.to_le_bytes());
    assert_eq!(data[16..24], 1024u64.to_le_bytes());
    assert_eq!(data[24..32], 8192u64.to_le_bytes());
    let e = edges[5];
    let r = &data[32 + 12 * 5..32 + 12 * 6];
    assert_eq!(r[0..4], e.u.to_le_bytes());
    assert_eq!(r[4..8], e.v.to_le_bytes());
    assert_eq!(r[8..12], e.w.to_bits().to_le_bytes());
}

#[test]
fn write_and_write_spec_agree() {
    let (dir, a) = temp_file("a.edges");
    let b = dir.path().join("b.edges");
    let s = spec();
    edgelist::write_spec(&a, &s).unwrap();
    edgelist::write(&b, Header::of(&s), (0..s.edges()).map(|i| s.edge(i))).unwrap();
    assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap());
}

#[test]
fn write_spec_spans_several_chunks() {
    // More than one chunk of 2^20 edges, and a last chunk that is not full.
    let (_dir, path) = temp_file("big.edges");
    let s = Spec::new(17, 9, 5);
    edgelist::write_spec(&path, &s).unwrap();
    let m = s.edges();
    assert!(m > 1 << 20 && !m.is_multiple_of(1 << 20));
    for r in [0..3, (1 << 20) - 2..(1 << 20) + 2, m - 5..m] {
        assert_eq!(edgelist::read_range(&path, r.clone()).unwrap(), s.generate(r));
    }
}

#[test]
fn sub_ranges() {
    let (_dir, path) = temp_file("g.edges");
    let edges = written(&path);
    for (a, b) in [(0, 0), (0, 1), (17, 18), (100, 3000), (8191, 8192), (8192, 8192), (4096, 8192)] {
        assert_eq!(edgelist::read_range(&path, a..b).unwrap(), edges[a as usize..b as usize], "{a}..{b}");
    }
    assert!(matches!(
        edgelist::read_range(&path, 8000..8193),
        Err(EdgeListError::Range { start: 8000, end: 8193, edges: 8192 })
    ));
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 10..5;
    assert!(matches!(edgelist::read_range(&path, backwards), Err(EdgeListError::Range { .. })));
}

#[test]
fn an_empty_graph() {
    let (_dir, path) = temp_file("empty.edges");
    let header = Header { scale: 0, vertices: 0, edges: 0 };
    edgelist::write(&path, header, []).unwrap();
    assert_eq!(edgelist::read_header(&path).unwrap(), header);
    assert_eq!(edgelist::read_range(&path, 0..0).unwrap(), vec![]);
}

#[test]
fn bad_magic() {
    let (_dir, path) = temp_file("g.edges");
    written(&path);
    patch(&path, 0, b"GSMEDGE2");
    assert!(matches!(edgelist::read_header(&path), Err(EdgeListError::BadMagic)));
    assert!(matches!(edgelist::read_range(&path, 0..1), Err(EdgeListError::BadMagic)));
}

#[test]
fn wrong_version() {
    let (_dir, path) = temp_file("g.edges");
    written(&path);
    patch(&path, 8, &2u32.to_le_bytes());
    assert!(matches!(edgelist::read_header(&path), Err(EdgeListError::Version(2))));
}

#[test]
fn inconsistent_header() {
    let (_dir, path) = temp_file("g.edges");
    written(&path);
    patch(&path, 16, &1000u64.to_le_bytes());
    assert!(matches!(edgelist::read_header(&path), Err(EdgeListError::BadHeader { scale: 10, vertices: 1000 })));
}

#[test]
fn truncated_or_extended() {
    let (_dir, path) = temp_file("g.edges");
    written(&path);
    let data = fs::read(&path).unwrap();
    let full = data.len() as u64;
    fs::write(&path, &data[..data.len() - 1]).unwrap();
    assert!(matches!(
        edgelist::read_header(&path),
        Err(EdgeListError::Length { expected, actual }) if expected == full && actual == full - 1
    ));
    // Even a range that the file still holds is refused.
    assert!(matches!(edgelist::read_range(&path, 0..1), Err(EdgeListError::Length { .. })));
    fs::write(&path, [&data[..], &[0; 12]].concat()).unwrap();
    assert!(matches!(edgelist::read_header(&path), Err(EdgeListError::Length { actual, .. }) if actual == full + 12));
    // Shorter than a header.
    fs::write(&path, &data[..20]).unwrap();
    assert!(matches!(edgelist::read_header(&path), Err(EdgeListError::Length { expected: 32, actual: 20 })));
}

#[test]
fn vertex_out_of_range() {
    let (_dir, path) = temp_file("g.edges");
    let edges = written(&path);
    patch(&path, 32 + 12 * 300 + 4, &1024u32.to_le_bytes());
    // The header is fine; the record is caught when read.
    edgelist::read_header(&path).unwrap();
    assert_eq!(edgelist::read_range(&path, 0..300).unwrap(), edges[..300]);
    assert!(matches!(
        edgelist::read_range(&path, 200..400),
        Err(EdgeListError::VertexOutOfRange { index: 300, vertex: 1024, vertices: 1024 })
    ));
}

#[test]
fn nan_and_other_bad_weights() {
    for (k, w) in [f32::NAN, 1.0, -0.25, f32::INFINITY, 7.5].into_iter().enumerate() {
        let (_dir, path) = temp_file("g.edges");
        written(&path);
        let index = 10 + k as u64;
        patch(&path, 32 + 12 * index as usize + 8, &w.to_bits().to_le_bytes());
        let err = edgelist::read_range(&path, 0..8192).unwrap_err();
        assert!(
            matches!(err, EdgeListError::BadWeight { index: i, w: got } if i == index && got.to_bits() == w.to_bits()),
            "{err}"
        );
    }
}

#[test]
fn io_errors_name_the_file() {
    let (dir, path) = temp_file("missing.edges");
    let err = edgelist::read_header(&path).unwrap_err();
    assert!(matches!(&err, EdgeListError::Io { path: p, .. } if *p == path));
    assert!(err.to_string().contains("missing.edges"), "{err}");
    // Writing into a directory that does not exist.
    let nowhere = dir.path().join("no/such/dir/g.edges");
    assert!(matches!(edgelist::write_spec(&nowhere, &spec()), Err(EdgeListError::Io { .. })));
}

#[test]
fn writer_refuses_invalid_input_and_leaves_no_file() {
    let (_dir, path) = temp_file("w.edges");
    let header = Header { scale: 2, vertices: 4, edges: 2 };
    let e = |u, v, w| Edge { u, v, w };
    type Expect = fn(&EdgeListError) -> bool;
    let cases: [(Vec<Edge>, Expect); 4] = [
        (vec![e(0, 1, 0.5)], |x| matches!(x, EdgeListError::Count { expected: 2, actual: 1 })),
        (vec![e(0, 1, 0.5); 3], |x| matches!(x, EdgeListError::Count { expected: 2, actual: 3 })),
        (vec![e(0, 1, 0.5), e(4, 1, 0.5)], |x| {
            matches!(x, EdgeListError::VertexOutOfRange { index: 1, vertex: 4, .. })
        }),
        (vec![e(0, 1, f32::NAN), e(0, 1, 0.5)], |x| matches!(x, EdgeListError::BadWeight { index: 0, .. })),
    ];
    for (edges, expected) in cases {
        let err = edgelist::write(&path, header, edges).unwrap_err();
        assert!(expected(&err), "{err}");
        assert!(!path.exists());
    }
    let bad = Header { scale: 2, vertices: 5, edges: 0 };
    assert!(matches!(edgelist::write(&path, bad, []), Err(EdgeListError::BadHeader { .. })));
    edgelist::write(&path, header, [e(0, 1, 0.5), e(3, 3, 0.0)]).unwrap();
    assert_eq!(edgelist::read_range(&path, 0..2).unwrap(), vec![e(0, 1, 0.5), e(3, 3, 0.0)]);
}

#[test]
fn pure_decoders() {
    let header = Header { scale: 0, vertices: 3, edges: 1 };
    let head = edgelist::encode_header(&header);
    assert_eq!(edgelist::decode_header(&head).unwrap(), header);
    assert!(matches!(edgelist::decode_header(&head[..31]), Err(EdgeListError::Length { expected: 32, actual: 31 })));
    let rec = edgelist::encode_record(&Edge { u: 2, v: 0, w: 0.75 });
    assert_eq!(edgelist::decode_records(&rec, 9, 3).unwrap(), vec![Edge { u: 2, v: 0, w: 0.75 }]);
    assert!(matches!(
        edgelist::decode_records(&rec, 9, 2),
        Err(EdgeListError::VertexOutOfRange { index: 9, vertex: 2, vertices: 2 })
    ));
    assert!(matches!(
        edgelist::decode_records(&rec[..11], 0, 3),
        Err(EdgeListError::Length { expected: 0, actual: 11 })
    ));
}

proptest! {
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), first: u64, vertices: u64) {
        let _ = edgelist::decode_header(&bytes);
        if let Ok(edges) = edgelist::decode_records(&bytes, first, vertices) {
            prop_assert_eq!(edges.len() * 12, bytes.len());
            prop_assert!(edges.iter().all(|e| u64::from(e.u.max(e.v)) < vertices && (0.0..1.0).contains(&e.w)));
        }
    }

    #[test]
    fn decoders_never_panic_on_near_valid_headers(
        scale in 0u32..40, vertices in prop_oneof![any::<u64>(), 0u64..(1 << 33)], edges: u64, version in 0u32..3,
        tail in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut bytes = edgelist::encode_header(&Header { scale, vertices, edges }).to_vec();
        bytes[8..12].copy_from_slice(&version.to_le_bytes());
        bytes.extend(tail);
        match edgelist::decode_header(&bytes) {
            Ok(h) => {
                prop_assert_eq!(version, 1);
                prop_assert_eq!(h, Header { scale, vertices, edges });
                prop_assert!(vertices <= 1 << 32);
            }
            Err(EdgeListError::Version(v)) => prop_assert_eq!(v, version),
            Err(EdgeListError::BadHeader { .. }) => prop_assert_eq!(version, 1),
            Err(e) => prop_assert!(false, "unexpected {}", e),
        }
    }

    #[test]
    fn records_round_trip(edges in proptest::collection::vec((0u32..100, 0u32..100, 0u32..(1 << 24)), 0..50)) {
        let edges: Vec<Edge> =
            edges.into_iter().map(|(u, v, w)| Edge { u, v, w: w as f32 / 16_777_216.0 }).collect();
        let bytes: Vec<u8> = edges.iter().flat_map(edgelist::encode_record).collect();
        prop_assert_eq!(edgelist::decode_records(&bytes, 0, 100).unwrap(), edges);
    }
}
