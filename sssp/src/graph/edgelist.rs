//! A binary edge-list file that another program can read.
//!
//! # Format (version 1)
//!
//! All integers are little-endian; there is no padding.
//!
//! | offset | size | field                                               |
//! |-------:|-----:|-----------------------------------------------------|
//! |      0 |    8 | magic, the ASCII bytes `GSMEDGE1`                   |
//! |      8 |    4 | version, `u32`, 1                                   |
//! |     12 |    4 | SCALE, `u32` (0 if unknown)                         |
//! |     16 |    8 | number of vertices `n`, `u64`                       |
//! |     24 |    8 | number of edges `m`, `u64`                          |
//! |     32 | 12·m | `m` edge records, in edge order                     |
//!
//! Each edge record is 12 bytes: `u` (`u32`), `v` (`u32`), then the weight
//! `w` as the bits of an IEEE-754 binary32 (`f32::to_bits`, `u32`).
//!
//! A valid file
//! * is exactly `32 + 12·m` bytes long;
//! * has `n <= 2^32` and, when SCALE is not 0, `SCALE <= 32` and
//!   `n == 2^SCALE`;
//! * has `u < n` and `v < n` in every record;
//! * has every weight in `[0, 1)` (finite, not NaN; `-0.0` is accepted).
//!
//! Edges are undirected: a record `(u, v, w)` stands for both arcs
//! `u → v` and `v → u`. Self-loops and duplicates are allowed.
//!
//! For example, a graph of SCALE 1 with the single edge `(1, 0, 0.5)`:
//!
//! ```text
//! 47 53 4d 45 44 47 45 31  01 00 00 00  01 00 00 00   GSMEDGE1, version 1, SCALE 1
//! 02 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00    2 vertices, 1 edge
//! 01 00 00 00  00 00 00 00  00 00 00 3f               u = 1, v = 0, w = 0.5
//! ```
//!
//! Every reader ([`read_header`], [`read_range`], [`decode_header`],
//! [`decode_records`]) checks all of this and reports the first violation as
//! an [`EdgeListError`]; the writers refuse to write an invalid file.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::{Edge, Spec};

/// The first 8 bytes of every edge-list file.
pub const MAGIC: [u8; 8] = *b"GSMEDGE1";
/// The format version this module reads and writes.
pub const VERSION: u32 = 1;
/// Size of the header in bytes.
pub const HEADER_BYTES: u64 = 32;
/// Size of one edge record in bytes.
pub const RECORD_BYTES: u64 = 12;

/// Records read or written per chunk (12 MiB of records).
const CHUNK: u64 = 1 << 20;

/// What can be wrong with an edge-list file or its use.
#[derive(Debug, thiserror::Error)]
pub enum EdgeListError {
    /// The file could not be created, opened, read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with [`MAGIC`].
    #[error("not an edge-list file (bad magic number)")]
    BadMagic,
    /// The format version is not [`VERSION`].
    #[error("edge-list format version {0} is not supported (only version {VERSION})")]
    Version(u32),
    /// The file (or a buffer to decode) does not have the length it must.
    #[error("edge-list data is {actual} bytes long, expected {expected}")]
    Length {
        /// The length it must have, in bytes.
        expected: u64,
        /// Its length, in bytes.
        actual: u64,
    },
    /// The header's SCALE and number of vertices disagree, or the number of
    /// vertices is above `2^32`.
    #[error("edge-list header has SCALE {scale} and {vertices} vertices")]
    BadHeader {
        /// SCALE in the header.
        scale: u32,
        /// Number of vertices in the header.
        vertices: u64,
    },
    /// An end of edge `index` is not a vertex of the graph.
    #[error("edge {index} has vertex {vertex}, but the graph has {vertices} vertices")]
    VertexOutOfRange {
        /// The edge's number in the file.
        index: u64,
        /// The offending end.
        vertex: u32,
        /// Number of vertices of the graph.
        vertices: u64,
    },
    /// The weight of edge `index` is not in `[0, 1)` (NaN, negative,
    /// infinite or at least 1).
    #[error("edge {index} has weight {w}, not in [0, 1)")]
    BadWeight {
        /// The edge's number in the file.
        index: u64,
        /// The weight.
        w: f32,
    },
    /// [`write()`] was given a different number of edges than its header
    /// announces.
    #[error("the header announces {expected} edges, but {actual} were given")]
    Count {
        /// Edges in the header.
        expected: u64,
        /// Edges given (`expected + 1` if more were given).
        actual: u64,
    },
    /// [`read_range`] was asked for edges the file does not have.
    #[error("edge range {start}..{end} is not within the file's {edges} edges")]
    Range {
        /// Start of the range asked for.
        start: u64,
        /// End of the range asked for.
        end: u64,
        /// Number of edges of the file.
        edges: u64,
    },
}

