//! One direction of a (client, trustee) channel: a two-part slot and the
//! flag protocol that hands it back and forth.
//!
//! A slot is a 128-byte *primary* block (the ready flag, the batch's
//! length, and 112 bytes of records) plus a 1024-byte *overflow* block kept
//! in a separate array, so that a trustee scanning many idle slots touches
//! one cache-line pair per client rather than a whole kilobyte.
//!
//! The slot has exactly one writer. It writes records and the length, then
//! publishes them with a *release store* of the flag; the reader notices
//! the flag change with an *acquire load*, after which everything written
//! before the store is visible. Nothing here uses a lock or an atomic
//! read-modify-write.

use std::mem::MaybeUninit;

use crate::sync::{AtomicU32, DataCell, Ordering};

/// Bytes of record space in a primary block.
pub const PRIMARY_DATA_BYTES: usize = 112;
/// Bytes of record space in an overflow block.
pub const OVERFLOW_BYTES: usize = 1024;
/// Words (8 bytes) of record space in a primary block.
pub(crate) const PRIMARY_WORDS: usize = PRIMARY_DATA_BYTES / 8;
/// Words of record space in an overflow block.
pub(crate) const OVERFLOW_WORDS: usize = OVERFLOW_BYTES / 8;

pub(crate) type Word = MaybeUninit<u64>;

/// How much of the slot a batch fills, in words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) count: u32,
    pub(crate) primary: u16,
    pub(crate) overflow: u16,
}

/// The first part of a slot: flag, length and the first records.
#[repr(C, align(128))]
pub struct Primary {
    flag: AtomicU32,
    meta: DataCell<Meta>,
    data: DataCell<[Word; PRIMARY_WORDS]>,
}

/// The second part of a slot, used when the primary block is full.
#[repr(C, align(64))]
pub struct Overflow {
    data: DataCell<[Word; OVERFLOW_WORDS]>,
}

impl Default for Primary {
    fn default() -> Self {
        Primary {
            flag: AtomicU32::new(0),
            meta: DataCell::new(Meta::default()),
            data: DataCell::new([MaybeUninit::uninit(); PRIMARY_WORDS]),
        }
    }
}

impl Default for Overflow {
    fn default() -> Self {
        Overflow { data: DataCell::new([MaybeUninit::uninit(); OVERFLOW_WORDS]) }
    }
}

// SAFETY: the slot's data is only accessed under the single-writer flag
// protocol described at the top of this module: the writer touches it only
// while it owns the slot, and the reader only after an acquire load of the
// flag that the writer published with a release store.
unsafe impl Sync for Primary {}
// SAFETY: as for `Primary`.
unsafe impl Sync for Overflow {}

/// A slot seen as its two parts.
#[derive(Clone, Copy)]
pub(crate) struct Slot<'a> {
    pub(crate) primary: &'a Primary,
    pub(crate) overflow: &'a Overflow,
}

impl<'a> Slot<'a> {
    /// The flag as last published (acquire: the batch behind it is visible).
    #[inline]
    pub(crate) fn flag(&self) -> u32 {
        self.primary.flag.load(Ordering::Acquire)
    }

    /// Publishes the batch written so far.
    #[inline]
    pub(crate) fn publish(&self, flag: u32) {
        self.primary.flag.store(flag, Ordering::Release);
    }

    /// Fills the slot through a [`BatchWriter`].
    ///
    /// # Safety
    /// The caller must be the slot's writer and own it: the reader has
    /// consumed the previous batch (or none was published).
    #[inline]
    pub(crate) unsafe fn write<R>(&self, reserve_words: usize, f: impl FnOnce(&mut BatchWriter) -> R) -> R {
        self.primary.data.with_mut(|p| {
            self.overflow.data.with_mut(|o| {
                let mut w = BatchWriter {
                    primary: p.cast(),
                    overflow: o.cast(),
                    primary_cap: PRIMARY_WORDS,
                    overflow_cap: OVERFLOW_WORDS,
                    meta: Meta::default(),
                    in_overflow: false,
                    reserve_words,
                };
                let r = f(&mut w);
                let meta = w.meta;
                self.primary.meta.with_mut(|m| {
                    // SAFETY: the caller owns the slot.
                    unsafe { *m = meta }
                });
                r
            })
        })
    }

