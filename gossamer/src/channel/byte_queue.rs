//! A FIFO of bytes that reuses its buffer: the client-side queue of request
//! payloads waiting for the pair's bulk area. Payloads go in whole and come
//! out in the same order, each by its length (which its request records);
//! after warm-up nothing is allocated, where a buffer per payload cost an
//! allocation and a free per request.

#[derive(Default)]
pub(crate) struct ByteQueue {
    buf: Vec<u8>,
    head: usize,
}

impl ByteQueue {
    /// Bytes waiting.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Appends `bytes`.
    #[inline]
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.buf.capacity() - self.buf.len() < bytes.len() {
            self.make_room(bytes.len());
        }
        self.buf.extend_from_slice(bytes);
    }

    #[cold]
    fn make_room(&mut self, n: usize) {
        super::word_queue::make_room(&mut self.buf, &mut self.head, n);
    }

    /// The first `n` waiting bytes. Panics if fewer are waiting.
    #[inline]
    pub(crate) fn front(&self, n: usize) -> &[u8] {
        &self.buf[self.head..self.head + n]
    }

    /// Drops the first `n` waiting bytes.
    #[inline]
    pub(crate) fn pop(&mut self, n: usize) {
        assert!(n <= self.len(), "gossamer: popped more payload bytes than were queued");
        self.head += n;
        if self.head == self.buf.len() {
            self.head = 0;
            self.buf.clear();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn payloads_come_out_whole_and_in_order() {
        let mut q = ByteQueue::default();
        let mut expect = std::collections::VecDeque::new();
        let mut next = 0u8;
        let mut most = 0;
        for round in 0..300usize {
            for k in 0..(round % 5) {
                let p: Vec<u8> = (0..(round * 7 + k) % 300).map(|i| next.wrapping_add(i as u8)).collect();
                next = next.wrapping_add(13);
                q.push(&p);
                expect.push_back(p);
            }
            for _ in 0..(round % 4) {
                let Some(p) = expect.pop_front() else { break };
                assert_eq!(q.front(p.len()), &p[..]);
                q.pop(p.len());
            }
            assert_eq!(q.len(), expect.iter().map(Vec::len).sum::<usize>());
            most = most.max(q.len());
        }
        // The buffer is reused: it never grows far beyond the most bytes
        // waiting at once.
        assert!(q.buf.capacity() <= 4 * most + 1024, "capacity {} for at most {most} bytes", q.buf.capacity());
    }
}
