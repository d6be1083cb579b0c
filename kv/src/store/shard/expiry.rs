//! A shard's expiry queue: the keys of its items that have an expiration
//! time, in the order they come due, so that the shard's background
//! reclaim (memcached's LRU maintainer) finds expired items without
//! walking the table.
//!
//! An entry is a hint, checked against the table when it comes due: the
//! item may be gone, replaced, or given a later time since. A store
//! enqueues its item's time, and so does every change of an item's
//! expiration time; an entry that finds its item due later is enqueued
//! again for that time. Entries left behind by replaced or deleted items
//! are dropped when they come due, and the whole queue is rebuilt from the
//! table when such entries outnumber the items (so it never holds more
//! than about twice as many entries as the shard holds items).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Entries kept before a rebuild is considered.
const SLACK: usize = 1024;

/// The queue (see the module documentation).
#[derive(Default)]
pub struct Expiry {
    heap: BinaryHeap<Reverse<(u32, Box<[u8]>)>>,
}

impl Expiry {
    /// Notes that the item under `key` expires at relative time `at`
    /// (0: never, nothing to note).
    pub fn schedule(&mut self, key: &[u8], at: u32) {
        if at != 0 {
            self.heap.push(Reverse((at, key.into())));
        }
    }

    /// Takes the next entry due at relative time `now` (its time at or
    /// before `now`), if any.
    pub fn next_due(&mut self, now: u32) -> Option<Box<[u8]>> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse((_, k))| k),
            _ => None,
        }
    }

    /// Entries held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether stale entries outnumber the `items` the shard holds.
    pub fn wants_rebuild(&self, items: usize) -> bool {
        self.heap.len() > 2 * items + SLACK
    }

    /// Replaces the entries with `live`: (key, expiration time) of every
    /// item held.
    pub fn rebuild<'a>(&mut self, live: impl Iterator<Item = (&'a [u8], u32)>) {
        self.heap.clear();
        for (k, at) in live {
            self.schedule(k, at);
        }
        self.heap.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_due_in_time_order() {
        let mut q = Expiry::default();
        q.schedule(b"b", 5);
        q.schedule(b"never", 0);
        q.schedule(b"a", 3);
        assert_eq!(q.len(), 2);
        assert_eq!(q.next_due(2), None);
        assert_eq!(q.next_due(5).as_deref(), Some(&b"a"[..]));
        assert_eq!(q.next_due(4), None);
        assert_eq!(q.next_due(5).as_deref(), Some(&b"b"[..]));
        assert_eq!(q.next_due(u32::MAX), None);
    }

    #[test]
    fn rebuilds_keep_only_what_is_given() {
        let mut q = Expiry::default();
        for i in 0..3000u32 {
            q.schedule(&i.to_be_bytes(), 10);
        }
        assert!(q.wants_rebuild(10));
        let keys = [b"x".as_slice(), b"y".as_slice()];
        q.rebuild(keys.iter().map(|k| (*k, 7)));
        assert_eq!(q.len(), 2);
        assert!(!q.wants_rebuild(2));
    }
}
