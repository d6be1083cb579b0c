//! The client side of a worker: per-trustee queues of requests, flushing
//! them into request slots, and completing them from response slots.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use crate::channel::byte_queue::ByteQueue;
use crate::channel::record::{
    encode_request, record_words, request_words, take_response, take_value, value_words, Shim, FALLBACK_WORDS,
    MAX_FAR_INLINE_TAIL, MAX_INLINE_TAIL, TAIL_IN_BULK,
};
use crate::channel::remote::{self, code_header, code_offset, Tail, CODE_CACHE};
use crate::channel::slot::{BatchWriter, Word};
use crate::channel::word_queue::WordQueue;

use super::trustee::thread_shim;
use super::Worker;
use crate::channel::large;
use crate::fabric::gathers_another;
use crate::fabric::shm::region::{Square, FAR_DEPTH};

/// Payloads for the bulk area shorter than this wait packed in one buffer,
/// unless they came in a buffer of their own.
const SMALL_PAYLOAD: usize = 2048;

/// Payloads that came in a buffer of their own wait in it from this size
/// on; smaller ones are packed (2 processes, 2 cores: keeping their buffers
/// made echoes of 256 and 512 bytes 3-5 % slower, moving 1 KiB ones made
/// them 5 % faster).
const OWNED_PAYLOAD: usize = 1024;

/// The last word of a queued request whose payload waits in a buffer of
/// its own (`Lane::big`), until `Lane::fill` sets its offset in the bulk
/// area there; 0 for one packed in `Lane::small`.
const OWN_BUFFER: u64 = u64::MAX;

/// What to do with one response when it arrives.
#[derive(Clone, Copy)]
pub(crate) struct Completion {
    pub(crate) run: unsafe fn(&Worker, usize, *const (), *const Word),
    pub(crate) data: *const (),
}

/// Client-side state for one trustee: requests waiting for the slot, the
/// completions of everything issued, and stored `then` callbacks.
#[derive(Default)]
pub(crate) struct Lane {
    pub(super) pending: WordQueue,
    pub(super) completions: VecDeque<Completion>,
    pub(crate) thens: WordQueue,
    pub(super) in_flight: u32,
    pub(super) flag: u32,
    /// To another process: the client's copy of the code cache.
    pub(super) code_cache: [i64; CODE_CACHE],
    /// To another process: payloads waiting for the bulk area, in order,
    /// those under `SMALL_PAYLOAD` bytes packed in one reused buffer (no
    /// allocation per request), the larger ones, and those that came in a
    /// buffer of their own (see `OWNED_PAYLOAD`), in buffers of their own
    /// (measured: packing 4 KiB payloads too made the sender's copies
    /// three times slower, every payload landing in memory long out of
    /// cache, where a freed buffer is reused while still in cache).
    pub(super) small: ByteQueue,
    pub(super) big: VecDeque<Vec<u8>>,
    /// To another host: per batch slot, the put of the batch staged there,
    /// until its source may be reused.
    pub(super) puts: [Option<crate::fabric::Ticket>; FAR_DEPTH],
    /// To another host: the batches in flight, oldest first (requests,
    /// bulk bytes); the newest has sequence number `flag`. `in_flight`
    /// counts the requests of all of them.
    pub(super) far: VecDeque<(u32, usize)>,
}

impl Lane {
    /// Nothing queued and nothing in flight: a request queued now is sent
    /// at once, likely alone.
    pub(super) fn idle(&self) -> bool {
        self.in_flight == 0 && self.pending.is_empty()
    }

    /// To another host: the sequence number and request count of the
    /// oldest batch in flight.
    pub(super) fn oldest_far(&self) -> Option<(u32, u32)> {
        let &(count, _) = self.far.front()?;
        Some((self.flag.wrapping_sub(self.far.len() as u32 - 1), count))
    }

