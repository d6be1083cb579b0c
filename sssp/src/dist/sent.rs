//! What a part has already offered other parts during a search: a bounded,
//! direct-mapped table of the lowest distance sent to each remote vertex,
//! so that a relaxation no better than one already sent is never sent.
//!
//! Skipping is exact, never a guess: a relaxation `(v, d)` is dropped only
//! when the table proves that `(v, d')` with `d' <= d` left earlier in the
//! same search. Every round ends only when every batch sent in it was
//! applied, and the owner applies a batch in order, so by the time the
//! dropped one would have arrived, `v`'s distance is already `d'` or
//! lower, and `(v, d)` would have changed nothing. The table is lossy the
//! other way only: a vertex whose entry was taken by another (the table
//! holds at most [`MAX_ENTRIES`] entries, indexed by the vertex's low
//! bits) is sent again, as it would be without the table.
//!
//! An entry is one `u64`: the vertex in the high half and, in the low half,
//! the distance as an `f32` rounded *up* (so that the stored value is at
//! least the distance really sent, and "stored <= d" still proves
//! "sent <= d"). An empty entry holds a NaN distance, which no comparison
//! accepts.

/// The most entries per table: 2 MiB, whatever the graph's size. Graphs of
/// up to this many vertices never share an entry between two vertices.
pub const MAX_ENTRIES: usize = 1 << 18;

const EMPTY: u64 = u64::MAX;

/// The lowest distance sent to each remote vertex (see the module).
#[derive(Debug, Default)]
pub struct Sent {
    entries: Vec<u64>,
    mask: u32,
}

/// `d` as an `f32` no smaller than `d` (`d >= 0`).
#[inline]
fn round_up(d: f64) -> f32 {
    let f = d as f32;
    if f64::from(f) < d {
        f.next_up()
    } else {
        f
    }
}

impl Sent {
    /// An empty table for a graph of `vertices` vertices: one entry per
    /// vertex up to [`MAX_ENTRIES`].
    pub fn new(vertices: u64) -> Self {
        let n = (vertices.max(1).next_power_of_two() as usize).min(MAX_ENTRIES);
        Sent { entries: vec![EMPTY; n], mask: (n - 1) as u32 }
    }

    /// Forgets every entry (a new search).
    pub fn clear(&mut self) {
        self.entries.fill(EMPTY);
    }

    /// Whether a relaxation of `v` to `d` must go: false when one no worse
    /// went earlier. A `true` records `d` for `v`.
    #[inline]
    pub fn offer(&mut self, v: u32, d: f64) -> bool {
        let Some(e) = self.entries.get_mut((v & self.mask) as usize) else {
            // An empty table (a part that was never built) filters nothing.
            return true;
        };
        if (*e >> 32) as u32 == v && f64::from(f32::from_bits(*e as u32)) <= d {
            return false;
        }
        *e = (u64::from(v) << 32) | u64::from(round_up(d).to_bits());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_relaxation_no_better_than_one_sent_is_dropped() {
        let mut s = Sent::new(100);
        assert!(s.offer(7, 1.5));
        assert!(!s.offer(7, 1.5), "the same distance again");
        assert!(!s.offer(7, 2.0), "a longer one");
        assert!(s.offer(7, 1.25), "a shorter one goes");
        assert!(!s.offer(7, 1.4));
        s.clear();
        assert!(s.offer(7, 2.0), "a new search forgets");
    }

    #[test]
    fn vertices_sharing_an_entry_are_sent_again() {
        let mut s = Sent::new(1 << 30);
        assert_eq!(s.entries.len(), MAX_ENTRIES);
        let other = 7 + MAX_ENTRIES as u32;
        assert!(s.offer(7, 1.0));
        assert!(s.offer(other, 5.0));
        assert!(s.offer(7, 3.0), "its entry went to another vertex");
    }

    #[test]
    fn rounding_keeps_the_proof() {
        // 0.1 as an f64 lies between two f32s: the stored one is the upper.
        let d = 0.1f64;
        assert!(f64::from(round_up(d)) >= d);
        let mut s = Sent::new(10);
        assert!(s.offer(3, d));
        // Between d and its rounded-up f32: the table cannot prove that
        // anything no worse went, so it goes.
        let just_above = d + 1e-12;
        assert!(f64::from(round_up(d)) > just_above);
        assert!(s.offer(3, just_above));
        // Distances an f32 holds exactly are dropped when repeated; others
        // only once a distance at least their rounded-up value comes.
        assert!(s.offer(3, 0.0625));
        assert!(!s.offer(3, 0.0625));
        assert!(s.offer(3, 0.05));
        assert!(!s.offer(3, f64::from(round_up(0.05))));
        assert!(Sent::default().offer(1, 1.0));
    }

    proptest! {
        /// Against a model that keeps every vertex's lowest sent distance:
        /// a relaxation is dropped only when one no worse was sent.
        #[test]
        fn drops_only_what_was_sent_no_worse(
            offers in proptest::collection::vec((0u32..64, 0u32..10_000), 1..400),
            vertices in 1u64..200,
        ) {
            let mut s = Sent::new(vertices);
            let mut best = std::collections::HashMap::new();
            for (v, d) in offers {
                let d = f64::from(d) / 97.0;
                let sent = s.offer(v, d);
                if !sent {
                    let b: f64 = best[&v];
                    prop_assert!(b <= d, "dropped {v} at {d}, the best sent was {b}");
                } else {
                    best.entry(v).and_modify(|b: &mut f64| *b = b.min(d)).or_insert(d);
                }
            }
        }
    }
}
