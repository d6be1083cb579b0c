//! The slots of a runtime: for every (client thread, trustee thread) pair one
//! request slot and one response slot, laid out so that a trustee scans its
//! request flags, and a client its response flags, in contiguous memory.

use super::slot::{Overflow, Primary, Slot};

pub(crate) struct Matrix {
    n: usize,
    /// Indexed `[trustee * n + client]`.
    req_primary: Box<[Primary]>,
    req_overflow: Box<[Overflow]>,
    /// Indexed `[client * n + trustee]`.
    resp_primary: Box<[Primary]>,
    resp_overflow: Box<[Overflow]>,
}

fn blocks<T: Default>(n: usize) -> Box<[T]> {
    (0..n).map(|_| T::default()).collect()
}

impl Matrix {
    pub(crate) fn new(n: usize) -> Self {
        Matrix {
            n,
            req_primary: blocks(n * n),
            req_overflow: blocks(n * n),
            resp_primary: blocks(n * n),
            resp_overflow: blocks(n * n),
        }
    }

    /// The slot `client` writes requests for `trustee` into.
    #[inline]
    pub(crate) fn request(&self, client: usize, trustee: usize) -> Slot<'_> {
        let i = trustee * self.n + client;
        Slot { primary: &self.req_primary[i], overflow: &self.req_overflow[i] }
    }

    /// The slot `trustee` writes responses for `client` into.
    #[inline]
    pub(crate) fn response(&self, client: usize, trustee: usize) -> Slot<'_> {
        let i = client * self.n + trustee;
        Slot { primary: &self.resp_primary[i], overflow: &self.resp_overflow[i] }
    }
}