    /// Moves queued requests into a batch, in order, while they fit the
    /// writer and — for those whose payload goes to the pair's bulk area
    /// (`bulk`, `bulk_bytes` bytes; requests to another process only) —
    /// while their payloads fit it. Returns the records written and the
    /// bulk bytes used. With `gather` (to another host, over a fabric that
    /// gathers), payloads in buffers of their own (as many as
    /// `fabric::gathers_another` allows)
    /// are not copied into the bulk area but moved into `gather` with
    /// their offset there, for the send to take them from where they are;
    /// their bytes in the bulk area are left as they were.
    ///
    /// # Safety
    /// The caller owns the batch's slot and, if requests carry bulk
    /// payloads, the bulk area at `bulk`.
    pub(super) unsafe fn fill(
        &mut self,
        w: &mut BatchWriter,
        bulk: *mut u8,
        bulk_bytes: usize,
        mut gather: Option<&mut Vec<(usize, Vec<u8>)>>,
    ) -> (u32, usize) {
        let mut bulk_used = 0usize;
        while let Some(rec) = self.pending.front() {
            let words = record_words(rec);
            // SAFETY: queued records start with an initialised header, and
            // a bulk tail's length word is the record's last but one.
            // Until flushed, its last word says where the payload waits:
            // `OWN_BUFFER` in `big`, else packed in `small`.
            let big_len = unsafe {
                if (*rec).assume_init() & remote::FLAG_BULK_TAIL != 0 {
                    let len = ((*rec.add(words - 2)).assume_init() & !TAIL_IN_BULK) as usize;
                    if bulk_used + len > bulk_bytes {
                        break; // the next batch
                    }
                    Some((len, (*rec.add(words - 1)).assume_init() == OWN_BUFFER))
                } else {
                    None
                }
            };
            let Some(dst) = w.reserve(words, 0) else { break };
            // SAFETY: `rec` holds `words` words and `dst` has room for them;
            // the bulk area has room for the payload (checked above) and is
            // ours per the caller.
            unsafe {
                copy_words(rec, dst, words);
                if let Some((len, own)) = big_len {
                    if !own {
                        ptr::copy_nonoverlapping(self.small.front(len).as_ptr(), bulk.add(bulk_used), len);
                        self.small.pop(len);
                    } else {
                        let bytes = self.big.pop_front().expect("gossamer: bulk payload missing");
                        debug_assert_eq!(bytes.len(), len);
                        match gather.as_deref_mut() {
                            Some(g) if gathers_another(g.len(), len) => g.push((bulk_used, bytes)),
                            _ => ptr::copy_nonoverlapping(bytes.as_ptr(), bulk.add(bulk_used), len),
                        }
                    }
                    *dst.add(words - 1) = remote::word(bulk_used as u64);
                    bulk_used = (bulk_used + len).next_multiple_of(8);
                }
            }
            self.pending.pop(words);
        }
        (w.count(), bulk_used)
    }
}

/// Copies a record of `n` words. Records are mostly a few words long: a
/// fixed-size copy for those is a handful of moves, where a call to
/// `memcpy` would cost more than the copy.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `n` words, and they
/// must not overlap.
#[inline(always)]
unsafe fn copy_words(src: *const Word, dst: *mut Word, n: usize) {
    macro_rules! fixed {
        ($k:literal) => {
            // SAFETY: per the caller, `n == $k` words are readable at `src`
            // and writable at `dst`, without overlap.
            unsafe { ptr::write_unaligned(dst.cast::<[Word; $k]>(), ptr::read_unaligned(src.cast::<[Word; $k]>())) }
        };
    }
    match n {
        1 => fixed!(1),
        2 => fixed!(2),
        3 => fixed!(3),
        4 => fixed!(4),
        5 => fixed!(5),
        6 => fixed!(6),
        7 => fixed!(7),
        8 => fixed!(8),
        // SAFETY: as above.
        _ => unsafe { ptr::copy_nonoverlapping(src, dst, n) },
    }
}

impl Worker {
    /// Stops the program on a response batch from trustee `t` that cannot
    /// be read, naming the peer: only a broken peer writes one (peers are
    /// authenticated), and its requests' fibers could never be completed.
    #[cold]
    #[inline(never)]
    pub(super) fn malformed_responses(&self, t: usize, why: &str) -> ! {
        let whose = if self.shared.is_local(t) {
            "this process"
        } else if self.shared.same_host(t) {
            "another process on this host"
        } else {
            "another host"
        };
        panic!("gossamer: the response batch from thread {t} ({whose}) to thread {} is malformed: {why}", self.index)
    }
}

