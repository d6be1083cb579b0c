//! The memory the workers of one host share: a header with the program-wide
//! flags, one doorbell per thread (sleep flag, futex word, shutdown
//! bookkeeping), the slot matrix of the host's threads, and — when the
//! program spans several hosts — the slots between hosts. In one process it
//! is plain zeroed heap memory; across processes of a host it is one
//! shared-memory mapping that every process of the host maps, so that
//! writing a slot of another process is a plain store into the mapping.
//! Each host has its own region, laid out by the same formula, so that any
//! process can compute where a slot lies in another host's region.
//!
//! Between hosts (§3.2.8 of the thesis, "two squares"), each host holds,
//! for its `h` threads and the program's `n`, four `h × n` arrays of
//! contiguous slots: requests landing for its trustees, responses landing
//! for its clients, and the staging slots where its clients and trustees
//! prepare what they put into the other hosts' landing slots.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use std::ops::Range;

use crate::channel::matrix::Matrix;
use crate::channel::remote_slot::{RemoteSlot, REMOTE_SLOT_BYTES};
use crate::channel::slot::{Overflow, Primary};

const MAGIC: u64 = 0x676f_7373_616d_6572; // "gossamer"

/// Program-wide flags.
#[repr(C, align(128))]
pub(crate) struct Header {
    pub(crate) magic: AtomicU64,
    pub(crate) threads: AtomicU64,
    /// Set when shutdown begins: workers report whether they are quiet.
    pub(crate) stopping: AtomicU32,
    /// Set when shutdown ends: workers leave their loops.
    pub(crate) stop: AtomicU32,
    /// 1 + the rank of a process that failed (0: none).
    pub(crate) failed: AtomicU32,
}

/// One thread's doorbell.
#[repr(C, align(128))]
pub(crate) struct Doorbell {
    /// Nonzero while the thread sleeps (or is about to).
    pub(crate) sleeping: AtomicU32,
    /// The futex word the thread sleeps on; wakers change it, then wake.
    pub(crate) futex: AtomicU32,
    /// Shutdown bookkeeping: no fibers, no requests, nothing pending.
    pub(crate) quiet: AtomicU32,
    /// Bumped (single writer, plain store) whenever the worker did work
    /// while the program is stopping.
    pub(crate) epoch: AtomicU64,
    pub(crate) live_fibers: AtomicU64,
}

/// What a region is laid out for: the program's threads, this host's
/// threads among them, and the bulk area size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Threads in the program.
    pub(crate) n: usize,
    /// The global ids of this host's threads.
    pub(crate) host: Range<usize>,
    /// Bytes of each in-host bulk area (0: none, in one process).
    pub(crate) bulk_bytes: usize,
    /// Bytes of each bulk area between hosts (0 with one host).
    pub(crate) far_bulk: usize,
}

impl Shape {
    /// One process, one host.
    pub(crate) fn single(n: usize) -> Shape {
        Shape { n, host: 0..n, bulk_bytes: 0, far_bulk: 0 }
    }

    fn multi_host(&self) -> bool {
        self.host.len() < self.n
    }
}

/// Batches a lane between hosts (one client thread, one trustee thread
/// on another host) may have in flight: each has its own slot and bulk
/// area in every square, chosen by its sequence number modulo this depth,
/// so that the client fills, and the trustee serves, one batch while the
/// other crosses.
pub(crate) const FAR_DEPTH: usize = 2;

/// The index of batch slot `k` of the lane (`local` thread of the host of
/// `shape`, `other` thread) within each square: one formula for the slots
/// and the bulk areas, and for our region and another host's.
fn lane_index(shape: &Shape, local: usize, other: usize, k: usize) -> usize {
    ((local - shape.host.start) * shape.n + other) * FAR_DEPTH + k
}

/// Which of the four arrays of slots between hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Square {
    /// Requests from any client, landing for a trustee of this host.
    RequestLanding,
    /// Responses from any trustee, landing for a client of this host.
    ResponseLanding,
    /// Requests a client of this host prepares for a trustee elsewhere.
    RequestStaging,
    /// Responses a trustee of this host prepares for a client elsewhere.
    ResponseStaging,
    /// Large request payloads landing for a trustee of this host.
    RequestBulkLanding,
    /// Large response payloads landing for a client of this host.
    ResponseBulkLanding,
    /// Large request payloads a client of this host prepares.
    RequestBulkStaging,
    /// Large response payloads a trustee of this host prepares.
    ResponseBulkStaging,
}

