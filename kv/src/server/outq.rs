//! A connection's replies, kept in request order.
//!
//! Requests to different shards complete in any order (one to the local
//! shard even completes at once), but a memcached client expects replies in
//! the order it sent the requests. Each request takes a numbered slot; a
//! completed slot is rendered into the output buffer once every earlier
//! slot has been.
//!
//! Replies are written a batch at a time: a batch is everything one turn
//! of the connection parsed (all the requests of one read, and all the
//! answers of a multi-key get up to its `END`). The bytes of a batch become
//! writable only once its last slot is rendered, so that the batch leaves
//! with one `write`, as memcached writes a reply, instead of one segment
//! per shard that answered. A batch whose replies are all ready when the
//! turn ends is writable at once: nothing waits for a timer. Only when the
//! rendered bytes pass [`HIGH_WATER`] is an unfinished batch written, so
//! that a huge reply does not pile up in memory.
//!
//! The queue also keeps the numbers that bound a connection's memory (see
//! [`super::conn`]): slots waiting, and the bytes of replies answered but
//! not written (rendered, or held behind an earlier slot). Written bytes
//! are dropped from the front of the buffer as the socket takes them, so a
//! client that keeps reading, however slowly, never makes the buffer grow
//! past what is unwritten.

use std::collections::VecDeque;

use crate::protocol::binary::reply as bin_reply;
use crate::protocol::binary::BinCtx;
use crate::protocol::text::reply as text_reply;
use crate::protocol::text::TextKind;
use crate::store::Outcome;

/// Rendered bytes past which an unfinished batch is written anyway.
pub const HIGH_WATER: usize = 256 * 1024;
/// Written bytes at the front of the buffer worth moving the rest down
/// for (when they are also at least half of it).
const COMPACT_AT: usize = 64 * 1024;

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
    /// The same, for a client that broke the protocol (an HTTP request, an
    /// overlong line, a bad binary header): memcached logs such a close as
    /// an error.
    CloseError,
    /// A reply, and something to do when it is rendered: in request order
    /// (log lines for watchers).
    Then(Box<Reply>, OnRender),
}

/// What to do when a reply is rendered.
pub struct OnRender(pub Box<dyn FnOnce()>);

impl std::fmt::Debug for OnRender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnRender")
    }
}

/// The ordered replies of one connection.
#[derive(Debug, Default)]
pub struct OutQueue {
    base: u64,
    slots: VecDeque<Option<Reply>>,
    /// Where the batches with unrendered slots end (the slot number after
    /// their last), oldest first.
    batches: VecDeque<u64>,
    /// Rendered bytes not yet written.
    buf: Vec<u8>,
    /// How much of `buf` has been written.
    written: usize,
    /// How much of `buf` holds finished batches (or has been written).
    finished: usize,
    /// A `Close` reply has been reached.
    pub close: bool,
    /// It was a `CloseError`.
    pub close_error: bool,
    /// Replies taken so far (reserved or pushed).
    issued: u64,
    /// `issued` at the last [`OutQueue::mark_flushed`].
    flushed: u64,
    /// Bytes of the completed replies that wait behind an earlier slot.
    held: usize,
}

/// About how many bytes `r` keeps in memory until it is rendered.
fn held_bytes(r: &Reply) -> usize {
    use crate::store::Outcome;
    match r {
        Reply::Outcome(Outcome::Found(hit), _) => hit.key.len() + hit.data.len(),
        Reply::Outcome(Outcome::Missing(b) | Outcome::Meta(b), _) | Reply::Bytes(b) => b.len(),
        Reply::Then(r, _) => held_bytes(r),
        _ => 0,
    }
}

impl OutQueue {
    /// Takes the next slot, to be completed later.
    pub fn reserve(&mut self) -> u64 {
        self.issued += 1;
        self.slots.push_back(None);
        self.base + self.slots.len() as u64 - 1
    }

    /// Adds a reply that is ready now. Returns whether it was rendered.
    pub fn push(&mut self, reply: Reply) -> bool {
        self.issued += 1;
        if self.slots.is_empty() {
            self.render(reply);
            true
        } else {
            self.held += held_bytes(&reply);
            self.slots.push_back(Some(reply));
            false
        }
    }

    /// Completes slot `seq`. Returns whether anything was rendered.
    pub fn complete(&mut self, seq: u64, reply: Reply) -> bool {
        let i = (seq - self.base) as usize;
        debug_assert!(self.slots[i].is_none(), "slot completed twice");
        self.held += held_bytes(&reply);
        self.slots[i] = Some(reply);
        let mut rendered = false;
        while let Some(Some(_)) = self.slots.front() {
            let r = self.slots.pop_front().flatten().expect("checked above");
            self.held -= held_bytes(&r);
            self.base += 1;
            self.render(r);
            rendered = true;
            while self.batches.front().is_some_and(|&end| end <= self.base) {
                self.batches.pop_front();
                self.finished = self.buf.len();
            }
        }
        rendered
    }

