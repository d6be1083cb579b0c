//! A connection's replies, kept in request order.
//!
//! Requests to different shards complete in any order (one to the local
//! shard even completes at once), but a memcached client expects replies in
//! the order it sent the requests. Each request takes a numbered slot; a
//! completed slot is rendered into the output buffer once every earlier
//! slot has been.

use std::collections::VecDeque;

use crate::protocol::binary::reply as bin_reply;
use crate::protocol::binary::BinCtx;
use crate::protocol::text::reply as text_reply;
use crate::protocol::text::TextKind;
use crate::store::Outcome;

/// How to answer a shard outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctx {
    /// Text protocol, a command of this kind.
    Text(TextKind),
    /// Text protocol with `noreply`: say nothing.
    Silent,
    /// Binary protocol.
    Binary(BinCtx),
}

/// One reply.
#[derive(Debug)]
pub enum Reply {
    /// A shard's outcome, rendered by protocol.
    Outcome(Outcome, Ctx),
    /// Fixed bytes.
    Static(&'static [u8]),
    /// Bytes built elsewhere.
    Bytes(Vec<u8>),
    /// Nothing.
    Nothing,
    /// Close the connection once everything before has been sent.
    Close,
}

/// The ordered replies of one connection.
#[derive(Debug, Default)]
pub struct OutQueue {
    base: u64,
    slots: VecDeque<Option<Reply>>,
    /// Rendered bytes not yet written.
    pub buf: Vec<u8>,
    /// How much of `buf` has been written.
    pub written: usize,
    /// A `Close` reply has been reached.
    pub close: bool,
}

impl OutQueue {
    /// Takes the next slot, to be completed later.
    pub fn reserve(&mut self) -> u64 {
        self.slots.push_back(None);
        self.base + self.slots.len() as u64 - 1
    }

    /// Adds a reply that is ready now. Returns whether it was rendered.
    pub fn push(&mut self, reply: Reply) -> bool {
        if self.slots.is_empty() {
            self.render(reply);
            true
        } else {
            self.slots.push_back(Some(reply));
            false
        }
    }

    /// Completes slot `seq`. Returns whether anything was rendered.
    pub fn complete(&mut self, seq: u64, reply: Reply) -> bool {
        let i = (seq - self.base) as usize;
        debug_assert!(self.slots[i].is_none(), "slot completed twice");
        self.slots[i] = Some(reply);
        let mut rendered = false;
        while let Some(Some(_)) = self.slots.front() {
            let r = self.slots.pop_front().flatten().expect("checked above");
            self.base += 1;
            self.render(r);
            rendered = true;
        }
        rendered
    }

    /// Slots not yet rendered.
    pub fn waiting(&self) -> usize {
        self.slots.len()
    }

    /// Bytes rendered but not written.
    pub fn unwritten(&self) -> usize {
        self.buf.len() - self.written
    }

    /// Nothing waiting and nothing to write.
    pub fn is_idle(&self) -> bool {
        self.slots.is_empty() && self.unwritten() == 0
    }

    /// Marks `n` more bytes written.
    pub fn consume(&mut self, n: usize) {
        self.written += n;
        if self.written == self.buf.len() {
            self.buf.clear();
            self.written = 0;
        }
    }

    fn render(&mut self, r: Reply) {
        if self.close {
            return;
        }
        match r {
            Reply::Outcome(o, Ctx::Text(k)) => text_reply::render(&o, k, &mut self.buf),
            Reply::Outcome(o, Ctx::Binary(c)) => bin_reply::render(&o, c, &mut self.buf),
            Reply::Outcome(_, Ctx::Silent) | Reply::Nothing => {}
            Reply::Static(s) => self.buf.extend_from_slice(s),
            Reply::Bytes(b) => self.buf.extend_from_slice(&b),
            Reply::Close => self.close = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_come_out_in_order() {
        let mut q = OutQueue::default();
        assert!(q.push(Reply::Static(b"a")));
        let s1 = q.reserve();
        let s2 = q.reserve();
        assert!(!q.push(Reply::Static(b"d")));
        assert!(!q.complete(s2, Reply::Static(b"c")));
        assert_eq!(q.buf, b"a");
        assert!(q.complete(s1, Reply::Static(b"b")));
        assert_eq!(q.buf, b"abcd");
        assert_eq!(q.waiting(), 0);
        q.consume(2);
        assert_eq!(q.unwritten(), 2);
        q.consume(2);
        assert!(q.is_idle());
    }

    #[test]
    fn close_stops_rendering() {
        let mut q = OutQueue::default();
        q.push(Reply::Static(b"x"));
        q.push(Reply::Close);
        q.push(Reply::Static(b"y"));
        assert!(q.close);
        assert_eq!(q.buf, b"x");
    }
}