unsafe fn complete_ignore(w: &Worker, lane: usize, _data: *const (), rec: *const Word) {
    // SAFETY: messages sent by `Worker::send` answer `()`.
    if let Err(p) = unsafe { w.take_result::<()>(lane, rec) } {
        w.report_panic("runtime message", p);
    }
}

/// Who made a request that carries a closure (see `Worker::enqueue`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Call {
    /// A user's generic closure, given to the named call.
    User(&'static str),
    /// A `_with` form's closure to another simulated process, under strict
    /// mode: its code is a `fn`, its data already copied.
    Copied,
}

impl Worker {
    // ----- client side ---------------------------------------------------

    /// Queues a request carrying a user's closure `f` for trustee `t`; `c`
    /// runs when its response arrives. A generic closure never crosses
    /// processes (see `remote::refuse_closure`): to a trustee in another
    /// process (or another simulated one, see `runtime::strict`) this panics
    /// in the caller, naming the call and the `fn` form, before anything is
    /// queued. `Call::Copied` is a `_with` form's own closure under strict
    /// mode, whose argument and result were already copied as across
    /// processes.
    #[inline]
    pub(crate) fn enqueue<F>(&self, t: usize, shim: Shim, prop: *mut u8, f: F, c: Completion, call: Call) {
        debug_assert_ne!(t, self.index, "requests to oneself take the local shortcut");
        match call {
            Call::User(name) if self.shared.crosses(Some(self.index), t) => remote::refuse_closure::<F>(name, t),
            Call::Copied => assert!(self.shared.is_local(t), "gossamer: a copied request left the process"),
            _ => {}
        }
        self.enqueue_local(t, shim, prop, f, c)
    }

    #[inline]
    pub(super) fn enqueue_local<F>(&self, t: usize, shim: Shim, prop: *mut u8, f: F, c: Completion) {
        let mut lane = self.lanes[t].borrow_mut();
        let dst = lane.pending.alloc(request_words::<F>());
        // SAFETY: `alloc` returned room for the whole record.
        unsafe { encode_request(dst, shim, prop, f) };
        lane.completions.push_back(c);
    }

    /// Queues a request for trustee `t` in another process whose user code
    /// is the `fn` at `code` (a `fn` pointer's address, which crosses as its
    /// offset from the anchor: see `remote::fn_at`), with an optional tail
    /// of serialized bytes. `shim` must read that offset as its environment.
    pub(crate) fn enqueue_remote_fn(
        &self,
        t: usize,
        shim: Shim,
        prop: *mut u8,
        code: usize,
        tail: Option<Tail<'_>>,
        c: Completion,
    ) {
        self.encode_remote_tail(t, shim, prop, remote::fn_offset(code), tail, c)
    }

    /// Queues a runtime message for trustee `t` in another process: code
    /// named by offset (or cache index), the environment `f` copied as it
    /// is, and an optional tail of serialized bytes (inline, or later copied
    /// to the bulk area). Only for the runtime's own messages, whose
    /// environments hold only data meaningful in the receiving process (a
    /// property's address there, a trust id, a `fn` offset): never a user's
    /// closure.
    pub(crate) fn encode_remote<F>(
        &self,
        t: usize,
        shim: Shim,
        prop: *mut u8,
        f: F,
        tail: Option<&[u8]>,
        c: Completion,
    ) {
        self.encode_remote_tail(t, shim, prop, f, tail.map(Tail::Borrowed), c)
    }

