//! One worker OS thread: its fibers and ready queue, its trustee duties
//! (serving request slots), its client duties (flushing queued requests,
//! polling responses), and idling without burning the core.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::channel::record::{
    dispatch, encode_request, record_words, request_words, take_response, take_value, value_words, Responder, Shim,
    FALLBACK_WORDS,
};
use crate::channel::record::{dispatch_remote, Far, MAX_INLINE_TAIL, TAIL_IN_BULK};
use crate::channel::remote::{self, code_header, code_offset, CODE_CACHE};
use crate::channel::slot::Word;
use crate::channel::word_queue::WordQueue;
use crate::fiber::{self, Fiber, StackPool};
use crate::trust::property::Header;

use super::shared::Shared;

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
    pending: WordQueue,
    completions: VecDeque<Completion>,
    pub(crate) thens: WordQueue,
    in_flight: u32,
    flag: u32,
    /// To another process: the client's copy of the code cache.
    code_cache: [i64; CODE_CACHE],
    /// To another process: payloads waiting for the bulk area, in order.
    big: VecDeque<Vec<u8>>,
}

/// The message of the panic raised by a blocking call where none may block.
pub(crate) const BLOCKING_IN_DELEGATED: &str = "gossamer: a blocking call (apply, launch, join, Latch::lock on a held \
latch) was made in delegated context (inside a delegated closure, a then-callback or the trustee) where nothing may \
suspend; use apply_then to continue asynchronously, or make the outer call a launch() on a Trust<Latch<T>> so that \
the closure runs in a fiber that may block";

const NO_FIBER: u32 = u32::MAX;

/// How long the worker has found nothing to do.
#[derive(Default)]
struct Idle {
    rounds: u32,
    since: Option<Instant>,
}

pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    fibers: RefCell<Vec<Option<Fiber>>>,
    free_fibers: RefCell<Vec<u32>>,
    ready: RefCell<VecDeque<u32>>,
    current: Cell<u32>,
    delegated: Cell<bool>,
    pub(crate) lanes: Box<[RefCell<Lane>]>,
    /// Per client: the last request flag served (the trustee's side).
    served: Box<[Cell<u32>]>,
    /// Per client in another process: the trustee's copy of the code cache.
    codes: Box<[Cell<[i64; CODE_CACHE]>]>,
    pool: RefCell<StackPool>,
    properties: RefCell<Vec<*mut Header>>,
    pub(crate) cleaning: Cell<bool>,
    next_id: Cell<u64>,
    live: Cell<usize>,
    rr: Cell<usize>,
    quiet: Cell<bool>,
    /// Local-shortcut `apply` calls since the running fiber last suspended.
    local_streak: Cell<u32>,
}

/// Restores the delegated-context flag when dropped.
pub(crate) struct DelegatedGuard<'a> {
    w: &'a Worker,
    prev: bool,
}

impl Drop for DelegatedGuard<'_> {
    fn drop(&mut self) {
        self.w.delegated.set(self.prev);
    }
}

/// Runs a message for a thread (no property) and answers `()`.
unsafe fn thread_shim<F: FnOnce()>(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: `env` holds the `F` that `Worker::send` encoded with this shim.
    let f: F = unsafe { take_value(env as *const Word) };
    out.put_any::<()>(catch_unwind(AssertUnwindSafe(f)));
}

unsafe fn complete_ignore(w: &Worker, lane: usize, _data: *const (), rec: *const Word) {
    // SAFETY: messages sent by `Worker::send` answer `()`.
    if let Err(p) = unsafe { w.take_result::<()>(lane, rec) } {
        w.report_panic("runtime message", p);
    }
}

