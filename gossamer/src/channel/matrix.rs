//! The slots of a host: for every (client thread, trustee thread) pair of
//! the host one request slot and one response slot, laid out so that a
//! trustee scans its request flags, and a client its response flags, in
//! contiguous memory. The memory belongs to a region (see
//! `fabric::shm::region`); pairs across hosts use the region's slots between
//! hosts instead.

use std::ops::Range;

use super::slot::{Overflow, Primary, Slot};

pub(crate) struct Matrix {
    /// The host's threads (global ids); `n` of them.
    host: Range<usize>,
    n: usize,
    /// Indexed `[trustee * n + client]`.
    req_primary: *const Primary,
    req_overflow: *const Overflow,
    /// Indexed `[client * n + trustee]`.
    resp_primary: *const Primary,
    resp_overflow: *const Overflow,
}

// SAFETY: a view of slots, whose accesses follow the slot protocol.
unsafe impl Send for Matrix {}
// SAFETY: as above.
unsafe impl Sync for Matrix {}

impl Matrix {
    /// # Safety
    /// Each pointer must address `n * n` zero-initialised (or protocol-
    /// maintained) blocks that outlive the matrix.
    pub(crate) unsafe fn from_raw(
        host: Range<usize>,
        req_primary: *const Primary,
        req_overflow: *const Overflow,
        resp_primary: *const Primary,
        resp_overflow: *const Overflow,
    ) -> Self {
        let n = host.len();
        Matrix { host, n, req_primary, req_overflow, resp_primary, resp_overflow }
    }

    /// The slot `client` writes requests for `trustee` into.
    #[inline]
    pub(crate) fn request(&self, client: usize, trustee: usize) -> Slot<'_> {
        let (c, t) = (client.wrapping_sub(self.host.start), trustee.wrapping_sub(self.host.start));
        assert!(c < self.n && t < self.n);
        let i = t * self.n + c;
        // SAFETY: `i < n * n`, inside the arrays per `from_raw`.
        unsafe { Slot { primary: &*self.req_primary.add(i), overflow: &*self.req_overflow.add(i) } }
    }

    /// The slot `trustee` writes responses for `client` into.
    #[inline]
    pub(crate) fn response(&self, client: usize, trustee: usize) -> Slot<'_> {
        let (c, t) = (client.wrapping_sub(self.host.start), trustee.wrapping_sub(self.host.start));
        assert!(c < self.n && t < self.n);
        let i = c * self.n + t;
        // SAFETY: as in `request`.
        unsafe { Slot { primary: &*self.resp_primary.add(i), overflow: &*self.resp_overflow.add(i) } }
    }
}
