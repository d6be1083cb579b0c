//! A slot between hosts (§3.2.7 of the thesis): one contiguous block that a
//! client (or trustee) prepares in a *staging* slot of its own host's
//! memory, and then copies into the *landing* slot of the other host with
//! a single one-sided put of only the bytes in use.
//!
//! Layout: `[ unused … | records … | count, words, sum, seq ]`. Records are
//! aligned to the end of the data area, so the bytes in use and the trailer
//! form one contiguous range, and the trailer's last word — the sequence
//! number that tells the reader a new batch is there — is the highest
//! address the put writes.
//!
//! **Ordering.** Transports that write a put's bytes in address order (RDMA
//! writes in practice, and UCX over TCP, which receives the stream into the
//! target in order) make the sequence number visible last. The reader does
//! not rely on that: the trailer carries a checksum over the sequence
//! number, the record count and length, and every data word; the reader
//! copies the batch out with word-sized atomic loads and accepts it only
//! when the checksum of its copy matches. A batch seen half-written — by
//! any transport, in any byte order — fails the check and is read again
//! later; the writer never starts another batch into the same landing slot
//! before the reader has answered this one, so the bytes settle.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};

use super::slot::{BatchReader, BatchWriter, Word};

/// Words of record space in a slot between hosts: 4072 bytes, one page
/// with the trailer. A batch crosses as the bytes in use only, so a large
/// slot costs nothing to small batches; it holds about 100 requests with
/// 64-byte arguments. (A slot of 1136 bytes held 28, and one batch in
/// flight per lane capped crossing echoes of 64 B between 2 simulated
/// hosts at 0.6–0.9 M/s; this one gives 1.8–3.0 M/s.)
pub(crate) const REMOTE_WORDS: usize = 509;

/// Words of the trailer: count and length, checksum, sequence number.
const TRAILER_WORDS: usize = 3;

/// One slot between hosts. Lives in a region (shared memory registered
/// with the fabric), never on the Rust heap of one thread only.
#[repr(C, align(64))]
pub(crate) struct RemoteSlot {
    words: [AtomicU64; REMOTE_WORDS + TRAILER_WORDS],
}

const COUNT_WORDS: usize = REMOTE_WORDS;
const SUM: usize = REMOTE_WORDS + 1;
const SEQ: usize = REMOTE_WORDS + 2;

/// Bytes of a slot between hosts, as laid out in a region.
pub(crate) const REMOTE_SLOT_BYTES: usize = std::mem::size_of::<RemoteSlot>();

/// The checksum of a batch: sequence number, count, length and words.
fn checksum(seq: u64, count: u32, data: impl Iterator<Item = u64>) -> u64 {
    let mut h = seq.rotate_left(17) ^ ((count as u64) << 32) ^ 0x243f_6a88_85a3_08d3;
    let mut n = 0u64;
    for w in data {
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
        n += 1;
    }
    (h ^ n).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

/// A batch read out of a landing slot: a private, checked copy.
pub(crate) struct Landed {
    seq: u64,
    count: u32,
    words: usize,
    /// The first `words` words are initialised.
    buf: [MaybeUninit<u64>; REMOTE_WORDS],
}

impl Landed {
    /// The batch's sequence number.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// Records in the batch.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// Walks the records of the copy.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&mut BatchReader) -> R) -> R {
        let start = self.buf.as_ptr().cast::<Word>();
        // SAFETY: the copy holds `words` initialised words; the reader
        // only reads, while `self` is borrowed.
        let mut r = unsafe { BatchReader::contiguous(start, self.count, self.words) };
        f(&mut r)
    }
}

impl RemoteSlot {
    /// The sequence number last published here (acquire).
    #[inline]
    pub(crate) fn seq(&self) -> u64 {
        self.words[SEQ].load(Ordering::Acquire)
    }