    /// [`encode_remote`](Self::encode_remote) with a tail that may be
    /// owned: an owned tail that goes to the bulk area in a buffer of its
    /// own is queued as it is, not copied.
    pub(crate) fn encode_remote_tail<F>(
        &self,
        t: usize,
        shim: Shim,
        prop: *mut u8,
        f: F,
        owned_tail: Option<Tail<'_>>,
        c: Completion,
    ) {
        let tail = owned_tail.as_ref().map(Tail::bytes);
        assert!(
            crate::channel::record::inline_ok::<F>(),
            "gossamer: a runtime message of {} bytes cannot be sent to another process",
            std::mem::size_of::<F>()
        );
        let (bulk_bytes, inline_max) = if self.shared.same_host(t) {
            (self.shared.region.bulk_bytes(), MAX_INLINE_TAIL)
        } else if self.lanes[t].borrow().idle() {
            // Likely alone in its batch (a blocking request): inline, so
            // that the batch crosses in one put.
            (self.shared.region.shape().far_bulk, MAX_FAR_INLINE_TAIL)
        } else {
            // Part of a stream: the bulk area fits more requests per batch.
            (self.shared.region.shape().far_bulk, MAX_INLINE_TAIL)
        };
        // Every check that may refuse the request comes before the code
        // cache is touched: the client's copy of the cache must change only
        // for a request the trustee will see, or the two fall out of step
        // and a later cache index would name the wrong code.
        let (tail_words, in_bulk, assembled) = match tail {
            None => (0, false, false),
            Some(b) if b.len() <= inline_max => (1 + remote::byte_words(b.len()), false, false),
            Some(b) if b.len() <= bulk_bytes => (2, true, false),
            Some(b) => {
                // Larger than the bulk area: the chunks go first, each a
                // request of its own, then this request names them.
                assert!(bulk_bytes > 0, "gossamer: no bulk area for an argument of {} bytes", b.len());
                let total = b.len() as u64;
                let mut offset = 0u64;
                for chunk in b.chunks(large::chunk_bytes(bulk_bytes)) {
                    let c = Completion { run: complete_ignore, data: ptr::null() };
                    self.encode_remote(t, large::append_shim, ptr::null_mut(), (offset, total), Some(chunk), c);
                    offset += chunk.len() as u64;
                }
                (1, false, true)
            }
        };
        let mut lane = self.lanes[t].borrow_mut();
        let (code_flags, full) = code_header(&mut lane.code_cache, code_offset(shim));
        let env_words = value_words::<F>();
        // A record is never shorter than the largest fallback response, so
        // that the responses to a full batch always fit their slot (a
        // request with cached code, nothing captured and no argument takes
        // two words; its answer may take three): the word it lacks is a
        // zero pad at its end, which no decoder reads.
        let used = 1 + full as usize + 1 + env_words + tail_words;
        let words = used.max(FALLBACK_WORDS);
        let flags = code_flags | if in_bulk { remote::FLAG_BULK_TAIL } else { 0 };
        // A payload for the bulk area waits in a buffer of its own if it is
        // large or came in one (moved, not copied) of `OWNED_PAYLOAD` bytes
        // or more, else packed.
        let len = tail.map_or(0, <[u8]>::len);
        let owned = matches!(owned_tail, Some(Tail::Owned(_)));
        let own_buffer = in_bulk && (len >= SMALL_PAYLOAD || (owned && len >= OWNED_PAYLOAD));
        let dst = lane.pending.alloc(words);
        // SAFETY: `alloc` returned `words` words, filled in order here.
        unsafe {
            for i in used..words {
                *dst.add(i) = remote::word(0);
            }
            *dst = remote::word(words as u64 | flags);
            let mut at = 1;
            if full {
                *dst.add(at) = remote::word(code_offset(shim) as u64);
                at += 1;
            }
            *dst.add(at) = remote::word(prop.expose_provenance() as u64);
            at += 1;
            remote::put_env(dst.add(at), f);
            at += env_words;
            match tail {
                None => {}
                Some(b) if assembled => *dst.add(at) = remote::word(b.len() as u64 | large::TAIL_ASSEMBLED),
                Some(b) if !in_bulk => {
                    *dst.add(at) = remote::word(b.len() as u64);
                    remote::put_bytes(dst.add(at + 1), b);
                }
                Some(b) => {
                    *dst.add(at) = remote::word(b.len() as u64 | TAIL_IN_BULK);
                    // Where the payload waits; the offset once flushed.
                    *dst.add(at + 1) = remote::word(if own_buffer { OWN_BUFFER } else { 0 });
                }
            }
        }
        if in_bulk {
            match owned_tail {
                Some(b) if !own_buffer => lane.small.push(b.bytes()),
                Some(Tail::Owned(b)) => lane.big.push_back(b),
                b => lane.big.push_back(b.map(|b| b.bytes().to_vec()).unwrap_or_default()),
            }
        }
        lane.completions.push_back(c);
    }