    /// Ends the current batch: everything pushed or reserved so far. Its
    /// bytes become writable once all its slots are rendered (at once if
    /// they already are).
    pub fn end_batch(&mut self) {
        self.mark_flushed();
        if self.slots.is_empty() {
            self.batches.clear();
            self.finished = self.buf.len();
        } else {
            let end = self.base + self.slots.len() as u64;
            if self.batches.back() != Some(&end) {
                self.batches.push_back(end);
            }
        }
    }

    /// The bytes to write now: those of finished batches, or everything
    /// rendered once that passes [`HIGH_WATER`].
    pub fn writable(&self) -> &[u8] {
        if self.unwritten() >= HIGH_WATER {
            &self.buf[self.written..]
        } else {
            &self.buf[self.written..self.finished]
        }
    }

    /// Slots not yet rendered.
    pub fn waiting(&self) -> usize {
        self.slots.len()
    }

    /// Bytes rendered but not written.
    pub fn unwritten(&self) -> usize {
        self.buf.len() - self.written
    }

    /// Bytes of replies answered and not yet written: rendered, or
    /// completed and held behind an earlier slot.
    pub fn answered(&self) -> usize {
        self.unwritten() + self.held
    }

    /// Notes that memcached would have written out every reply so far
    /// (it does at `mn` and once it has parsed all the input it read).
    pub fn mark_flushed(&mut self) {
        self.flushed = self.issued;
    }

    /// Whether replies were taken since the last
    /// [`OutQueue::mark_flushed`]: what memcached calls having a response
    /// stack (a reply suppressed by `noreply` or `q` counts too).
    pub fn has_stack(&self) -> bool {
        self.issued > self.flushed
    }

    /// Nothing waiting and nothing to write.
    pub fn is_idle(&self) -> bool {
        self.slots.is_empty() && self.unwritten() == 0
    }

    /// Marks `n` more bytes written.
    pub fn consume(&mut self, n: usize) {
        self.written += n;
        debug_assert!(self.written <= self.buf.len());
        self.finished = self.finished.max(self.written);
        if self.written == self.buf.len() {
            self.buf.clear();
            self.written = 0;
            self.finished = 0;
        } else if self.written >= COMPACT_AT && self.written * 2 >= self.buf.len() {
            // Drop what was written: the rest moves down (it is at most
            // as long as what goes), and the buffer never holds more than
            // is unwritten plus what one write took.
            self.buf.drain(..self.written);
            self.finished -= self.written;
            self.written = 0;
        }
    }

