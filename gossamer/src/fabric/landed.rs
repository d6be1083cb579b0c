//! Payloads from another host that landed beside this process's region
//! instead of in it: a large `Vec<u8>` argument or result that its sender
//! sent from its own buffer, which the active message that carried it
//! marked as *detached* (see `am`). The fabric keeps such a payload in a
//! buffer of its own, under the address in the region where it would have
//! lain; the channel's reader of the bulk area takes it from here (through
//! `channel::hooks::take_landed`), by that address and length, and hands
//! the buffer itself to the receiving code when the value is a byte
//! vector. A large payload then costs the receiver one copy (out of the
//! transport's buffer) instead of two (into the region, then out of it
//! into the value). Only the process that takes in a message can keep its
//! payloads, so a sender detaches only payloads for a thread of that
//! process (`ThreadFabric::lands_in`).
//!
//! **Invariants.** Entries never overlap. Whatever lands in the region
//! over an entry's range (a later batch in the same bulk area, detached or
//! not) removes it first, so an entry is always the newest content of its
//! range and a stale one is never read in place of the region; and as
//! entries do not overlap, all of them together hold at most the region's
//! size. A reader that finds an entry which only overlaps the range it was
//! told to read refuses the message: the bytes it names are not those that
//! landed.
//!
//! The table is shared by the thread that takes in messages (whichever of
//! the process's threads progresses the fabric's receiver, one at a time)
//! and the workers that read them: a mutex, taken only while entries exist
//! (a count, read without it, says whether any do): once per detached
//! payload on each side, and once per other landing while one is kept.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Entries by their address in the region: the bytes that lie there.
static LANDED: Mutex<BTreeMap<usize, Vec<u8>>> = Mutex::new(BTreeMap::new());
/// How many entries there are, read without the lock.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Payloads kept, and taken by their readers, since the process started
/// (see [`counts`]).
static KEPT: AtomicU64 = AtomicU64::new(0);
static TAKEN: AtomicU64 = AtomicU64::new(0);

/// How many payloads this process has kept beside its region, and how
/// many of them its readers took, so far.
pub(crate) fn counts() -> (u64, u64) {
    (KEPT.load(Ordering::Relaxed), TAKEN.load(Ordering::Relaxed))
}

fn table() -> MutexGuard<'static, BTreeMap<usize, Vec<u8>>> {
    // Nothing panics while holding the lock but an allocation failure; the
    // table stays consistent either way.
    LANDED.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lowest address of an entry that overlaps `at..at + len`, if any
/// does. Entries do not overlap each other, so those that overlap a range
/// follow one another.
fn first_overlapping(t: &BTreeMap<usize, Vec<u8>>, at: usize, len: usize) -> Option<usize> {
    let end = at.saturating_add(len.max(1));
    let before = t.range(..at).next_back().filter(|(k, v)| k.saturating_add(v.len()) > at);
    before.or_else(|| t.range(at..end).next()).map(|(k, _)| *k)
}

fn remove_overlapping(t: &mut BTreeMap<usize, Vec<u8>>, at: usize, len: usize) {
    while let Some(k) = first_overlapping(t, at, len) {
        t.remove(&k);
    }
}

/// Keeps `bytes` as what lies at `at` in the region (an address in this
/// process's mapping), in place of whatever lay over that range.
pub(crate) fn keep(at: usize, bytes: Vec<u8>) {
    let mut t = table();
    remove_overlapping(&mut t, at, bytes.len());
    t.insert(at, bytes);
    COUNT.store(t.len(), Ordering::Release);
    KEPT.fetch_add(1, Ordering::Relaxed);
}

/// Bytes are landing in the region at `at..at + len`: forgets the entries
/// they replace.
pub(crate) fn forget(at: usize, len: usize) {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut t = table();
    remove_overlapping(&mut t, at, len);
    COUNT.store(t.len(), Ordering::Release);
}