impl Square {
    fn is_bulk(self) -> bool {
        (self as usize) >= 4
    }
}

/// Bulk area size per batch between hosts for a program of `n` threads of
/// which `h` are on the host: `GOSSAMER_FAR_BULK_BYTES`, else 256 MiB of
/// (sparse) address space per square, 64 KiB to 1 MiB each (a pair has
/// [`FAR_DEPTH`] of them per square).
pub(crate) fn far_bulk_for(n: usize, h: usize) -> usize {
    if let Some(b) = std::env::var("GOSSAMER_FAR_BULK_BYTES").ok().and_then(|v| v.parse::<usize>().ok()) {
        return b.next_multiple_of(4096);
    }
    ((256usize << 20) / (n * h * FAR_DEPTH).max(1)).clamp(64 << 10, 1 << 20).next_multiple_of(4096)
}

/// Byte offsets of the parts of a region.
#[derive(Clone, Copy, Debug)]
struct Parts {
    doorbells: usize,
    req_primary: usize,
    req_overflow: usize,
    resp_primary: usize,
    resp_overflow: usize,
    /// Per (client, trustee) pair and direction, an area for payloads too
    /// large for a slot (programs of several processes only).
    bulk: usize,
    bulk_bytes: usize,
    /// The `h × n` squares between hosts (see `Square`).
    squares: [usize; 8],
    /// End of the part the fabric registers (everything before the heap).
    len: usize,
    /// The host's shared heap (see `heap`): one arena per thread of the
    /// host, `heap_bytes` each, from `len` on (0: none, in one process).
    heap_bytes: usize,
    /// Bytes of the whole mapping.
    total: usize,
}

/// Bulk area size per pair and direction for a program of `n` threads:
/// 1 GiB of (sparse) address space over all areas, at most 16 MiB each.
pub(crate) fn bulk_bytes_for(n: usize) -> usize {
    if let Some(b) = std::env::var("GOSSAMER_BULK_BYTES").ok().and_then(|v| v.parse::<usize>().ok()) {
        return b.next_multiple_of(4096);
    }
    ((1usize << 30) / (2 * n * n)).clamp(2 << 20, 16 << 20).next_multiple_of(4096)
}

fn parts(shape: &Shape) -> Parts {
    let (n, bulk_bytes) = (shape.n, shape.bulk_bytes);
    let hn = shape.host.len();
    let h = std::mem::size_of::<Header>().next_multiple_of(4096);
    let d = n * std::mem::size_of::<Doorbell>();
    let pairs = hn * hn;
    let p = pairs * std::mem::size_of::<Primary>();
    let o = pairs * std::mem::size_of::<Overflow>();
    let doorbells = h;
    let req_primary = (doorbells + d).next_multiple_of(4096);
    let req_overflow = req_primary + p;
    let resp_primary = req_overflow + o;
    let resp_overflow = resp_primary + p;
    let bulk = (resp_overflow + o).next_multiple_of(4096);
    let mut at = (bulk + 2 * pairs * bulk_bytes).next_multiple_of(4096);
    let mut squares = [0; 8];
    if shape.multi_host() {
        for (i, s) in squares.iter_mut().enumerate() {
            *s = at;
            let each = if i >= 4 { shape.far_bulk } else { REMOTE_SLOT_BYTES };
            at = (at + hn * n * FAR_DEPTH * each).next_multiple_of(4096);
        }
    }
    // Each thread's arena of the shared heap is as large as one bulk area
    // (sparse, like them: only the pages blocks were carved from are used).
    let heap_bytes = bulk_bytes;
    let total = at + hn * heap_bytes;
    Parts {
        doorbells,
        req_primary,
        req_overflow,
        resp_primary,
        resp_overflow,
        bulk,
        bulk_bytes,
        squares,
        len: at,
        heap_bytes,
        total,
    }
}

enum Backing {
    Heap(Layout),
    /// A mapping the region unmaps when dropped.
    #[cfg_attr(miri, allow(dead_code))]
    Mapped,
}

pub(crate) struct Region {
    base: NonNull<u8>,
    shape: Shape,
    parts: Parts,
    backing: Backing,
}

