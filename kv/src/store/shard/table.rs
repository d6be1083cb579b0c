//! A shard's items: a hash table of keys to items, with every item on one
//! of four LRU lists (memcached's HOT, WARM, COLD and TEMP segments), each
//! kept most recently linked first.
//!
//! Items live in a slab of nodes indexed by position; the hash table maps
//! a key to its node, and each node links to its neighbours in its list,
//! so that a lookup, a move between lists and a removal are all O(1). The
//! table also keeps, per list, the items and bytes it holds, and per slab
//! class, the items of each list (for `stats items`). What goes on which
//! list, and when it moves, is the shard's policy (`segments.rs`).

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::store::item::Item;

/// One of memcached's LRU segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    /// Where new items enter.
    Hot = 0,
    /// Items fetched while active.
    Warm = 1,
    /// Items on their way out: evictions take from here.
    Cold = 2,
    /// Items with a short time to live (`temporary_ttl`), never moved.
    Temp = 3,
}

impl Segment {
    /// Every segment, in the order their lists are listed.
    pub const ALL: [Segment; 4] = [Segment::Hot, Segment::Warm, Segment::Cold, Segment::Temp];
}

/// No node.
const NIL: u32 = u32::MAX;

/// A node's position in the slab.
pub type Slot = u32;

struct Node {
    key: Box<[u8]>,
    item: Item,
    /// Towards the head (more recently linked).
    prev: u32,
    /// Towards the tail.
    next: u32,
    segment: Segment,
    /// Fetched again since it was last looked at (memcached's ACTIVE).
    active: bool,
    /// The bytes charged for it when it was linked.
    size: u64,
}

/// One list: head is the most recently linked.
#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: usize,
    bytes: u64,
}

impl Default for List {
    fn default() -> List {
        List { head: NIL, tail: NIL, len: 0, bytes: 0 }
    }
}

/// The table (see the module documentation).
pub struct Table {
    index: HashTable<Slot>,
    /// Randomly seeded per table (foldhash): fast, and keys chosen by
    /// clients cannot be aimed at one bucket without knowing the seed.
    hasher: DefaultHashBuilder,
    nodes: Vec<Option<Node>>,
    free: Vec<Slot>,
    lists: [List; 4],
    /// Items per (slab class - 1, segment).
    by_class: Vec<[u64; 4]>,
}

impl Default for Table {
    fn default() -> Table {
        Table {
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            lists: [List::default(); 4],
            by_class: Vec::new(),
        }
    }
}