/// The header of an edge-list file: what the graph is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// SCALE of a Kronecker graph, or 0 if unknown.
    pub scale: u32,
    /// Number of vertices: every `u` and `v` is below it.
    pub vertices: u64,
    /// Number of edge records.
    pub edges: u64,
}

impl Header {
    /// The header of the graph of `spec`.
    pub fn of(spec: &Spec) -> Header {
        Header { scale: spec.scale, vertices: spec.vertices(), edges: spec.edges() }
    }

    /// The exact length of a file with this header, in bytes (saturating at
    /// `u64::MAX`, which no file reaches).
    pub fn file_len(&self) -> u64 {
        self.edges.saturating_mul(RECORD_BYTES).saturating_add(HEADER_BYTES)
    }

    /// Checks that SCALE and the number of vertices agree.
    fn check(&self) -> Result<(), EdgeListError> {
        let ok =
            self.vertices <= 1 << 32 && (self.scale == 0 || (self.scale <= 32 && self.vertices == 1 << self.scale));
        if ok {
            Ok(())
        } else {
            Err(EdgeListError::BadHeader { scale: self.scale, vertices: self.vertices })
        }
    }
}

/// The 32 bytes of `header` (not checked).
pub fn encode_header(header: &Header) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&header.scale.to_le_bytes());
    b[16..24].copy_from_slice(&header.vertices.to_le_bytes());
    b[24..32].copy_from_slice(&header.edges.to_le_bytes());
    b
}

/// The 12 bytes of the record of `e` (not checked).
pub fn encode_record(e: &Edge) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[0..4].copy_from_slice(&e.u.to_le_bytes());
    b[4..8].copy_from_slice(&e.v.to_le_bytes());
    b[8..12].copy_from_slice(&e.w.to_bits().to_le_bytes());
    b
}

/// Decodes and checks a header from the first 32 bytes of `bytes` (the
/// rest is ignored: the file's length is checked by [`read_header`]).
///
/// # Errors
/// [`EdgeListError::Length`] if `bytes` is shorter than 32 bytes, then
/// [`EdgeListError::BadMagic`], [`EdgeListError::Version`] or
/// [`EdgeListError::BadHeader`].
pub fn decode_header(bytes: &[u8]) -> Result<Header, EdgeListError> {
    let Some(b) = bytes.get(..HEADER_BYTES as usize) else {
        return Err(EdgeListError::Length { expected: HEADER_BYTES, actual: bytes.len() as u64 });
    };
    if b[0..8] != MAGIC {
        return Err(EdgeListError::BadMagic);
    }
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let version = u32_at(8);
    if version != VERSION {
        return Err(EdgeListError::Version(version));
    }
    let header = Header { scale: u32_at(12), vertices: u64_at(16), edges: u64_at(24) };
    header.check()?;
    Ok(header)
}

/// Checks one edge: ends below `vertices`, weight in `[0, 1)`.
fn check_edge(e: &Edge, index: u64, vertices: u64) -> Result<(), EdgeListError> {
    for vertex in [e.u, e.v] {
        if u64::from(vertex) >= vertices {
            return Err(EdgeListError::VertexOutOfRange { index, vertex, vertices });
        }
    }
    // `!(..)` so that NaN fails too.
    if !(e.w >= 0.0 && e.w < 1.0) {
        return Err(EdgeListError::BadWeight { index, w: e.w });
    }
    Ok(())
}