    /// Reads the published batch through a [`BatchReader`].
    ///
    /// # Safety
    /// The caller must have seen, with [`Slot::flag`], a flag value published
    /// after the batch was written, and the writer must not start the next
    /// batch until the caller says it is done.
    ///
    /// The batch's length comes from its writer, which may be another
    /// process: a length past either block is not trusted — the reader
    /// then yields no record, and [`BatchReader::try_next`] says why.
    #[inline]
    pub(crate) unsafe fn read<R>(&self, f: impl FnOnce(&mut BatchReader) -> R) -> R {
        // SAFETY: per the caller's contract the batch is complete and stable.
        let meta = self.primary.meta.with(|m| unsafe { *m });
        let bad = check_meta(meta, PRIMARY_WORDS, OVERFLOW_WORDS);
        let meta = if bad.is_some() { Meta { count: meta.count, ..Meta::default() } } else { meta };
        self.primary.data.with(|p| {
            self.overflow.data.with(|o| {
                let mut r = BatchReader {
                    primary: p.cast(),
                    overflow: o.cast(),
                    meta,
                    pos: 0,
                    in_overflow: false,
                    left: meta.count,
                    bad,
                };
                f(&mut r)
            })
        })
    }
}

/// Why a batch's length cannot be right: words past a block, or more
/// records than words (every record has at least its header word).
fn check_meta(m: Meta, primary_cap: usize, overflow_cap: usize) -> Option<&'static str> {
    if m.primary as usize > primary_cap || m.overflow as usize > overflow_cap {
        Some("its length runs past the slot")
    } else if m.count as usize > m.primary as usize + m.overflow as usize {
        Some("it counts more records than it has words")
    } else {
        None
    }
}

/// Appends whole records to a slot: to the primary block while they fit,
/// then to the overflow block (never back, so records stay in order). A
/// contiguous slot (between hosts) is a primary block with no overflow.
pub(crate) struct BatchWriter {
    primary: *mut Word,
    overflow: *mut Word,
    primary_cap: usize,
    overflow_cap: usize,
    meta: Meta,
    in_overflow: bool,
    /// Words to keep free for each record still to come (responses only).
    reserve_words: usize,
}

impl BatchWriter {
    /// A writer over `cap` contiguous words at `at`.
    ///
    /// # Safety
    /// `at` must be valid for writes of `cap` words while the writer lives,
    /// and owned by the caller.
    pub(crate) unsafe fn contiguous(at: *mut Word, cap: usize, reserve_words: usize) -> Self {
        BatchWriter {
            primary: at,
            overflow: std::ptr::null_mut(),
            primary_cap: cap,
            overflow_cap: 0,
            meta: Meta::default(),
            in_overflow: false,
            reserve_words,
        }
    }

    /// Words used so far (a contiguous writer's batch is `[0, used)`).
    pub(crate) fn used_words(&self) -> usize {
        self.meta.primary as usize + self.meta.overflow as usize
    }

    /// Number of records written.
    pub(crate) fn count(&self) -> u32 {
        self.meta.count
    }

    /// Where a record of `words` words would go, without taking it.
    fn place(&self, words: usize) -> Option<(bool, usize)> {
        if !self.in_overflow && self.meta.primary as usize + words <= self.primary_cap {
            Some((false, self.meta.primary as usize))
        } else if self.meta.overflow as usize + words <= self.overflow_cap {
            Some((true, self.meta.overflow as usize))
        } else {
            None
        }
    }

    /// How many records of `reserve_words` still fit after placing `words`.
    fn room_after(&self, words: usize) -> Option<usize> {
        let (over, at) = self.place(words)?;
        let r = self.reserve_words.max(1);
        let (prim_left, over_left) = if over {
            (0, self.overflow_cap - at - words)
        } else {
            (self.primary_cap - at - words, self.overflow_cap - self.meta.overflow as usize)
        };
        Some(prim_left / r + over_left / r)
    }

