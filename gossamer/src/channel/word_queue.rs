//! A FIFO of 8-byte words that reuses its buffer: the client-side queue of
//! encoded requests waiting for a free slot, and of `then` callbacks waiting
//! for their responses. After warm-up it does not allocate.

use super::slot::Word;

#[derive(Default)]
pub(crate) struct WordQueue {
    buf: Vec<Word>,
    head: usize,
}

impl WordQueue {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head == self.buf.len()
    }

    /// Appends `n` uninitialised words and returns where they start. The
    /// pointer is valid until the next call that changes the queue.
    #[inline]
    pub(crate) fn alloc(&mut self, n: usize) -> *mut Word {
        if self.buf.capacity() - self.buf.len() < n {
            self.make_room(n);
        }
        let at = self.buf.len();
        // SAFETY: `make_room` left capacity for `n` more words, and words
        // are `MaybeUninit`, which needs no initialisation.
        unsafe {
            self.buf.set_len(at + n);
            self.buf.as_mut_ptr().add(at)
        }
    }

    #[cold]
    fn make_room(&mut self, n: usize) {
        make_room(&mut self.buf, &mut self.head, n);
    }

    /// The first live word, if any. Valid until the queue changes.
    #[inline]
    pub(crate) fn front(&self) -> Option<*const Word> {
        // SAFETY: `head < len` when the queue is not empty.
        (!self.is_empty()).then(|| unsafe { self.buf.as_ptr().add(self.head) })
    }

    /// Drops `n` words from the front (their contents were moved out).
    #[inline]
    pub(crate) fn pop(&mut self, n: usize) {
        debug_assert!(self.head + n <= self.buf.len());
        self.head += n;
        if self.head == self.buf.len() {
            self.head = 0;
            // SAFETY: setting the length to zero only forgets words, which
            // are `MaybeUninit` and own nothing.
            unsafe { self.buf.set_len(0) };
        }
    }
}

/// Makes room for `n` more elements in a queue whose live elements are
/// `buf[*head..]`: slides them to the front when the consumed prefix is at
/// least as long as they are (so each element slides at most once on
/// average), and grows the buffer otherwise. Sliding whenever room ran short
/// would move every live element each time a few were consumed: megabytes
/// per batch when many large payloads wait.
pub(super) fn make_room<T: Copy>(buf: &mut Vec<T>, head: &mut usize, n: usize) {
    if *head > 0 && *head >= buf.len() - *head {
        buf.copy_within(*head.., 0);
        buf.truncate(buf.len() - *head);
        *head = 0;
    }
    buf.reserve(n);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;

    #[test]
    fn fifo_order_survives_compaction_and_growth() {
        let mut q = WordQueue::default();
        let mut expect = std::collections::VecDeque::new();
        let mut next = 0u64;
        for round in 0..200 {
            for _ in 0..(round % 7) {
                let p = q.alloc(2);
                // SAFETY: two fresh words were just allocated.
                unsafe {
                    *p = MaybeUninit::new(next);
                    *p.add(1) = MaybeUninit::new(!next);
                }
                expect.push_back(next);
                next += 1;
            }
            for _ in 0..(round % 5) {
                let Some(f) = q.front() else { break };
                // SAFETY: the front two words were written above.
                let (a, b) = unsafe { ((*f).assume_init(), (*f.add(1)).assume_init()) };
                assert_eq!(Some(a), expect.pop_front());
                assert_eq!(b, !a);
                q.pop(2);
            }
        }
        assert_eq!(q.is_empty(), expect.is_empty());
    }
}
