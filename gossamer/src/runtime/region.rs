//! The memory every worker of a program shares: a header with the
//! program-wide flags, one doorbell per thread (sleep flag, futex word,
//! shutdown bookkeeping), and the slot matrix. In one process it is plain
//! zeroed heap memory; across processes it is one shared-memory mapping that
//! every process maps, so that writing a slot of another process is a plain
//! store into the mapping.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::channel::matrix::Matrix;
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

/// Byte offsets of the parts of a region for `n` threads.
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
    len: usize,
}

/// Bulk area size per pair and direction for a program of `n` threads:
/// 1 GiB of (sparse) address space over all areas, at most 16 MiB each.
pub(crate) fn bulk_bytes_for(n: usize) -> usize {
    if let Some(b) = std::env::var("GOSSAMER_BULK_BYTES").ok().and_then(|v| v.parse::<usize>().ok()) {
        return b.next_multiple_of(4096);
    }
    ((1usize << 30) / (2 * n * n)).clamp(2 << 20, 16 << 20).next_multiple_of(4096)
}

fn parts(n: usize, bulk_bytes: usize) -> Parts {
    let h = std::mem::size_of::<Header>().next_multiple_of(4096);
    let d = n * std::mem::size_of::<Doorbell>();
    let pairs = n * n;
    let p = pairs * std::mem::size_of::<Primary>();
    let o = pairs * std::mem::size_of::<Overflow>();
    let doorbells = h;
    let req_primary = (doorbells + d).next_multiple_of(4096);
    let req_overflow = req_primary + p;
    let resp_primary = req_overflow + o;
    let resp_overflow = resp_primary + p;
    let bulk = (resp_overflow + o).next_multiple_of(4096);
    let len = bulk + 2 * pairs * bulk_bytes;
    Parts { doorbells, req_primary, req_overflow, resp_primary, resp_overflow, bulk, bulk_bytes, len }
}

enum Backing {
    Heap(Layout),
    /// A mapping the region unmaps when dropped.
    #[cfg_attr(miri, allow(dead_code))]
    Mapped,
}

pub(crate) struct Region {
    base: NonNull<u8>,
    n: usize,
    parts: Parts,
    backing: Backing,
}

// SAFETY: the region's contents are atomics and slots whose accesses follow
// the slot protocol; the region itself is just an address range.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// Bytes a region for `n` threads with `bulk_bytes` bulk areas takes.
    pub(crate) fn size_for(n: usize, bulk_bytes: usize) -> usize {
        parts(n, bulk_bytes).len
    }

    /// A zeroed region in this process's heap (no bulk areas: within a
    /// process large values move by pointer).
    pub(crate) fn private(n: usize) -> Region {
        let parts = parts(n, 0);
        let layout = Layout::from_size_align(parts.len, 4096).expect("region layout");
        // SAFETY: the layout has a nonzero size.
        let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        let r = Region { base, n, parts, backing: Backing::Heap(layout) };
        r.init();
        r
    }

    /// A region over a shared mapping of `size_for(n)` bytes.
    ///
    /// # Safety
    /// `base` must be a mapping of at least `size_for(n)` bytes, zeroed when
    /// first created, that stays mapped until the region is dropped (which
    /// unmaps it), and that every process of the program maps the same way.
    #[cfg_attr(miri, allow(dead_code))]
    pub(crate) unsafe fn from_mapping(base: NonNull<u8>, n: usize, bulk_bytes: usize, first: bool) -> Region {
        let r = Region { base, n, parts: parts(n, bulk_bytes), backing: Backing::Mapped };
        if first {
            r.init();
        }
        r
    }

    fn init(&self) {
        let h = self.header();
        h.threads.store(self.n as u64, std::sync::atomic::Ordering::Relaxed);
        h.magic.store(MAGIC, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn threads(&self) -> usize {
        self.n
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the header sits at offset 0 of a live, zero-initialised
        // region; all of its fields are atomics.
        unsafe { &*self.base.as_ptr().cast::<Header>() }
    }

    #[inline]
    pub(crate) fn doorbell(&self, t: usize) -> &Doorbell {
        assert!(t < self.n);
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
        assert!(self.parts.bulk_bytes > 0 && client < self.n && trustee < self.n);
        let i = (response as usize * self.n + client) * self.n + trustee;
        // SAFETY: `i < 2 * n * n`, so the area lies inside the region.
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
                self.n,
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
            Backing::Mapped => {
                #[cfg(not(miri))]
                // SAFETY: the mapping was handed to us by `from_mapping`.
                unsafe {
                    libc::munmap(self.base.as_ptr().cast(), self.parts.len);
                }
            }
        }
    }
}