impl Table {
    /// Items held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether it holds no item.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn node(&self, slot: Slot) -> &Node {
        self.nodes[slot as usize].as_ref().expect("a linked slot holds a node")
    }

    fn node_mut(&mut self, slot: Slot) -> &mut Node {
        self.nodes[slot as usize].as_mut().expect("a linked slot holds a node")
    }

    /// The slot of `key`, if held.
    pub fn find(&self, key: &[u8]) -> Option<Slot> {
        let hash = self.hasher.hash_one(key);
        let nodes = &self.nodes;
        self.index.find(hash, |&s| nodes[s as usize].as_ref().is_some_and(|n| &n.key[..] == key)).copied()
    }

    /// The item under `key`, without changing anything.
    pub fn peek(&self, key: &[u8]) -> Option<&Item> {
        self.find(key).map(|s| &self.node(s).item)
    }

    /// The item under `key`, to change in place (its list stays).
    pub fn peek_mut(&mut self, key: &[u8]) -> Option<&mut Item> {
        self.find(key).map(|s| &mut self.node_mut(s).item)
    }

    /// Slots in use or free: every item's slot is below this.
    pub fn slots(&self) -> usize {
        self.nodes.len()
    }

    /// The item in `slot`, if one is there.
    pub fn at(&self, slot: Slot) -> Option<&Item> {
        self.nodes.get(slot as usize).and_then(|n| n.as_ref()).map(|n| &n.item)
    }

    /// The item in `slot`.
    pub fn item(&self, slot: Slot) -> &Item {
        &self.node(slot).item
    }

    /// The item in `slot`, to change in place.
    pub fn item_mut(&mut self, slot: Slot) -> &mut Item {
        &mut self.node_mut(slot).item
    }

    /// The key in `slot`.
    pub fn key(&self, slot: Slot) -> &[u8] {
        &self.node(slot).key
    }

    /// The segment `slot` is on.
    pub fn segment(&self, slot: Slot) -> Segment {
        self.node(slot).segment
    }

    /// Whether `slot` is marked active.
    pub fn active(&self, slot: Slot) -> bool {
        self.node(slot).active
    }

    /// Marks `slot` active or not.
    pub fn set_active(&mut self, slot: Slot, active: bool) {
        self.node_mut(slot).active = active;
    }

    /// The least recently linked item of `segment`.
    pub fn tail(&self, segment: Segment) -> Option<Slot> {
        let t = self.lists[segment as usize].tail;
        (t != NIL).then_some(t)
    }

    /// Items on `segment`.
    #[cfg(test)]
    pub fn count(&self, segment: Segment) -> usize {
        self.lists[segment as usize].len
    }

    /// Bytes of the items on `segment`.
    pub fn bytes(&self, segment: Segment) -> u64 {
        self.lists[segment as usize].bytes
    }

    /// Items of slab class `class` on each segment.
    pub fn class_counts(&self, class: u8) -> [u64; 4] {
        self.by_class.get(usize::from(class).saturating_sub(1)).copied().unwrap_or_default()
    }

    /// Adds `item` under `key`, which must not be held, at the head of
    /// `segment`, charged `size` bytes.
    pub fn insert(&mut self, key: Box<[u8]>, item: Item, segment: Segment, size: u64) -> Slot {
        debug_assert!(self.find(&key).is_none(), "insert of a key already held");
        let hash = self.hasher.hash_one(&key[..]);
        let node = Node { key, item, prev: NIL, next: NIL, segment, active: false, size };
        let slot = match self.free.pop() {
            Some(s) => {
                self.nodes[s as usize] = Some(node);
                s
            }
            None => {
                self.nodes.push(Some(node));
                (self.nodes.len() - 1) as Slot
            }
        };
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index.insert_unique(hash, slot, |&s| {
            hasher.hash_one(&nodes[s as usize].as_ref().expect("indexed slots hold nodes").key[..])
        });
        self.link(slot, segment);
        slot
    }

    /// Removes the item under `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<Item> {
        self.find(key).map(|s| self.remove_slot(s).1)
    }

    /// Removes the item in `slot`, with its key.
    pub fn remove_slot(&mut self, slot: Slot) -> (Box<[u8]>, Item) {
        self.unlink(slot);
        let hash = self.hasher.hash_one(self.key(slot));
        if let Ok(e) = self.index.find_entry(hash, |&s| s == slot) {
            e.remove();
        }
        let node = self.nodes[slot as usize].take().expect("a linked slot holds a node");
        self.free.push(slot);
        if self.index.is_empty() {
            // Nothing held: give the slab's memory back.
            self.nodes = Vec::new();
            self.free = Vec::new();
        }
        (node.key, node.item)
    }

    /// Moves `slot` to the head of `segment` (its own: a bump within it).
    pub fn move_to(&mut self, slot: Slot, segment: Segment) {
        self.unlink(slot);
        self.link(slot, segment);
    }

    /// The items of `segment`, most recently linked first.
    pub fn iter_segment(&self, segment: Segment) -> impl Iterator<Item = (&[u8], &Item)> {
        let mut at = self.lists[segment as usize].head;
        std::iter::from_fn(move || {
            if at == NIL {
                return None;
            }
            let n = self.node(at);
            at = n.next;
            Some((&n.key[..], &n.item))
        })
    }

    /// The items of `segment`, least recently linked first.
    pub fn iter_segment_rev(&self, segment: Segment) -> impl Iterator<Item = (&[u8], &Item)> {
        let mut at = self.lists[segment as usize].tail;
        std::iter::from_fn(move || {
            if at == NIL {
                return None;
            }
            let n = self.node(at);
            at = n.prev;
            Some((&n.key[..], &n.item))
        })
    }

    /// Every item: segment by segment (HOT, WARM, COLD, TEMP), each most
    /// recently linked first.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Item)> {
        Segment::ALL.into_iter().flat_map(|s| self.iter_segment(s))
    }

    fn class_slot(&mut self, class: u8) -> &mut [u64; 4] {
        let i = usize::from(class).saturating_sub(1);
        if i >= self.by_class.len() {
            self.by_class.resize(i + 1, [0; 4]);
        }
        &mut self.by_class[i]
    }

    fn link(&mut self, slot: Slot, segment: Segment) {
        let head = self.lists[segment as usize].head;
        let (class, size) = {
            let n = self.node_mut(slot);
            n.segment = segment;
            n.prev = NIL;
            n.next = head;
            (n.item.class, n.size)
        };
        if head != NIL {
            self.node_mut(head).prev = slot;
        }
        let l = &mut self.lists[segment as usize];
        l.head = slot;
        if l.tail == NIL {
            l.tail = slot;
        }
        l.len += 1;
        l.bytes += size;
        self.class_slot(class)[segment as usize] += 1;
    }

    fn unlink(&mut self, slot: Slot) {
        let (prev, next, segment, class, size) = {
            let n = self.node(slot);
            (n.prev, n.next, n.segment, n.item.class, n.size)
        };
        if prev != NIL {
            self.node_mut(prev).next = next;
        } else {
            self.lists[segment as usize].head = next;
        }
        if next != NIL {
            self.node_mut(next).prev = prev;
        } else {
            self.lists[segment as usize].tail = prev;
        }
        let l = &mut self.lists[segment as usize];
        l.len -= 1;
        l.bytes -= size;
        self.class_slot(class)[segment as usize] -= 1;
        let n = self.node_mut(slot);
        n.prev = NIL;
        n.next = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(class: u8) -> Item {
        let mut it = Item::new(vec![b'x'], 0, 0, 0);
        it.class = class;
        it
    }

    fn keys(t: &Table, s: Segment) -> Vec<Vec<u8>> {
        t.iter_segment(s).map(|(k, _)| k.to_vec()).collect()
    }

    #[test]
    fn lists_keep_link_order_and_counts() {
        let mut t = Table::default();
        for k in [b"a", b"b", b"c"] {
            t.insert(k[..].into(), item(3), Segment::Hot, 10);
        }
        assert_eq!(keys(&t, Segment::Hot), [b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]);
        let a = t.tail(Segment::Hot).unwrap();
        assert_eq!(t.key(a), b"a");
        t.move_to(a, Segment::Cold);
        assert_eq!((t.count(Segment::Hot), t.bytes(Segment::Hot)), (2, 20));
        assert_eq!((t.count(Segment::Cold), t.bytes(Segment::Cold)), (1, 10));
        assert_eq!(t.class_counts(3), [2, 0, 1, 0]);
        assert_eq!(t.segment(a), Segment::Cold);
        // Moving the middle one keeps the list whole.
        let b = t.find(b"b").unwrap();
        t.move_to(b, Segment::Warm);
        assert_eq!(keys(&t, Segment::Hot), [b"c".to_vec()]);
        assert_eq!(t.tail(Segment::Hot), t.find(b"c"));
        assert_eq!(t.remove(b"c").map(|i| i.class), Some(3));
        assert_eq!(t.tail(Segment::Hot), None);
        assert_eq!(t.len(), 2);
        assert_eq!(t.iter().count(), 2);
        assert!(t.peek(b"c").is_none() && t.peek(b"a").is_some());
    }

    #[test]
    fn slots_are_reused_and_memory_returned() {
        let mut t = Table::default();
        for i in 0..100u32 {
            t.insert(i.to_be_bytes()[..].into(), item(1), Segment::Cold, 1);
        }
        for i in 0..50u32 {
            assert!(t.remove(&i.to_be_bytes()).is_some());
        }
        for i in 100..150u32 {
            t.insert(i.to_be_bytes()[..].into(), item(1), Segment::Cold, 1);
        }
        assert_eq!(t.nodes.len(), 100);
        for i in 50..150u32 {
            assert!(t.peek(&i.to_be_bytes()).is_some());
        }
        while let Some(s) = t.tail(Segment::Cold) {
            t.remove_slot(s);
        }
        assert!(t.is_empty() && t.nodes.capacity() == 0);
        assert_eq!(t.bytes(Segment::Cold), 0);
    }
}