impl Worker {
    pub(crate) fn new(index: usize, shared: Arc<Shared>) -> Worker {
        let n = shared.n;
        let pool = StackPool::new(shared.config.stack_size, shared.config.stack_pool);
        Worker {
            index,
            fibers: RefCell::new(Vec::new()),
            free_fibers: RefCell::new(Vec::new()),
            ready: RefCell::new(VecDeque::new()),
            current: Cell::new(NO_FIBER),
            delegated: Cell::new(false),
            lanes: (0..n).map(|_| RefCell::new(Lane::default())).collect(),
            served: (0..n).map(|_| Cell::new(0)).collect(),
            codes: (0..n).map(|_| Cell::new([0; CODE_CACHE])).collect(),
            pool: RefCell::new(pool),
            properties: RefCell::new(Vec::new()),
            cleaning: Cell::new(false),
            next_id: Cell::new(0),
            live: Cell::new(0),
            rr: Cell::new(index),
            quiet: Cell::new(false),
            local_streak: Cell::new(0),
            shared,
        }
    }

    // ----- context -------------------------------------------------------

    #[inline]
    pub(crate) fn enter_delegated(&self) -> DelegatedGuard<'_> {
        DelegatedGuard { w: self, prev: self.delegated.replace(true) }
    }

    /// Panics unless the caller is a fiber outside delegated context.
    #[inline]
    pub(crate) fn check_may_block(&self) {
        if self.delegated.get() || !fiber::in_fiber() {
            panic!("{BLOCKING_IN_DELEGATED}");
        }
    }

    /// The running fiber. Only meaningful when `check_may_block` passed.
    #[inline]
    pub(crate) fn current_fiber(&self) -> u32 {
        self.current.get()
    }

    /// A trust id unique in this runtime.
    #[inline]
    pub(crate) fn new_id(&self) -> u64 {
        let c = self.next_id.get();
        self.next_id.set(c + 1);
        ((self.index as u64 + 1) << 40) | c
    }

    /// Next worker in round-robin order within `range`.
    pub(crate) fn next_in(&self, range: std::ops::Range<usize>) -> usize {
        let i = self.rr.get();
        self.rr.set(i.wrapping_add(1));
        range.start + i % range.len()
    }

    pub(crate) fn report_panic(&self, what: &str, payload: Box<dyn Any + Send>) {
        self.shared.report_panic(Some(self.index), what, payload);
    }

    // ----- fibers --------------------------------------------------------

    /// Starts a fiber on this worker.
    pub(crate) fn spawn_boxed(&self, body: Box<dyn FnOnce()>) {
        let fiber = Fiber::new(&mut self.pool.borrow_mut(), body);
        let id = match self.free_fibers.borrow_mut().pop() {
            Some(id) => {
                self.fibers.borrow_mut()[id as usize] = Some(fiber);
                id
            }
            None => {
                let mut f = self.fibers.borrow_mut();
                f.push(Some(fiber));
                (f.len() - 1) as u32
            }
        };
        self.live.set(self.live.get() + 1);
        self.shared.doorbell(self.index).live_fibers.store(self.live.get() as u64, Ordering::Relaxed);
        self.ready.borrow_mut().push_back(id);
    }

    /// Makes a suspended fiber runnable again.
    #[inline]
    pub(crate) fn make_ready(&self, fiber: u32) {
        self.ready.borrow_mut().push_back(fiber);
    }

    /// Counts a local-shortcut `apply` by the running fiber; every
    /// `LOCAL_TURN`-th in a row, the fiber yields so that the worker's
    /// other fibers, and its trustee duties, are not starved.
    #[inline]
    pub(crate) fn local_turn(&self) {
        const LOCAL_TURN: u32 = 64;
        let n = self.local_streak.get() + 1;
        if n >= LOCAL_TURN {
            self.local_streak.set(0);
            self.yield_now();
        } else {
            self.local_streak.set(n);
        }
    }

    /// Puts the running fiber at the back of the ready queue.
    pub(crate) fn yield_now(&self) {
        if fiber::in_fiber() && !self.delegated.get() {
            self.make_ready(self.current.get());
            fiber::suspend();
        }
    }

    fn run_ready(&self) -> bool {
        let n = self.ready.borrow().len();
        for _ in 0..n {
            let Some(id) = self.ready.borrow_mut().pop_front() else { break };
            let mut f =
                self.fibers.borrow_mut()[id as usize].take().expect("gossamer: woke a fiber that is not suspended");
            self.current.set(id);
            self.local_streak.set(0);
            let done = f.resume();
            self.current.set(NO_FIBER);
            if done {
                f.recycle(&mut self.pool.borrow_mut());
                self.free_fibers.borrow_mut().push(id);
                self.live.set(self.live.get() - 1);
                self.shared.doorbell(self.index).live_fibers.store(self.live.get() as u64, Ordering::Relaxed);
            } else {
                self.fibers.borrow_mut()[id as usize] = Some(f);
            }
        }
        n > 0
    }

    // ----- client side ---------------------------------------------------

    /// Queues a request carrying a user's closure `f` for trustee `t`; `c`
    /// runs when its response arrives. To another process, `f` must pass
    /// the capture rule at the process boundary (checked here, before
    /// anything is queued).
    #[inline]
    pub(crate) fn enqueue<F>(&self, t: usize, shim: Shim, prop: *mut u8, f: F, c: Completion) {
        debug_assert_ne!(t, self.index, "requests to oneself take the local shortcut");
        if !self.shared.is_local(t) {
            return self.enqueue_remote(t, shim, prop, f, None, c);
        }
        self.enqueue_local(t, shim, prop, f, c)
    }

    #[inline]
    fn enqueue_local<F>(&self, t: usize, shim: Shim, prop: *mut u8, f: F, c: Completion) {
        let mut lane = self.lanes[t].borrow_mut();
        let dst = lane.pending.alloc(request_words::<F>());
        // SAFETY: `alloc` returned room for the whole record.
        unsafe { encode_request(dst, shim, prop, f) };
        lane.completions.push_back(c);
    }

    /// Queues a request carrying a user's closure `f` for trustee `t` in
    /// another process: code named by offset (or cache index), no closure
    /// bytes (the capture rule at the process boundary, checked here), and
    /// an optional tail of serialized bytes (inline, or later copied to the
    /// bulk area).
    pub(crate) fn enqueue_remote<F>(
        &self,
        t: usize,
        shim: Shim,
        prop: *mut u8,
        f: F,
        tail: Option<&[u8]>,
        c: Completion,
    ) {
        remote::check_crossing::<F>(t);
        self.encode_remote(t, shim, prop, f, tail, c)
    }

    /// As `enqueue_remote`, for the runtime's own messages, whose closures
    /// capture only data meaningful in the receiving process (a property's
    /// address there, a trust id).
    fn encode_remote<F>(&self, t: usize, shim: Shim, prop: *mut u8, f: F, tail: Option<&[u8]>, c: Completion) {
        assert!(
            crate::channel::record::inline_ok::<F>(),
            "gossamer: a runtime message of {} bytes cannot be sent to another process",
            std::mem::size_of::<F>()
        );
        let bulk_bytes = self.shared.region.bulk_bytes();
        // Every check that may refuse the request comes before the code
        // cache is touched: the client's copy of the cache must change only
        // for a request the trustee will see, or the two fall out of step
        // and a later cache index would name the wrong code.
        let (tail_words, in_bulk) = match tail {
            None => (0, false),
            Some(b) if b.len() <= MAX_INLINE_TAIL => (1 + remote::byte_words(b.len()), false),
            Some(b) => {
                assert!(
                    b.len() <= bulk_bytes,
                    "gossamer: an argument of {} bytes exceeds the bulk area of {bulk_bytes} bytes between two threads \
                     (set GOSSAMER_BULK_BYTES higher)",
                    b.len()
                );
                (2, true)
            }
        };
        let mut lane = self.lanes[t].borrow_mut();
        let (code_flags, full) = code_header(&mut lane.code_cache, code_offset(shim));
        let env_words = value_words::<F>();
        let words = 1 + full as usize + 1 + env_words + tail_words;
        let flags = code_flags | if in_bulk { remote::FLAG_BULK_TAIL } else { 0 };
        let dst = lane.pending.alloc(words);
        // SAFETY: `alloc` returned `words` words, filled in order here.
        unsafe {
            *dst = remote::word(words as u64 | flags);
            let mut at = 1;
            if full {
                *dst.add(at) = remote::word(code_offset(shim) as u64);
                at += 1;
            }
            *dst.add(at) = remote::word(prop.expose_provenance() as u64);
            at += 1;
            crate::channel::record::put_value(dst.add(at), f);
            at += env_words;
            match tail {
                None => {}
                Some(b) if !in_bulk => {
                    *dst.add(at) = remote::word(b.len() as u64);
                    remote::put_bytes(dst.add(at + 1), b);
                }
                Some(b) => {
                    *dst.add(at) = remote::word(b.len() as u64 | TAIL_IN_BULK);
                    *dst.add(at + 1) = remote::word(0); // the offset, set when flushed
                }
            }
        }
        if in_bulk {
            lane.big.push_back(tail.map(<[u8]>::to_vec).unwrap_or_default());
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
    pub(crate) unsafe fn take_result<U: serde::de::DeserializeOwned>(
        &self,
        t: usize,
        rec: *const Word,
    ) -> std::thread::Result<U> {
        // SAFETY: per the contract; a remote response's bulk payload lies in
        // the pair's response area, unchanged until our next batch.
        unsafe {
            if crate::channel::record::is_remote_response(rec) {
                crate::channel::record::take_remote_response::<U>(rec, self.shared.region.bulk(self.index, t, true))
            } else {
                take_response::<U>(rec)
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

    fn send_any<F: FnOnce() + Send + 'static>(&self, t: usize, f: F) {
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

    fn flush(&self, t: usize) -> bool {
        let mut lane = self.lanes[t].borrow_mut();
        if lane.in_flight != 0 || lane.pending.is_empty() {
            return false;
        }
        let slot = self.shared.matrix.request(self.index, t);
        let far = !self.shared.is_local(t);
        let (bulk, bulk_bytes) = if far {
            (self.shared.region.bulk(self.index, t, false), self.shared.region.bulk_bytes())
        } else {
            (ptr::null_mut(), 0)
        };
        let mut bulk_used = 0usize;
        // SAFETY: we are the slot's only writer, and `in_flight == 0` means the
        // trustee answered our last batch, so it no longer reads the slot or
        // the pair's request bulk area.
        let count = unsafe {
            slot.write(0, |w| {
                while let Some(rec) = lane.pending.front() {
                    let words = record_words(rec);
                    let hdr = (*rec).assume_init();
                    let big_len = if far && hdr & remote::FLAG_BULK_TAIL != 0 {
                        let len = ((*rec.add(words - 2)).assume_init() & !TAIL_IN_BULK) as usize;
                        if bulk_used + len > bulk_bytes {
                            break; // the next batch
                        }
                        Some(len)
                    } else {
                        None
                    };
                    let Some(dst) = w.reserve(words, 0) else { break };
                    // SAFETY: `rec` holds `words` words; `dst` has room for them.
                    ptr::copy_nonoverlapping(rec, dst, words);
                    if let Some(len) = big_len {
                        let bytes = lane.big.pop_front().expect("gossamer: bulk payload missing");
                        debug_assert_eq!(bytes.len(), len);
                        ptr::copy_nonoverlapping(bytes.as_ptr(), bulk.add(bulk_used), len);
                        *dst.add(words - 1) = remote::word(bulk_used as u64);
                        bulk_used = (bulk_used + len).next_multiple_of(8);
                    }
                    lane.pending.pop(words);
                }
                w.count()
            })
        };
        assert!(count > 0, "gossamer: a request larger than a slot was queued");
        lane.flag ^= 1;
        lane.in_flight = count;
        slot.publish(lane.flag);
        drop(lane);
        self.shared.wake(t);
        true
    }

    fn flush_all(&self) -> bool {
        let mut did = false;
        for t in 0..self.shared.n {
            did |= self.flush(t);
        }
        did
    }

    fn poll(&self) -> bool {
        let mut did = false;
        for t in 0..self.shared.n {
            let (in_flight, flag) = {
                let l = self.lanes[t].borrow();
                (l.in_flight, l.flag)
            };
            if in_flight == 0 {
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
                    assert_eq!(r.count(), in_flight, "gossamer: response count does not match the batch");
                    while let Some(rec) = r.next(record_words) {
                        let c = self.lanes[t]
                            .borrow_mut()
                            .completions
                            .pop_front()
                            .expect("gossamer: response without request");
                        (c.run)(self, t, c.data, rec);
                    }
                })
            };
            self.lanes[t].borrow_mut().in_flight = 0;
            did = true;
        }
        did
    }

    // ----- trustee side --------------------------------------------------

    fn serve(&self) -> bool {
        let mut did = false;
        let me = self.index;
        for c in 0..self.shared.n {
            let req = self.shared.matrix.request(c, me);
            let flag = req.flag();
            if flag == self.served[c].get() {
                continue;
            }
            let resp = self.shared.matrix.response(c, me);
            let g = self.enter_delegated();
            if self.shared.is_local(c) {
                // SAFETY: the flag change means client `c` published a
                // complete batch and waits for our answer before touching
                // either slot; each request is dispatched exactly once.
                unsafe {
                    req.read(|r| {
                        let count = r.count() as usize;
                        resp.write(FALLBACK_WORDS, |w| {
                            let mut out = Responder::new(w, count);
                            while let Some(rec) = r.next(record_words) {
                                dispatch(rec, &mut out);
                            }
                        })
                    })
                };
            } else {
                let region = &self.shared.region;
                let far = Far {
                    client: c,
                    req_bulk: region.bulk(c, me, false),
                    resp_bulk: region.bulk(c, me, true),
                    bulk_bytes: region.bulk_bytes(),
                };
                let mut cache = self.codes[c].get();
                // SAFETY: as above, and the pair's bulk areas follow the
                // same ownership as its slots.
                unsafe {
                    req.read(|r| {
                        let count = r.count() as usize;
                        resp.write(FALLBACK_WORDS, |w| {
                            let mut out = Responder::far(w, count, far);
                            while let Some(rec) = r.next(record_words) {
                                dispatch_remote(rec, &mut out, &mut cache);
                            }
                        })
                    })
                };
                self.codes[c].set(cache);
            }
            drop(g);
            resp.publish(flag);
            self.served[c].set(flag);
            self.shared.wake(c);
            did = true;
        }
        did
    }

    // ----- properties ------------------------------------------------------

    pub(crate) fn register(&self, h: *mut Header) {
        let mut p = self.properties.borrow_mut();
        // SAFETY: `h` is a live property header owned by this trustee.
        unsafe { (*h).index.set(p.len()) };
        p.push(h);
    }

    pub(crate) fn unregister(&self, h: *mut Header) {
        let mut p = self.properties.borrow_mut();
        // SAFETY: `h` is registered here, so its index is in range.
        let i = unsafe { (*h).index.get() };
        debug_assert!(ptr::eq(p[i], h));
        p.swap_remove(i);
        if i < p.len() {
            // SAFETY: every registered header is live.
            unsafe { (*p[i]).index.set(i) };
        }
    }

    // ----- the loop ------------------------------------------------------

    fn drain_injector(&self) -> bool {
        let node = self.shared.local_worker(self.index);
        if !node.has_inject.load(Ordering::Acquire) {
            return false;
        }
        let tasks = {
            let mut q = node.inject.lock().unwrap_or_else(|e| e.into_inner());
            node.has_inject.store(false, Ordering::Relaxed);
            std::mem::take(&mut *q)
        };
        let _g = self.enter_delegated();
        for t in tasks {
            if let Err(p) = catch_unwind(AssertUnwindSafe(t)) {
                self.report_panic("injected task", p);
            }
        }
        true
    }

    fn lanes_idle(&self) -> bool {
        self.lanes.iter().all(|l| {
            let l = l.borrow();
            l.in_flight == 0 && l.pending.is_empty()
        })
    }

    /// Anything for us to do, as seen from shared memory?
    fn has_incoming(&self) -> bool {
        let me = self.index;
        let sh = &self.shared;
        if sh.local_worker(me).has_inject.load(Ordering::Relaxed) || sh.stopped() {
            return true;
        }
        (0..sh.n).any(|c| sh.matrix.request(c, me).flag() != self.served[c].get())
            || (0..sh.n).any(|t| {
                let l = self.lanes[t].borrow();
                l.in_flight != 0 && sh.matrix.response(me, t).flag() == l.flag
            })
    }

    fn set_quiet(&self, q: bool) {
        if self.quiet.get() != q {
            self.quiet.set(q);
            self.shared.doorbell(self.index).quiet.store(q as u32, Ordering::SeqCst);
        }
    }

    /// Called when an iteration found nothing to do. Polls tightly at
    /// first (a response is usually a fraction of a microsecond away), then
    /// yields the core between polls, and after `idle_spin` sleeps until
    /// someone sends work.
    fn idle(&self, idle: &mut Idle) {
        idle.rounds += 1;
        if idle.rounds < 128 {
            for _ in 0..16 {
                std::hint::spin_loop();
            }
            return;
        }
        let start = *idle.since.get_or_insert_with(Instant::now);
        if start.elapsed() < self.shared.config.idle_spin {
            thread::yield_now();
            return;
        }
        let bell = self.shared.doorbell(self.index);
        bell.sleeping.store(1, Ordering::Relaxed);
        super::fence::heavy();
        let ticket = super::park::ticket(&bell.futex);
        if !self.has_incoming() {
            super::park::wait(&bell.futex, ticket, Duration::from_millis(50));
        }
        bell.sleeping.store(0, Ordering::Relaxed);
    }

    pub(crate) fn run(&self) {
        let node = self.shared.doorbell(self.index);
        let inject = self.shared.local_worker(self.index);
        let mut idle = Idle::default();
        loop {
            let mut did = self.drain_injector();
            let ran = self.run_ready();
            did |= self.flush_all();
            did |= self.serve();
            did |= self.poll();
            did |= self.flush_all();
            if self.shared.stopped() {
                break;
            }
            let stopping = self.shared.stopping();
            if stopping && (did || ran) {
                self.set_quiet(false);
                node.epoch.store(node.epoch.load(Ordering::Relaxed) + 1, Ordering::SeqCst);
            }
            if did {
                idle = Idle::default();
                continue;
            }
            if ran {
                // Fibers ran but nothing moved through the slots: they are
                // polling (yield loops). Give the core away now and then, so
                // that an oversubscribed machine runs the threads they wait for.
                idle.rounds += 1;
                if idle.rounds % 64 == 0 {
                    thread::yield_now();
                }
                continue;
            }
            if stopping {
                let q = self.live.get() == 0 && self.lanes_idle() && !inject.has_inject.load(Ordering::SeqCst);
                self.set_quiet(q);
            }
            self.idle(&mut idle);
        }
        self.cleanup();
    }

    /// After the runtime stopped: unwind fibers that never finished, drop
    /// the properties still entrusted here, drop undelivered injected tasks.
    fn cleanup(&self) {
        let fibers: Vec<Fiber> = std::mem::take(&mut *self.fibers.borrow_mut()).into_iter().flatten().collect();
        if !fibers.is_empty() {
            tracing::warn!(worker = self.index, count = fibers.len(), "shutdown abandoned fibers that never finished");
        }
        for f in fibers {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| drop(f))) {
                self.report_panic("abandoned fiber", p);
            }
        }
        self.cleaning.set(true);
        let pending = self.lanes.iter().filter(|l| !l.borrow().completions.is_empty()).count();
        if pending > 0 {
            tracing::warn!(worker = self.index, lanes = pending, "shutdown left requests unanswered");
        }
        loop {
            let h = self.properties.borrow_mut().pop();
            let Some(h) = h else { break };
            // SAFETY: registered headers are live and owned by this trustee;
            // popping it first means nothing else will drop it.
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| unsafe { ((*h).drop_fn)(h) })) {
                self.report_panic("property drop at shutdown", p);
            }
        }
        let tasks =
            std::mem::take(&mut *self.shared.local_worker(self.index).inject.lock().unwrap_or_else(|e| e.into_inner()));
        drop(tasks);
    }
}