/// Decodes and checks consecutive edge records, the first being edge number
/// `first_index` of a graph of `vertices` vertices (the numbers only go into
/// errors).
///
/// # Errors
/// [`EdgeListError::Length`] if the length of `bytes` is not a multiple of
/// 12 (`expected` is then the length of the whole records it holds), then
/// the first [`EdgeListError::VertexOutOfRange`] or
/// [`EdgeListError::BadWeight`].
pub fn decode_records(bytes: &[u8], first_index: u64, vertices: u64) -> Result<Vec<Edge>, EdgeListError> {
    let rec = RECORD_BYTES as usize;
    if !bytes.len().is_multiple_of(rec) {
        return Err(EdgeListError::Length {
            expected: (bytes.len() - bytes.len() % rec) as u64,
            actual: bytes.len() as u64,
        });
    }
    let mut edges = Vec::with_capacity(bytes.len() / rec);
    for (k, r) in bytes.chunks_exact(rec).enumerate() {
        let word = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().expect("4 bytes"));
        let e = Edge { u: word(0), v: word(4), w: f32::from_bits(word(8)) };
        check_edge(&e, first_index.saturating_add(k as u64), vertices)?;
        edges.push(e);
    }
    Ok(edges)
}

/// Attaches `path` to an I/O error.
fn io(path: &Path) -> impl Fn(std::io::Error) -> EdgeListError + '_ {
    move |source| EdgeListError::Io { path: path.to_owned(), source }
}