// SAFETY: the region's contents are atomics and slots whose accesses follow
// the slot protocol; the region itself is just an address range.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// Bytes a region of this shape takes.
    pub(crate) fn size_for(shape: &Shape) -> usize {
        parts(shape).total
    }

    /// The host's shared heap: its start, each thread's arena size, and the
    /// host's threads (whose arenas follow one another in that order);
    /// `None` in one process.
    pub(crate) fn heap(&self) -> Option<(NonNull<u8>, usize, Range<usize>)> {
        (self.parts.heap_bytes > 0).then(|| {
            // SAFETY: `len` is within the mapping of `total` bytes.
            let at = unsafe { self.base.as_ptr().add(self.parts.len) };
            (NonNull::new(at).expect("inside a mapping"), self.parts.heap_bytes, self.shape.host.clone())
        })
    }

    /// Where `square`'s slot (or bulk area) for batch `k` of the lane
    /// (`local` thread of the host of `shape`, `other` thread) lies in a
    /// region of that shape: the same in every process that maps it, so a
    /// put from another host can aim at it. `k < FAR_DEPTH`.
    pub(crate) fn square_offset(shape: &Shape, square: Square, local: usize, other: usize, k: usize) -> usize {
        assert!(shape.multi_host() && shape.host.contains(&local) && other < shape.n && k < FAR_DEPTH);
        let p = parts(shape);
        let each = if square.is_bulk() { shape.far_bulk } else { REMOTE_SLOT_BYTES };
        p.squares[square as usize] + lane_index(shape, local, other, k) * each
    }

    /// The bulk area of `square` for batch `k` of (`local` thread of this
    /// host, `other`).
    pub(crate) fn far_bulk(&self, square: Square, local: usize, other: usize, k: usize) -> *mut u8 {
        assert!(square.is_bulk() && self.shape.far_bulk > 0);
        let off = Region::square_offset(&self.shape, square, local, other, k);
        assert!(off + self.shape.far_bulk <= self.parts.len);
        // SAFETY: inside the region, per the layout.
        unsafe { self.base.as_ptr().add(off) }
    }

    /// A zeroed region in this process's heap (no bulk areas: within a
    /// process large values move by pointer).
    pub(crate) fn private(n: usize) -> Region {
        let shape = Shape::single(n);
        let parts = parts(&shape);
        let layout = Layout::from_size_align(parts.total, 4096).expect("region layout");
        // SAFETY: the layout has a nonzero size.
        let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        let r = Region { base, shape, parts, backing: Backing::Heap(layout) };
        r.init();
        r
    }

    /// A region over a shared mapping of `size_for(shape)` bytes.
    ///
    /// # Safety
    /// `base` must be a mapping of at least `size_for(shape)` bytes, zeroed
    /// when first created, that stays mapped until the region is dropped
    /// (which unmaps it), and that every process of the host maps the same
    /// way.
    #[cfg_attr(miri, allow(dead_code))]
    pub(crate) unsafe fn from_mapping(base: NonNull<u8>, shape: Shape, first: bool) -> Region {
        let r = Region { base, parts: parts(&shape), shape, backing: Backing::Mapped };
        if first {
            r.init();
        }
        r
    }

    fn init(&self) {
        let h = self.header();
        h.threads.store(self.shape.n as u64, std::sync::atomic::Ordering::Relaxed);
        h.magic.store(MAGIC, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn threads(&self) -> usize {
        self.shape.n
    }

    pub(crate) fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The region as the fabric registers it: all of it but the shared
    /// heap, which never leaves the host.
    pub(crate) fn bytes(&self) -> (*mut u8, usize) {
        (self.base.as_ptr(), self.parts.len)
    }

    /// `square`'s slot for batch `k` of (`local` thread of this host,
    /// `other` thread).
    #[inline]
    pub(crate) fn remote_slot(&self, square: Square, local: usize, other: usize, k: usize) -> &RemoteSlot {
        debug_assert!(self.shape.host.contains(&local) && other < self.shape.n && !square.is_bulk());
        assert!(k < FAR_DEPTH);
        let off = self.parts.squares[square as usize] + lane_index(&self.shape, local, other, k) * REMOTE_SLOT_BYTES;
        assert!(self.shape.multi_host() && off + REMOTE_SLOT_BYTES <= self.parts.len);
        // SAFETY: inside the region, 64-byte aligned (square starts are
        // page-aligned, slots a multiple of 64 bytes), zero-initialised: a
        // valid `RemoteSlot` of atomics.
        unsafe { &*self.base.as_ptr().add(off).cast::<RemoteSlot>() }
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the header sits at offset 0 of a live, zero-initialised
        // region; all of its fields are atomics.
        unsafe { &*self.base.as_ptr().cast::<Header>() }
    }

    #[inline]
    pub(crate) fn doorbell(&self, t: usize) -> &Doorbell {
        assert!(t < self.shape.n);
        // SAFETY: in range, aligned (offsets are multiples of 128) and
        // zero-initialised; all fields are atomics.
        unsafe { &*self.base.as_ptr().add(self.parts.doorbells).cast::<Doorbell>().add(t) }
    }

    /// Size of each bulk area (0 in a one-process region).
    pub(crate) fn bulk_bytes(&self) -> usize {
        self.parts.bulk_bytes
    }

    /// The bulk area `client` writes large requests for `trustee` into
    /// (`response == false`), or `trustee` large responses for `client`.
    /// Owned like the matching slot: by its writer until published.
    pub(crate) fn bulk(&self, client: usize, trustee: usize, response: bool) -> *mut u8 {
        let h = &self.shape.host;
        assert!(self.parts.bulk_bytes > 0 && h.contains(&client) && h.contains(&trustee));
        let hn = h.len();
        let i = (response as usize * hn + (client - h.start)) * hn + (trustee - h.start);
        // SAFETY: `i < 2 * h * h`, so the area lies inside the region.
        unsafe { self.base.as_ptr().add(self.parts.bulk + i * self.parts.bulk_bytes) }
    }

    /// A view of the slot matrix in this region.
    pub(crate) fn matrix(&self) -> Matrix {
        let at = |off: usize| {
            // SAFETY: the offsets are inside the region.
            unsafe { self.base.as_ptr().add(off) }
        };
        // SAFETY: the four arrays lie inside the region, zeroed (a valid
        // empty slot), properly aligned, and live as long as the region,
        // which outlives every `Matrix` taken from it (both sit in `Shared`).
        unsafe {
            Matrix::from_raw(
                self.shape.host.clone(),
                at(self.parts.req_primary).cast(),
                at(self.parts.req_overflow).cast(),
                at(self.parts.resp_primary).cast(),
                at(self.parts.resp_overflow).cast(),
            )
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        match self.backing {
            // SAFETY: allocated in `private` with this layout.
            Backing::Heap(layout) => unsafe { std::alloc::dealloc(self.base.as_ptr(), layout) },
            // Blocks of the shared heap may outlive the runtime (a
            // `SharedBytes` returned from it): once any was handed out, the
            // mapping stays until the process ends.
            Backing::Mapped if crate::channel::heap::ever_used() => {}
            Backing::Mapped => {
                #[cfg(not(miri))]
                // SAFETY: the mapping was handed to us by `from_mapping`.
                unsafe {
                    libc::munmap(self.base.as_ptr().cast(), self.parts.total);
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_batch_slot_between_hosts_has_its_own_place_in_the_region() {
        let shape = Shape { n: 6, host: 2..4, bulk_bytes: 8192, far_bulk: 64 << 10 };
        let size = Region::size_for(&shape);
        let squares = [
            Square::RequestLanding,
            Square::ResponseLanding,
            Square::RequestStaging,
            Square::ResponseStaging,
            Square::RequestBulkLanding,
            Square::ResponseBulkLanding,
            Square::RequestBulkStaging,
            Square::ResponseBulkStaging,
        ];
        let mut areas = Vec::new();
        for square in squares {
            let each = if square.is_bulk() { shape.far_bulk } else { REMOTE_SLOT_BYTES };
            for local in shape.host.clone() {
                for other in 0..shape.n {
                    for k in 0..FAR_DEPTH {
                        let at = Region::square_offset(&shape, square, local, other, k);
                        assert!(at + each <= size, "{square:?} ({local}, {other}, {k}) past the region");
                        areas.push((at, at + each));
                    }
                }
            }
        }
        areas.sort_unstable();
        for w in areas.windows(2) {
            assert!(w[0].1 <= w[1].0, "areas {:?} and {:?} overlap", w[0], w[1]);
        }
        assert_eq!(areas.len(), 8 * 2 * 6 * FAR_DEPTH);
    }
}