    /// Prepares a batch in this (staging) slot: `fill` writes records
    /// through a contiguous writer; they are then moved to the end of the
    /// data area and the trailer is written. Returns `fill`'s result and
    /// the byte range of the slot to put (relative to the slot's start).
    ///
    /// # Safety
    /// The caller owns this staging slot: no put from it is in flight and
    /// no other thread writes it.
    pub(crate) unsafe fn stage<R>(
        &self,
        seq: u64,
        reserve_words: usize,
        fill: impl FnOnce(&mut BatchWriter) -> R,
    ) -> (R, u32, std::ops::Range<usize>) {
        let base = self.words.as_ptr().cast::<Word>().cast_mut();
        // SAFETY: the data area is `REMOTE_WORDS` words that we own.
        let mut w = unsafe { BatchWriter::contiguous(base, REMOTE_WORDS, reserve_words) };
        let r = fill(&mut w);
        let (count, used) = (w.count(), w.used_words());
        let start = REMOTE_WORDS - used;
        // SAFETY: both ranges lie in the data area; `copy` allows overlap.
        unsafe { std::ptr::copy(base, base.add(start), used) };
        // The checksum reads the words back as integers: they live in
        // shared memory that the fabric reads as bytes anyway, and any
        // padding bytes inside records are whatever the memory holds.
        // SAFETY: `start..REMOTE_WORDS` is inside the data area we own.
        let sum =
            checksum(seq, count, (start..REMOTE_WORDS).map(|i| unsafe { base.add(i).cast::<u64>().read_volatile() }));
        self.words[COUNT_WORDS].store(((count as u64) << 32) | used as u64, Ordering::Relaxed);
        self.words[SUM].store(sum, Ordering::Relaxed);
        self.words[SEQ].store(seq, Ordering::Release);
        (r, count, start * 8..(SEQ + 1) * 8)
    }

    /// Copies out the batch published with sequence number `seq` (as seen
    /// by [`seq`](Self::seq)) if it has fully arrived; `None` while it is
    /// still arriving (or the slot holds garbage).
    pub(crate) fn land(&self, seq: u64) -> Option<Landed> {
        let cw = self.words[COUNT_WORDS].load(Ordering::Acquire);
        let sum = self.words[SUM].load(Ordering::Acquire);
        let (count, words) = ((cw >> 32) as u32, (cw & 0xffff_ffff) as usize);
        if words > REMOTE_WORDS || count as usize > words {
            return None;
        }
        // Only the words in use are written, and only they are read (the
        // slot is large, and most batches are small).
        let mut buf = [MaybeUninit::<u64>::uninit(); REMOTE_WORDS];
        let start = REMOTE_WORDS - words;
        for (k, i) in (start..REMOTE_WORDS).enumerate() {
            buf[k].write(self.words[i].load(Ordering::Relaxed));
        }
        // SAFETY: the first `words` words were written just above.
        let sum_here = checksum(seq, count, buf[..words].iter().map(|w| unsafe { w.assume_init() }));
        if sum_here != sum || self.seq() != seq {
            return None;
        }
        Some(Landed { seq, count, words, buf })
    }

    /// The slot's bytes, for the fabric's put.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.words.as_ptr().cast()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::record::record_words;
    use super::super::remote::word;
    use super::*;

    fn slot() -> Box<RemoteSlot> {
        // SAFETY: all-zero bytes are a valid `RemoteSlot` (atomics).
        unsafe { Box::new(std::mem::zeroed()) }
    }

    /// Writes records of the given sizes; each is `[len][k][k+1]…`.
    fn fill(w: &mut BatchWriter, sizes: &[usize], base: u64) -> usize {
        let mut n = 0;
        for (i, &s) in sizes.iter().enumerate() {
            let Some(dst) = w.reserve(s, 0) else { break };
            for k in 0..s {
                let v = if k == 0 { s as u64 } else { base + (i * 100 + k) as u64 };
                // SAFETY: `reserve` gave room for `s` words.
                unsafe { *dst.add(k) = word(v) };
            }
            n += 1;
        }
        n
    }

    fn records(l: &Landed) -> Vec<Vec<u64>> {
        l.read(|r| {
            let mut v = Vec::new();
            while let Some(rec) = r.next(record_words) {
                let n = record_words(rec);
                // SAFETY: the record holds `n` initialised words.
                v.push((0..n).map(|k| unsafe { (*rec.add(k)).assume_init() }).collect());
            }
            v
        })
    }