    /// Takes room for a record of `words` words, provided that `keep` more
    /// records of the reserve size still fit afterwards.
    #[inline]
    pub(crate) fn reserve(&mut self, words: usize, keep: usize) -> Option<*mut Word> {
        debug_assert!(words > 0);
        if keep > 0 && self.room_after(words)? < keep {
            return None;
        }
        let (over, at) = self.place(words)?;
        self.meta.count += 1;
        if over {
            self.in_overflow = true;
            self.meta.overflow = (at + words) as u16;
            // SAFETY: `at + words <= overflow_cap` was checked by `place`.
            Some(unsafe { self.overflow.add(at) })
        } else {
            self.meta.primary = (at + words) as u16;
            // SAFETY: `at + words <= primary_cap` was checked by `place`.
            Some(unsafe { self.primary.add(at) })
        }
    }
}

/// Walks the records of a published batch in order.
pub(crate) struct BatchReader {
    primary: *const Word,
    overflow: *const Word,
    meta: Meta,
    pos: usize,
    in_overflow: bool,
    left: u32,
    /// Why the batch's length was refused (then no record is read).
    bad: Option<&'static str>,
}

impl BatchReader {
    /// A reader of `count` records in `words` contiguous words at `at`.
    ///
    /// # Safety
    /// `at` must be valid for reads of `words` words while the reader lives.
    pub(crate) unsafe fn contiguous(at: *const Word, count: u32, words: usize) -> Self {
        let meta = Meta { count, primary: words.min(u16::MAX as usize) as u16, overflow: 0 };
        let bad =
            if words > u16::MAX as usize { Some("its length runs past the slot") } else { check_meta(meta, words, 0) };
        BatchReader {
            primary: at,
            overflow: std::ptr::null(),
            meta: if bad.is_some() { Meta { count, ..Meta::default() } } else { meta },
            pos: 0,
            in_overflow: false,
            left: count,
            bad,
        }
    }

    /// Records in the batch.
    pub(crate) fn count(&self) -> u32 {
        self.meta.count
    }

    /// The next record; `words_of` reads a record's length from its first word.
    ///
    /// # Panics
    /// If the batch is malformed (see [`try_next`](Self::try_next)).
    #[inline]
    pub(crate) fn next(&mut self, words_of: impl Fn(*const Word) -> usize) -> Option<*const Word> {
        self.try_next(words_of).unwrap_or_else(|why| panic!("gossamer: malformed batch: {why}"))
    }

    /// The next record, whose `words_of(rec)` words all lie inside its
    /// block; or why the batch cannot be read on. Every record is checked
    /// before it is handed out, so a batch written by another process with
    /// wrong lengths is refused, never read out of bounds. After an error
    /// the rest of the batch cannot be found: every later call fails too.
    #[inline]
    pub(crate) fn try_next(
        &mut self,
        words_of: impl Fn(*const Word) -> usize,
    ) -> Result<Option<*const Word>, &'static str> {
        if self.left == 0 {
            return Ok(None);
        }
        if let Some(why) = self.bad {
            return Err(why);
        }
        if !self.in_overflow && self.pos >= self.meta.primary as usize {
            self.in_overflow = true;
            self.pos = 0;
        }
        let (base, limit) = if self.in_overflow {
            (self.overflow, self.meta.overflow as usize)
        } else {
            (self.primary, self.meta.primary as usize)
        };
        if self.pos >= limit {
            self.bad = Some("a record lies past its block");
            return Err("a record lies past its block");
        }
        // SAFETY: `pos < limit <= block size`, checked just above.
        let rec = unsafe { base.add(self.pos) };
        let words = words_of(rec);
        if words == 0 || words > limit - self.pos {
            self.bad = Some("a record's length runs past its block");
            return Err("a record's length runs past its block");
        }
        self.left -= 1;
        self.pos += words;
        Ok(Some(rec))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn words(rec: *const Word) -> usize {
        // SAFETY: tests only write initialised header words.
        unsafe { (*rec).assume_init() as usize }
    }