/// Runs `body` on a new file at `path`, flushes it, and removes the file if
/// anything failed (so that no valid-looking partial file is left).
fn write_file(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> Result<(), EdgeListError>,
) -> Result<(), EdgeListError> {
    let result = (|| {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io(path))?);
        body(&mut out)?;
        out.into_inner().map_err(|e| io(path)(e.into_error()))?.sync_all().map_err(io(path))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// Writes the edge-list file of `header` and `edges` at `path` (replacing
/// any file there), through a buffer.
///
/// # Errors
/// [`EdgeListError::BadHeader`] if the header is inconsistent,
/// [`EdgeListError::Count`] unless exactly `header.edges` edges are given,
/// [`EdgeListError::VertexOutOfRange`] or [`EdgeListError::BadWeight`] for
/// an invalid edge, [`EdgeListError::Io`]. On error the file is removed.
pub fn write(path: &Path, header: Header, edges: impl IntoIterator<Item = Edge>) -> Result<(), EdgeListError> {
    header.check()?;
    write_file(path, |out| {
        out.write_all(&encode_header(&header)).map_err(io(path))?;
        let mut count = 0u64;
        for e in edges {
            if count == header.edges {
                return Err(EdgeListError::Count { expected: header.edges, actual: count + 1 });
            }
            check_edge(&e, count, header.vertices)?;
            out.write_all(&encode_record(&e)).map_err(io(path))?;
            count += 1;
        }
        if count != header.edges {
            return Err(EdgeListError::Count { expected: header.edges, actual: count });
        }
        Ok(())
    })
}

/// Generates the graph of `spec` and writes it at `path`, returning its
/// header. Edges are generated in parallel (`rayon`) a chunk at a time, the
/// next chunk while the previous one is written, so that at most two chunks
/// are in memory.
///
/// # Errors
/// [`EdgeListError::Io`]; on error the file is removed.
pub fn write_spec(path: &Path, spec: &Spec) -> Result<Header, EdgeListError> {
    write_spec_with(path, spec, |_| {})
}

/// As [`write_spec`], calling `progress` with the number of edges written
/// so far after each chunk (for a progress bar).
pub fn write_spec_with(path: &Path, spec: &Spec, progress: impl Fn(u64)) -> Result<Header, EdgeListError> {
    let header = Header::of(spec);
    header.check()?;
    let encode = |range: Range<u64>| -> Vec<u8> {
        let edges = spec.generate_par(range);
        let mut bytes = Vec::with_capacity(edges.len() * RECORD_BYTES as usize);
        for e in &edges {
            bytes.extend_from_slice(&encode_record(e));
        }
        bytes
    };
    let chunk = |k: u64| k * CHUNK..((k + 1) * CHUNK).min(header.edges);
    let chunks = header.edges.div_ceil(CHUNK);
    write_file(path, |out| {
        out.write_all(&encode_header(&header)).map_err(io(path))?;
        let mut current = if chunks > 0 { encode(chunk(0)) } else { Vec::new() };
        for k in 1..=chunks {
            let (written, next) =
                rayon::join(|| out.write_all(&current), || if k < chunks { encode(chunk(k)) } else { Vec::new() });
            written.map_err(io(path))?;
            progress(chunk(k - 1).end);
            current = next;
        }
        Ok(())
    })?;
    Ok(header)
}

/// Reads and checks the header of the file at `path`, and checks the file's
/// length against it.
///
/// # Errors
/// As [`decode_header`], [`EdgeListError::Length`] if the file is not
/// exactly [`Header::file_len`] bytes long, [`EdgeListError::Io`].
pub fn read_header(path: &Path) -> Result<Header, EdgeListError> {
    open(path).map(|(header, _)| header)
}

/// Opens the file at `path` and checks its header and length.
fn open(path: &Path) -> Result<(Header, File), EdgeListError> {
    let mut file = File::open(path).map_err(io(path))?;
    let actual = file.metadata().map_err(io(path))?.len();
    let mut bytes = Vec::with_capacity(HEADER_BYTES as usize);
    (&mut file).take(HEADER_BYTES).read_to_end(&mut bytes).map_err(io(path))?;
    let header = decode_header(&bytes)?;
    if actual != header.file_len() {
        return Err(EdgeListError::Length { expected: header.file_len(), actual });
    }
    Ok((header, file))
}

/// Reads and checks edges `range.start..range.end` of the file at `path`,
/// and only those (after checking the header and the file's length).
///
/// # Errors
/// As [`read_header`]; [`EdgeListError::Range`] if the range is not within
/// the file's edges; [`EdgeListError::VertexOutOfRange`] or
/// [`EdgeListError::BadWeight`] for the first invalid record of the range.
pub fn read_range(path: &Path, range: Range<u64>) -> Result<Vec<Edge>, EdgeListError> {
    let (header, mut file) = open(path)?;
    if range.start > range.end || range.end > header.edges {
        return Err(EdgeListError::Range { start: range.start, end: range.end, edges: header.edges });
    }
    file.seek(SeekFrom::Start(HEADER_BYTES + range.start * RECORD_BYTES)).map_err(io(path))?;
    let len = usize::try_from(range.end - range.start).expect("edge range too long for this platform");
    let mut edges = Vec::with_capacity(len);
    let mut bytes = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let n = (range.end - at).min(CHUNK);
        bytes.resize((n * RECORD_BYTES) as usize, 0);
        file.read_exact(&mut bytes).map_err(io(path))?;
        edges.extend(decode_records(&bytes, at, header.vertices)?);
        at += n;
    }
    Ok(edges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example() {
        let header = Header { scale: 1, vertices: 2, edges: 1 };
        let mut bytes = encode_header(&header).to_vec();
        bytes.extend(encode_record(&Edge { u: 1, v: 0, w: 0.5 }));
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex.join(" "),
            "47 53 4d 45 44 47 45 31 01 00 00 00 01 00 00 00 \
             02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 \
             01 00 00 00 00 00 00 00 00 00 00 3f"
        );
        assert_eq!(decode_header(&bytes).unwrap(), header);
        assert_eq!(decode_records(&bytes[32..], 0, 2).unwrap(), vec![Edge { u: 1, v: 0, w: 0.5 }]);
    }

    #[test]
    fn header_consistency() {
        let h = |scale, vertices| Header { scale, vertices, edges: 0 }.check().is_ok();
        assert!(h(0, 0) && h(0, 7) && h(0, 1 << 32) && h(3, 8) && h(32, 1 << 32));
        assert!(!h(0, (1 << 32) + 1) && !h(3, 7) && !h(33, 1 << 33) && !h(40, 0));
    }

    #[test]
    fn record_checks() {
        let e = |u, v, w| check_edge(&Edge { u, v, w }, 5, 4);
        assert!(e(0, 3, 0.0).is_ok() && e(3, 3, 0.999_999_94).is_ok() && e(1, 1, -0.0).is_ok());
        assert!(matches!(e(4, 0, 0.5), Err(EdgeListError::VertexOutOfRange { index: 5, vertex: 4, vertices: 4 })));
        assert!(matches!(e(0, 9, 0.5), Err(EdgeListError::VertexOutOfRange { vertex: 9, .. })));
        for w in [1.0, -0.5, f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            assert!(matches!(e(0, 0, w), Err(EdgeListError::BadWeight { index: 5, .. })), "{w}");
        }
    }
}