/// The payload that landed beside the region for `at..at + len`, if one
/// did (taken: a range is read once), `None` if the region holds those
/// bytes, or why the range cannot be read: a payload that landed there
/// does not have that range.
///
/// The caller has seen the slot that names the range land (with acquire
/// ordering), and the fabric keeps a payload before it lands that slot.
pub(crate) fn take(at: usize, len: usize) -> Result<Option<Vec<u8>>, &'static str> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Ok(None);
    }
    let mut t = table();
    // An entry of exactly this range is the only one that overlaps it.
    let r = match first_overlapping(&t, at, len) {
        None => Ok(None),
        Some(k) if k == at && t[&k].len() == len => {
            TAKEN.fetch_add(1, Ordering::Relaxed);
            Ok(t.remove(&k))
        }
        Some(_) => Err("does not match the payload that landed there"),
    };
    COUNT.store(t.len(), Ordering::Release);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is global: each test works in an address range of its own.
    #[test]
    fn a_kept_payload_is_taken_once_by_its_exact_range() {
        let base = 1 << 40;
        keep(base, vec![1, 2, 3]);
        assert_eq!(take(base + 100, 8), Ok(None));
        assert!(take(base + 1, 2).is_err(), "a range inside it");
        assert!(take(base, 4).is_err(), "a longer range");
        assert_eq!(take(base, 3), Ok(Some(vec![1, 2, 3])));
        assert_eq!(take(base, 3), Ok(None), "taken once");
    }

    #[test]
    fn what_lands_over_an_entry_replaces_it() {
        let base = 2 << 40;
        keep(base, vec![0; 64]);
        keep(base + 128, vec![0; 64]);
        // Bytes landing in the region over the first one's tail.
        forget(base + 60, 8);
        assert_eq!(take(base, 64), Ok(None));
        // A detached payload over the second one.
        keep(base + 120, vec![9; 16]);
        assert!(take(base + 128, 64).is_err(), "the new one overlaps its start");
        assert_eq!(take(base + 120, 16), Ok(Some(vec![9; 16])));
        assert_eq!(take(base + 128, 64), Ok(None), "gone");
        // Landing next to an entry leaves it.
        keep(base + 256, vec![5; 8]);
        forget(base + 248, 8);
        forget(base + 264, 8);
        assert_eq!(take(base + 256, 8), Ok(Some(vec![5; 8])));
    }

    #[test]
    fn an_empty_payload_is_kept_and_taken() {
        let base = 3 << 40;
        keep(base, Vec::new());
        assert_eq!(take(base, 0), Ok(Some(Vec::new())));
    }

    #[cfg(not(miri))]
    proptest::proptest! {
        /// Any sequence of landings, against a list of entries as the
        /// model: a take finds exactly the bytes last kept over its range,
        /// refuses a range that only overlaps them, and entries never
        /// overlap.
        #[test]
        fn entries_are_the_newest_content_of_their_range(
            ops in proptest::collection::vec((0u8..3, 0usize..256, 0usize..48, proptest::prelude::any::<u8>()), 1..40),
        ) {
            let base = 4 << 40;
            forget(base, 1 << 20);
            let overlaps = |(k, n): (usize, usize), (a, l): (usize, usize)| (k < a && k + n > a) || (a <= k && k < a + l.max(1));
            let mut model: Vec<(usize, usize, u8)> = Vec::new();
            for (op, at, len, fill) in ops {
                match op {
                    0 => {
                        keep(base + at, vec![fill; len]);
                        model.retain(|&(k, n, _)| !overlaps((k, n), (at, len)));
                        model.push((at, len, fill));
                    }
                    1 => {
                        forget(base + at, len);
                        model.retain(|&(k, n, _)| !overlaps((k, n), (at, len)));
                    }
                    _ => {
                        let got = take(base + at, len);
                        let hit: Vec<_> = model.iter().copied().filter(|&(k, n, _)| overlaps((k, n), (at, len))).collect();
                        match hit.as_slice() {
                            [] => proptest::prop_assert_eq!(got, Ok(None)),
                            [(k, n, f)] if *k == at && *n == len => {
                                proptest::prop_assert_eq!(got, Ok(Some(vec![*f; len])));
                                model.retain(|&(k, _, _)| k != at);
                            }
                            _ => proptest::prop_assert!(got.is_err()),
                        }
                    }
                }
                let t = table();
                let mut last_end = 0;
                for (k, v) in t.range(base..base + 1024) {
                    proptest::prop_assert!(*k >= last_end, "entries overlap");
                    last_end = k + v.len();
                }
                proptest::prop_assert_eq!(t.range(base..base + 1024).count(), model.len());
            }
            forget(base, 1 << 20);
        }
    }
}