    #[test]
    fn primary_block_is_one_128_byte_line_pair() {
        assert_eq!(std::mem::size_of::<Primary>(), 128);
        assert_eq!(std::mem::size_of::<Overflow>(), 1024);
    }

    #[test]
    fn records_fill_primary_then_overflow_in_order() {
        let (p, o) = (Primary::default(), Overflow::default());
        let slot = Slot { primary: &p, overflow: &o };
        let sizes = [3usize, 5, 3, 7, 1, 9, 2, 120];
        // SAFETY: single-threaded test owns the slot.
        let n = unsafe {
            slot.write(0, |w| {
                for (i, &s) in sizes.iter().enumerate() {
                    let Some(dst) = w.reserve(s, 0) else { break };
                    for k in 0..s {
                        *dst.add(k) = MaybeUninit::new(if k == 0 { s as u64 } else { (i * 1000 + k) as u64 });
                    }
                }
                w.count()
            })
        };
        assert_eq!(n, 7, "the 120-word record does not fit after the others");
        slot.publish(1);
        assert_eq!(slot.flag(), 1);
        // SAFETY: the batch was published above.
        let seen: Vec<(usize, u64)> = unsafe {
            slot.read(|r| {
                let mut v = Vec::new();
                while let Some(rec) = r.next(words) {
                    let w = words(rec);
                    let last = if w > 1 { (*rec.add(w - 1)).assume_init() } else { 0 };
                    v.push((w, last));
                }
                v
            })
        };
        assert_eq!(seen.len(), 7);
        for (i, (w, last)) in seen.iter().enumerate() {
            assert_eq!(*w, sizes[i]);
            if *w > 1 {
                assert_eq!(*last, (i * 1000 + w - 1) as u64);
            }
        }
    }

    #[test]
    fn reserve_keeps_room_for_fallback_records() {
        let (p, o) = (Primary::default(), Overflow::default());
        let slot = Slot { primary: &p, overflow: &o };
        // SAFETY: single-threaded test owns the slot.
        unsafe {
            slot.write(3, |w| {
                // 46 three-word records fit in total (4 in primary, 42 in overflow).
                let total = PRIMARY_WORDS / 3 + OVERFLOW_WORDS / 3;
                assert_eq!(total, 46);
                // A big record is refused if it would leave no room for 45 more.
                assert!(w.reserve(100, total - 1).is_none());
                for i in 0..total {
                    assert!(w.reserve(3, total - 1 - i).is_some(), "record {i}");
                }
                assert!(w.reserve(3, 0).is_none());
            })
        }
    }
}