    /// Frees the output buffer if it has grown past `max` bytes and holds
    /// less than a quarter of that.
    pub fn trim(&mut self, max: usize) {
        if self.buf.capacity() > max && self.unwritten() < max / 4 {
            let mut buf = Vec::with_capacity(self.unwritten());
            buf.extend_from_slice(&self.buf[self.written..]);
            self.finished -= self.written;
            self.written = 0;
            self.buf = buf;
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
            Reply::CloseError => {
                self.close = true;
                self.close_error = true;
            }
            Reply::Then(r, then) => {
                (then.0)();
                self.render(*r);
            }
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
    fn a_flush_mark_hides_earlier_replies() {
        let mut q = OutQueue::default();
        assert!(!q.has_stack());
        q.push(Reply::Static(b"a"));
        assert!(q.has_stack());
        q.mark_flushed();
        assert!(!q.has_stack(), "everything before the mark counts as written");
        let s = q.reserve();
        assert!(q.has_stack());
        q.complete(s, Reply::Nothing);
        assert!(q.has_stack(), "a suppressed reply counts");
        q.end_batch();
        assert!(!q.has_stack(), "the end of a batch writes everything out");
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

    #[test]
    fn a_batch_is_writable_once_whole() {
        let mut q = OutQueue::default();
        // get a b c: `a` answered at once, `b` and `c` later.
        let a = q.reserve();
        q.complete(a, Reply::Static(b"A "));
        let b = q.reserve();
        let c = q.reserve();
        q.push(Reply::Static(b"END "));
        assert_eq!(q.writable(), b"", "the batch is still being parsed");
        q.end_batch();
        assert_eq!(q.writable(), b"");
        q.complete(c, Reply::Static(b"C "));
        assert_eq!(q.writable(), b"");
        q.complete(b, Reply::Static(b"B "));
        assert_eq!(q.writable(), b"A B C END ");
        q.consume(4);
        assert_eq!(q.writable(), b"C END ");
        q.consume(6);
        assert!(q.is_idle());
        assert_eq!(q.writable(), b"");
    }

    #[test]
    fn a_ready_batch_is_writable_at_once() {
        let mut q = OutQueue::default();
        let s = q.reserve();
        q.complete(s, Reply::Static(b"x"));
        q.push(Reply::Static(b"END"));
        q.end_batch();
        assert_eq!(q.writable(), b"xEND");
    }

    #[test]
    fn an_unfinished_batch_does_not_hold_back_an_earlier_one() {
        let mut q = OutQueue::default();
        let s1 = q.reserve();
        q.push(Reply::Static(b"1"));
        q.end_batch();
        let s2 = q.reserve();
        q.push(Reply::Static(b"2"));
        q.end_batch();
        let s3 = q.reserve();
        q.end_batch();
        q.complete(s1, Reply::Static(b"a"));
        assert_eq!(q.writable(), b"a1");
        q.consume(1);
        q.complete(s3, Reply::Static(b"c"));
        assert_eq!(q.writable(), b"1");
        q.complete(s2, Reply::Static(b"b"));
        assert_eq!(q.writable(), b"1b2c");
        // A new batch after a written-out one.
        q.consume(4);
        let s4 = q.reserve();
        q.push(Reply::Static(b"3"));
        q.end_batch();
        assert_eq!(q.writable(), b"");
        q.complete(s4, Reply::Static(b"d"));
        assert_eq!(q.writable(), b"d3");
    }

    #[test]
    fn past_the_high_water_mark_an_unfinished_batch_is_written() {
        let mut q = OutQueue::default();
        let big = vec![b'v'; HIGH_WATER];
        q.push(Reply::Bytes(big.clone()));
        let s = q.reserve();
        q.push(Reply::Static(b"END"));
        q.end_batch();
        assert_eq!(q.writable(), &big[..]);
        q.consume(HIGH_WATER - 10);
        assert_eq!(q.writable(), b"", "below the mark again: wait for the batch");
        q.complete(s, Reply::Static(b"x"));
        assert_eq!(q.writable(), [&big[HIGH_WATER - 10..], &b"xEND"[..]].concat());
        q.consume(14);
        assert!(q.is_idle());
    }

    #[test]
    fn close_waits_for_its_batch() {
        let mut q = OutQueue::default();
        let s = q.reserve();
        q.push(Reply::Close);
        q.end_batch();
        assert!(!q.close);
        q.complete(s, Reply::Static(b"x"));
        assert!(q.close);
        assert_eq!(q.writable(), b"x");
    }

    #[test]
    fn a_reader_that_keeps_up_partly_does_not_grow_the_buffer() {
        // The client takes part of the output while more is rendered:
        // the buffer holds what is unwritten, not everything since it was
        // last empty.
        let mut q = OutQueue::default();
        let reply = vec![b'r'; 1000];
        for _ in 0..10_000 {
            q.push(Reply::Bytes(reply.clone()));
            q.end_batch();
            let n = q.writable().len().min(900);
            q.consume(n);
            let bound = 2 * q.unwritten().max(COMPACT_AT) + 900;
            assert!(q.buf.len() <= bound, "{} bytes kept for {} unwritten", q.buf.len(), q.unwritten());
        }
        assert_eq!(q.unwritten(), 10_000 * 100);
        assert!(q.writable().iter().all(|&b| b == b'r'));
    }

    #[test]
    fn held_replies_count_as_answered() {
        let mut q = OutQueue::default();
        let s1 = q.reserve();
        let s2 = q.reserve();
        q.complete(s2, Reply::Bytes(vec![0; 500]));
        assert_eq!(q.answered(), 500, "held behind slot 1");
        assert_eq!(q.unwritten(), 0);
        q.complete(s1, Reply::Static(b"ab"));
        assert_eq!((q.answered(), q.unwritten()), (502, 502));
        q.consume(502);
        assert_eq!(q.answered(), 0);
    }

    #[test]
    fn trim_keeps_the_unwritten_tail() {
        let mut q = OutQueue::default();
        q.push(Reply::Bytes(vec![b'a'; 1 << 20]));
        q.push(Reply::Static(b"tail"));
        q.end_batch();
        q.consume((1 << 20) - 2);
        q.trim(1 << 16);
        assert!(q.buf.capacity() < 1 << 16);
        assert_eq!(q.writable(), b"aatail");
    }
}