    /// Stores a `then` callback for lane `t`, to be taken by its completion.
    #[inline]
    pub(crate) fn store_then<G>(&self, t: usize, g: G) {
        let words = value_words::<G>();
        if words == 0 {
            std::mem::forget(g); // zero-sized: nothing to store, conjured back by `take_then`
            return;
        }
        let mut lane = self.lanes[t].borrow_mut();
        let dst = lane.thens.alloc(words);
        // SAFETY: room for `words` words.
        unsafe { crate::channel::record::put_value(dst, g) };
    }

    /// Takes the result in the response at `rec` on lane `t`, from this
    /// process (moved) or another (deserialized).
    ///
    /// # Safety
    /// `rec` must be the response to a request whose result type is `U`.
    #[inline]
    pub(crate) unsafe fn take_result<U: serde::de::DeserializeOwned + 'static>(
        &self,
        t: usize,
        rec: *const Word,
    ) -> std::thread::Result<U> {
        // SAFETY: per the contract; a remote response's bulk payload lies in
        // the pair's response area, unchanged until our next batch. Which
        // form to read follows from where the trustee is, never from the
        // record's tag, which another process wrote.
        unsafe {
            if self.shared.is_local(t) {
                take_response::<U>(rec)
            } else {
                let (bulk, bulk_bytes) = if self.shared.same_host(t) {
                    (self.shared.region.bulk(self.index, t, true), self.shared.region.bulk_bytes())
                } else {
                    let k = self.far_landing.get();
                    (
                        self.shared.region.far_bulk(Square::ResponseBulkLanding, self.index, t, k),
                        self.shared.region.shape().far_bulk,
                    )
                };
                crate::channel::record::take_remote_response::<U>(rec, bulk, bulk_bytes, t)
            }
        }
    }

    /// Takes the oldest stored `then` callback of lane `t`.
    ///
    /// # Safety
    /// The oldest stored callback of the lane must be a `G`.
    #[inline]
    pub(crate) unsafe fn take_then<G>(&self, t: usize) -> G {
        let words = value_words::<G>();
        if words == 0 {
            // SAFETY: `G` is zero-sized; any aligned pointer reads one.
            return unsafe { ptr::read(NonNull::<G>::dangling().as_ptr()) };
        }
        let mut lane = self.lanes[t].borrow_mut();
        let p = lane.thens.front().expect("gossamer: then-callback queue out of step");
        // SAFETY: per the caller, a `G` is stored at the front.
        let g = unsafe { take_value::<G>(p) };
        lane.thens.pop(words);
        g
    }

    /// Runs `f` on thread `t` of any process, asynchronously (at once if
    /// `t` is us). For the runtime's own messages only: `f` is plain data
    /// whose addresses, if any, are the receiver's (a property's address on
    /// its trustee), so its bytes may cross processes.
    pub(crate) fn send_plain<F: FnOnce() + Send + Copy + 'static>(&self, t: usize, f: F) {
        self.send_any(t, f)
    }

    /// Runs `f` on worker `t`'s thread of this process, asynchronously (at
    /// once if `t` is us).
    pub(crate) fn send<F: FnOnce() + Send + 'static>(&self, t: usize, f: F) {
        assert!(self.shared.is_local(t), "gossamer: internal message with owned data to another process");
        self.send_any(t, f)
    }

    pub(super) fn send_any<F: FnOnce() + Send + 'static>(&self, t: usize, f: F) {
        if t == self.index {
            let _g = self.enter_delegated();
            if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
                self.report_panic("runtime message", p);
            }
        } else {
            let c = Completion { run: complete_ignore, data: ptr::null() };
            if self.shared.is_local(t) {
                self.enqueue_local(t, thread_shim::<F>, ptr::null_mut(), f, c);
            } else {
                // Only `send_plain` reaches here: its closures are the
                // runtime's own, capturing addresses of the receiver.
                self.encode_remote(t, thread_shim::<F>, ptr::null_mut(), f, None, c);
            }
        }
    }

    pub(super) fn flush(&self, t: usize) -> bool {
        if !self.shared.same_host(t) {
            return self.flush_far(t);
        }
        let mut lane = self.lanes[t].borrow_mut();
        if lane.in_flight != 0 || lane.pending.is_empty() {
            return false;
        }
        let slot = self.shared.matrix.request(self.index, t);
        let (bulk, bulk_bytes) = if self.shared.is_local(t) {
            (ptr::null_mut(), 0)
        } else {
            (self.shared.region.bulk(self.index, t, false), self.shared.region.bulk_bytes())
        };
        // SAFETY: we are the slot's only writer, and `in_flight == 0` means the
        // trustee answered our last batch, so it no longer reads the slot or
        // the pair's request bulk area. (Requests within the process carry
        // no bulk tails.)
        let (count, _) = unsafe { slot.write(0, |w| lane.fill(w, bulk, bulk_bytes, None)) };
        assert!(count > 0, "gossamer: a request larger than a slot was queued");
        lane.flag ^= 1;
        lane.in_flight = count;
        slot.publish(lane.flag);
        drop(lane);
        self.shared.wake(t);
        if crate::runtime::profile::active() {
            crate::runtime::profile::counters::batch_sent(self, t, count);
        }
        true
    }

    /// Requests to trustee `t` not yet answered: still queued, and in a
    /// published batch (for stuck dumps).
    pub(crate) fn backlog(&self, t: usize) -> (usize, usize) {
        let l = self.lanes[t].borrow();
        let in_flight = l.in_flight as usize;
        (l.completions.len().saturating_sub(in_flight), in_flight)
    }

    /// Fibers alive on this worker.
    pub(crate) fn live_fibers(&self) -> usize {
        self.live.get()
    }

    pub(super) fn flush_all(&self) -> bool {
        let mut did = false;
        for t in 0..self.shared.n {
            did |= self.flush(t);
        }
        did
    }

    pub(super) fn poll(&self) -> bool {
        let mut did = false;
        for t in 0..self.shared.n {
            let (in_flight, flag) = {
                let l = self.lanes[t].borrow();
                (l.in_flight, l.flag)
            };
            if in_flight == 0 {
                continue;
            }
            if !self.shared.same_host(t) {
                // Both batches in flight may have landed.
                while self.poll_far(t) {
                    did = true;
                }
                continue;
            }
            let slot = self.shared.matrix.response(self.index, t);
            if slot.flag() != flag {
                continue;
            }
            // SAFETY: the trustee published this batch's responses, and will
            // not write the slot again before we publish another request.
            unsafe {
                slot.read(|r| {
                    if r.count() != in_flight {
                        self.malformed_responses(t, &format!("{} responses to {in_flight} requests", r.count()));
                    }
                    while let Some(rec) =
                        r.try_next(record_words).unwrap_or_else(|why| self.malformed_responses(t, why))
                    {
                        let c = self.lanes[t]
                            .borrow_mut()
                            .completions
                            .pop_front()
                            .expect("gossamer: response without request");
                        // A completion may run user code (a then-callback,
                        // a result's or a callback's drop): never let it
                        // unwind into the loop.
                        if let Err(p) = catch_unwind(AssertUnwindSafe(|| (c.run)(self, t, c.data, rec))) {
                            self.report_panic("completion", p);
                        }
                    }
                })
            };
            self.lanes[t].borrow_mut().in_flight = 0;
            did = true;
        }
        did
    }
}

impl Worker {
    /// Whether requests from this thread to trustee `t` are still queued or
    /// waiting for their responses.
    pub(crate) fn has_outstanding(&self, t: usize) -> bool {
        let lane = self.lanes[t].borrow();
        !lane.pending.is_empty() || !lane.completions.is_empty()
    }
}