/// What another process may leave in a slot: any length, any count, any
/// record headers. The reader hands out only records that lie inside their
/// block, and refuses the rest (run under Miri too, which would report any
/// read out of bounds).
#[cfg(all(test, not(loom)))]
mod malformed_tests {
    use super::*;
    use proptest::prelude::*;

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: if cfg!(miri) { 12 } else { 256 },
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    fn words(rec: *const Word) -> usize {
        // SAFETY: the test initialises every word of both blocks.
        (unsafe { (*rec).assume_init() } & 0xffff_ffff) as usize
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn any_slot_contents_are_read_inside_the_blocks_or_refused(
            count in 0u32..300,
            primary in 0u16..40,
            overflow in 0u16..200,
            headers in proptest::collection::vec(0u64..40, 1..64),
        ) {
            let (p, o) = (Primary::default(), Overflow::default());
            // Every word initialised, the headers cycled through them.
            let (pw, ow) = (p.data.with_mut(|d| d.cast::<Word>()), o.data.with_mut(|d| d.cast::<Word>()));
            for i in 0..PRIMARY_WORDS {
                // SAFETY: inside the primary block.
                unsafe { *pw.add(i) = MaybeUninit::new(headers[i % headers.len()]) };
            }
            for i in 0..OVERFLOW_WORDS {
                // SAFETY: inside the overflow block.
                unsafe { *ow.add(i) = MaybeUninit::new(headers[(i + 7) % headers.len()]) };
            }
            // SAFETY: the test owns the slot.
            p.meta.with_mut(|m| unsafe { *m = Meta { count, primary, overflow } });
            let slot = Slot { primary: &p, overflow: &o };
            let blocks = [(pw as usize, PRIMARY_WORDS), (ow as usize, OVERFLOW_WORDS)];
            // SAFETY: the batch is "published" and stable: nobody writes it.
            let (seen, refused) = unsafe {
                slot.read(|r| {
                    let (mut seen, mut refused) = (0u32, false);
                    loop {
                        match r.try_next(words) {
                            Ok(Some(rec)) => {
                                let (n, at) = (words(rec), rec as usize);
                                let inside = blocks.iter().any(|&(b, cap)| at >= b && at + n * 8 <= b + cap * 8);
                                assert!(inside, "a record handed out past its block");
                                // Read the whole record, as a decoder would.
                                let sum = (0..n).map(|k| (*rec.add(k)).assume_init()).fold(0u64, u64::wrapping_add);
                                std::hint::black_box(sum);
                                seen += 1;
                            }
                            Ok(None) => break,
                            Err(_) => {
                                refused = true;
                                assert!(r.try_next(words).is_err(), "a refused batch stays refused");
                                break;
                            }
                        }
                    }
                    (seen, refused)
                })
            };
            prop_assert!(refused || seen == count);
            prop_assert!(seen <= count);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model check of the flag protocol: a client publishes two batches in
    //! turn, the trustee answers each, and no access to slot data races.
    use super::*;
    use loom::sync::Arc;

    fn words(rec: *const Word) -> usize {
        // SAFETY: the test writes initialised header words only.
        unsafe { (*rec).assume_init() as usize }
    }

    struct Pair {
        req: (Primary, Overflow),
        resp: (Primary, Overflow),
    }

    fn slot(p: &(Primary, Overflow)) -> Slot<'_> {
        Slot { primary: &p.0, overflow: &p.1 }
    }

    #[test]
    fn request_response_round_trips_are_race_free() {
        loom::model(|| {
            let pair = Arc::new(Pair {
                req: (Primary::default(), Overflow::default()),
                resp: (Primary::default(), Overflow::default()),
            });
            let t = pair.clone();
            let trustee = loom::thread::spawn(move || {
                let mut served = 0u32;
                for _ in 0..2 {
                    let req = slot(&t.req);
                    let f = loop {
                        let f = req.flag();
                        if f != served {
                            break f;
                        }
                        loom::thread::yield_now();
                    };
                    // SAFETY: flag observed; the client waits for our answer.
                    let sum: u64 = unsafe {
                        req.read(|r| {
                            let mut s = 0;
                            while let Some(rec) = r.next(words) {
                                s += (*rec.add(1)).assume_init();
                            }
                            s
                        })
                    };
                    let resp = slot(&t.resp);
                    // SAFETY: the client reads responses only after our flag.
                    unsafe {
                        resp.write(0, |w| {
                            let d = w.reserve(2, 0).unwrap();
                            *d = MaybeUninit::new(2);
                            *d.add(1) = MaybeUninit::new(sum);
                        })
                    };
                    resp.publish(f);
                    served = f;
                }
            });
            let mut flag = 0u32;
            for round in 0..2u64 {
                let req = slot(&pair.req);
                // SAFETY: the trustee answered the previous batch (or none yet).
                unsafe {
                    req.write(0, |w| {
                        for k in 0..3 {
                            let d = w.reserve(2, 0).unwrap();
                            *d = MaybeUninit::new(2);
                            *d.add(1) = MaybeUninit::new(round * 10 + k);
                        }
                    })
                };
                flag ^= 1;
                req.publish(flag);
                let resp = slot(&pair.resp);
                while resp.flag() != flag {
                    loom::thread::yield_now();
                }
                // SAFETY: the trustee published its answer.
                let got = unsafe { resp.read(|r| (*r.next(words).unwrap().add(1)).assume_init()) };
                assert_eq!(got, round * 30 + 3);
            }
            trustee.join().unwrap();
        });
    }
}