    #[test]
    fn a_staged_batch_lands_end_aligned_with_the_sequence_number_last() {
        let (staging, landing) = (slot(), slot());
        let sizes = [3usize, 5, 4, 2];
        // SAFETY: the test owns the staging slot.
        let (n, count, range) = unsafe { staging.stage(7, 0, |w| fill(w, &sizes, 1000)) };
        assert_eq!((n, count), (4, 4));
        assert_eq!(range.end, (REMOTE_WORDS + TRAILER_WORDS) * 8);
        assert_eq!(range.len(), (14 + TRAILER_WORDS) * 8, "only the used words and the trailer travel");
        // "Put" the range into the landing slot.
        // SAFETY: both slots are ours; the range lies inside them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                staging.as_ptr().add(range.start),
                landing.as_ptr().add(range.start).cast_mut(),
                range.len(),
            )
        };
        assert_eq!(landing.seq(), 7);
        let l = landing.land(7).expect("complete batch");
        let recs = records(&l);
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[1], vec![5, 1101, 1102, 1103, 1104]);
    }

    #[test]
    fn a_half_written_batch_is_refused_until_complete() {
        let (staging, landing) = (slot(), slot());
        let mut refused = 0;
        // An earlier batch sits in the landing slot.
        // SAFETY: as above.
        let (_, _, r1) = unsafe { staging.stage(1, 0, |w| fill(w, &[6, 6, 6], 1)) };
        // SAFETY: the staged range lies inside both slots, which do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                staging.as_ptr().add(r1.start),
                landing.as_ptr().add(r1.start).cast_mut(),
                r1.len(),
            )
        };
        assert!(landing.land(1).is_some());
        // SAFETY: as for the first batch.
        let (_, _, r2) = unsafe { staging.stage(2, 0, |w| fill(w, &[6, 6, 6], 50)) };
        // Every prefix and every suffix of the put, written alone, leaves
        // a batch that is refused (any byte order is covered by these two
        // extremes and the checksum over all words).
        for cut in (r2.start..r2.end).step_by(8) {
            let l2 = slot();
            // SAFETY: whole slots and ranges inside them; distinct slots.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    landing.as_ptr(),
                    l2.as_ptr().cast_mut(),
                    (REMOTE_WORDS + TRAILER_WORDS) * 8,
                );
                // Suffix first: sequence number new, data partly old.
                std::ptr::copy_nonoverlapping(staging.as_ptr().add(cut), l2.as_ptr().add(cut).cast_mut(), r2.end - cut);
            }
            let same = (r2.start / 8..r2.end / 8)
                .all(|i| l2.words[i].load(Ordering::Relaxed) == staging.words[i].load(Ordering::Relaxed));
            // Refused unless the old bytes it kept happen to equal the new.
            assert_eq!(l2.land(2).is_some(), same, "suffix from byte {cut}");
            refused += !same as usize;
        }
        // SAFETY: the staged range lies inside both slots, which do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                staging.as_ptr().add(r2.start),
                landing.as_ptr().add(r2.start).cast_mut(),
                r2.len(),
            )
        };
        assert!(refused > 10, "the test exercised torn batches ({refused})");
        let l = landing.land(2).expect("complete");
        assert_eq!(records(&l)[2][1], 50 + 201);
    }

    /// Records as a client builds them for another host, in memory that
    /// was never written before (as a request queue's fresh words are): an
    /// environment smaller than its word, an inline byte tail that ends
    /// inside its last word. Staging checksums them as whole words, so
    /// every byte of those words must have been written; Miri reports a
    /// read of an uninitialised byte here.
    #[test]
    fn staged_records_are_initialised_wherever_the_checksum_reads() {
        use super::super::remote::{byte_words, put_bytes, put_env};
        use std::mem::MaybeUninit;
        let (staging, landing) = (slot(), slot());
        for tail in [&b""[..], b"a", b"abc", b"abcdefgh", b"0123456789"] {
            let words = 3 + byte_words(tail.len());
            let mut rec = [MaybeUninit::<u64>::uninit(); 8];
            // SAFETY: `rec` has room for the record's words.
            unsafe {
                rec[0] = word(words as u64);
                put_env(rec.as_mut_ptr().add(1), 0x0102_0304u32);
                rec[2] = word(tail.len() as u64);
                put_bytes(rec.as_mut_ptr().add(3), tail);
            }
            // SAFETY: the test owns the staging slot; `reserve` gave room.
            let (_, count, range) = unsafe {
                staging.stage(tail.len() as u64 + 1, 0, |w| {
                    let dst = w.reserve(words, 0).expect("room");
                    std::ptr::copy_nonoverlapping(rec.as_ptr(), dst, words);
                })
            };
            assert_eq!(count, 1);
            // SAFETY: both slots are ours; the range lies inside them.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    staging.as_ptr().add(range.start),
                    landing.as_ptr().add(range.start).cast_mut(),
                    range.len(),
                )
            };
            let l = landing.land(tail.len() as u64 + 1).expect("complete");
            let got = records(&l).remove(0);
            assert_eq!(got[1], 0x0102_0304, "the environment and zeros after it");
            let bytes: Vec<u8> = got[3..].iter().flat_map(|w| w.to_le_bytes()).collect();
            assert_eq!(&bytes[..tail.len()], tail);
            assert!(bytes[tail.len()..].iter().all(|&b| b == 0), "the tail's last word is zero-padded");
        }
    }

    #[test]
    fn garbage_lengths_are_refused() {
        let s = slot();
        s.words[COUNT_WORDS].store(u64::MAX, Ordering::Relaxed);
        s.words[SEQ].store(3, Ordering::Relaxed);
        assert!(s.land(3).is_none());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: if cfg!(miri) { 12 } else { 256 },
            failure_persistence: None,
            ..Default::default()
        })]

        /// A batch from a faulty peer, checksummed as a good one but with
        /// any record lengths and any count: the reader hands out only
        /// records inside the landed copy, and refuses the rest.
        #[test]
        fn landed_batches_with_any_lengths_are_read_inside_the_copy_or_refused(
            words in proptest::collection::vec(0u64..200, 1..REMOTE_WORDS),
            count in 0u32..200,
            seq in 1u64..1000,
        ) {
            let s = slot();
            let used = words.len();
            let start = REMOTE_WORDS - used;
            for (k, &w) in words.iter().enumerate() {
                s.words[start + k].store(w, Ordering::Relaxed);
            }
            let sum = checksum(seq, count, words.iter().copied());
            s.words[COUNT_WORDS].store(((count as u64) << 32) | used as u64, Ordering::Relaxed);
            s.words[SUM].store(sum, Ordering::Relaxed);
            s.words[SEQ].store(seq, Ordering::Release);
            let Some(l) = s.land(seq) else {
                proptest::prop_assert!(count as usize > used, "a consistent batch lands");
                return Ok(());
            };
            let (lo, hi) = (l.buf.as_ptr() as usize, l.buf.as_ptr() as usize + used * 8);
            l.read(|r| {
                while let Ok(Some(rec)) = r.try_next(record_words) {
                    let n = record_words(rec);
                    assert!(rec as usize >= lo && rec as usize + n * 8 <= hi, "a record past the copy");
                    // SAFETY: inside the copy (checked just above).
                    let last = unsafe { (*rec.add(n - 1)).assume_init() };
                    std::hint::black_box(last);
                }
            });
        }
    }

    #[cfg(not(miri))]
    proptest::proptest! {
        /// Random batches cross byte-exact, and flipping any one word of
        /// the put range makes the batch refused.
        #[test]
        fn random_batches_round_trip_and_corruption_is_caught(
            sizes in proptest::collection::vec(2usize..40, 1..12),
            seq in 1u64..1_000_000,
            flip in 0usize..1000,
        ) {
            let (staging, landing) = (slot(), slot());
            // SAFETY: `fill` writes only the records it was asked for.
            let (n, _, range) = unsafe { staging.stage(seq, 0, |w| fill(w, &sizes, seq)) };
            // SAFETY: the staged range lies inside both slots, which do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(staging.as_ptr().add(range.start), landing.as_ptr().add(range.start).cast_mut(), range.len()) };
            let l = landing.land(seq).expect("complete");
            let recs = records(&l);
            proptest::prop_assert_eq!(recs.len(), n);
            for (i, r) in recs.iter().enumerate() {
                proptest::prop_assert_eq!(r.len(), sizes[i]);
                proptest::prop_assert_eq!(r[r.len() - 1], seq + (i * 100 + sizes[i] - 1) as u64);
            }
            // Corrupt one word of the data or trailer (not the sequence number).
            let words = range.len() / 8 - 1;
            let at = range.start / 8 + flip % words;
            landing.words[at].fetch_xor(1 << (flip % 64), Ordering::Relaxed);
            proptest::prop_assert!(landing.land(seq).is_none());
        }
    }
}
