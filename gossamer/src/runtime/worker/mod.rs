//! One worker OS thread: its fibers and ready queue, and the loop that
//! drives everything else. The loop's parts live beside it: the client side
//! (queues, flushing, polling responses) in `client`, the trustee side
//! (serving request slots) in `trustee`, the property locks a trustee
//! keeps through one batch in `batch_hold`, and idling without burning the
//! core in `idle`.
//!
//! User code never unwinds into this loop: every closure, callback,
//! completion, injected task and destructor of user values that the loop
//! runs is wrapped in `catch_unwind` (a panic is reported, its payload
//! dropped inside `catch_unwind` too), and the thread's context is cleared
//! by a guard, so even an internal panic leaves no dangling worker behind.

pub(crate) mod batch_hold;
mod client;
mod cpu_wait;
mod far;
mod idle;
mod load;
#[cfg(all(test, loom))]
mod loom_far;
mod trustee;

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crate::channel::remote::CODE_CACHE;
use crate::fabric::shm::region::FAR_DEPTH;
use crate::fiber::{self, Fiber, StackPool};
use crate::runtime::property::Header;

use super::shared::Shared;

pub(crate) use client::{Call, Completion, Lane};
use idle::Idle;

/// The message of the panic raised by a blocking call where none may block.
pub(crate) const BLOCKING_IN_DELEGATED: &str = "gossamer: a blocking call (apply, launch, join, Latch::lock on a held \
latch) was made in delegated context (inside a delegated closure, a then-callback or the trustee) where nothing may \
suspend; use apply_then to continue asynchronously, or make the outer call a launch() on a Trust<Latch<T>> so that \
the closure runs in a fiber that may block";

/// A worker's current fiber while it runs none (its scheduler loop).
pub(crate) const NO_FIBER: u32 = u32::MAX;

pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    fibers: RefCell<Vec<Option<Box<Fiber>>>>,
    free_fibers: RefCell<Vec<u32>>,
    ready: RefCell<VecDeque<u32>>,
    current: Cell<u32>,
    delegated: Cell<bool>,
    pub(crate) lanes: Box<[RefCell<Lane>]>,
    /// Per client: the last request flag served (the trustee's side).
    served: Box<[Cell<u32>]>,
    /// Per client in another process: the trustee's copy of the code cache.
    codes: Box<[Cell<[i64; CODE_CACHE]>]>,
    /// Per client on another host and batch slot (`c * FAR_DEPTH + k`):
    /// the put of our last response from that staging slot.
    resp_puts: Box<[Cell<Option<crate::fabric::Ticket>>]>,
    /// Which of a lane's batch slots between hosts the responses being
    /// completed landed in (set while `poll_far` runs their completions).
    far_landing: Cell<usize>,
    /// Payload bytes of a batch in flight to another host from which its
    /// lane sends the next batch at once (`GOSSAMER_FAR_PIPELINE`).
    far_pipeline: usize,
    /// Payloads to another host from which they go detached
    /// (`GOSSAMER_FAR_DETACH`, see `fabric::detach_bytes`).
    far_detach: usize,
    /// This thread's access to the fabric (programs of several hosts).
    fabric: RefCell<Option<Box<dyn crate::fabric::ThreadFabric>>>,
    pool: RefCell<StackPool>,
    properties: RefCell<Vec<*mut Header>>,
    pub(crate) cleaning: Cell<bool>,
    next_id: Cell<u64>,
    live: Cell<usize>,
    rr: Cell<usize>,
    quiet: Cell<bool>,
    /// Between hosts: how many times over `idle_spin` to poll before
    /// sleeping, as a power of two (see `idle.rs`).
    spin_boost: Cell<u32>,
    /// Local-shortcut `apply` calls since the running fiber last suspended.
    local_streak: Cell<u32>,
    /// Rounds of the outside queues (injected tasks and submissions)
    /// started, and completed: everything queued before a round started
    /// has run when it completes.
    rounds: Cell<u64>,
    rounds_done: Cell<u64>,
    /// Properties whose id set is empty, each with the outside round
    /// current when it was doomed (see `property`): dropped once their
    /// fence round is complete and a later outside round completed.
    doomed: RefCell<Vec<(u64, *mut Header)>>,
    /// Local-shortcut requests issued while a closure runs on this worker
    /// (re-entrance): they run after it, in issue order (see `defer`).
    deferred: RefCell<VecDeque<Box<dyn FnOnce()>>>,
    /// Calls of this thread's fibers to adaptive properties, held behind
    /// their outstanding requests (`trust::adaptive::pending` owns them;
    /// here they are only dropped, at shutdown, before the properties).
    pub(crate) held_calls: RefCell<Option<Box<dyn Any>>>,
    /// Bits of a trust id that name the worker that made it (`new_id`).
    id_shift: u32,
    /// Where this worker's time goes (see `load`).
    meter: load::Meter,
    cpu_wait: cpu_wait::CpuWait,
    /// The client whose batch this trustee serves now (for requests that a
    /// moved property's first cell relays, see `trust::migrate`), or
    /// `usize::MAX` between batches: read through [`Worker::batch_client`].
    serving: Cell<usize>,
    /// Locks of properties this trustee keeps until the batch it serves
    /// ends (see `batch_hold`).
    pub(crate) batch: batch_hold::BatchHolds,
}

/// Bits that name a worker (`index + 1`) in the trust ids of a program of
/// `n` workers.
fn id_shift(n: usize) -> u32 {
    u64::BITS - (n as u64).leading_zeros()
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

/// While it lives, the worker serves one client's batch (see
/// [`Worker::batch_of`]).
pub(super) struct BatchOf<'a>(&'a Worker);

impl Drop for BatchOf<'_> {
    fn drop(&mut self) {
        self.0.serving.set(usize::MAX);
    }
}

impl Worker {
    pub(crate) fn new(index: usize, shared: Arc<Shared>) -> Worker {
        let n = shared.n;
        let hooks = fiber::Hooks {
            report_panic: super::context::report_fiber_panic,
            context: super::context::raw,
            set_context: super::context::set_raw,
        };
        let pool = StackPool::new(shared.config.stack_size, shared.config.stack_pool, hooks);
        crate::channel::hooks::install(super::context::channel_hooks());
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
            resp_puts: (0..n * FAR_DEPTH).map(|_| Cell::new(None)).collect(),
            far_landing: Cell::new(0),
            // Checked when the fabric starts; unused without one.
            far_pipeline: crate::fabric::pipeline_bytes().unwrap_or(usize::MAX),
            far_detach: crate::fabric::detach_bytes().unwrap_or(usize::MAX),
            fabric: RefCell::new(shared.fabric.as_ref().map(|f| {
                f.thread(index).unwrap_or_else(|e| panic!("gossamer: worker {index} cannot join the fabric: {e}"))
            })),
            pool: RefCell::new(pool),
            properties: RefCell::new(Vec::new()),
            cleaning: Cell::new(false),
            next_id: Cell::new(shared.config.trust_ids_issued),
            live: Cell::new(0),
            rr: Cell::new(index),
            quiet: Cell::new(false),
            spin_boost: Cell::new(0),
            local_streak: Cell::new(0),
            serving: Cell::new(usize::MAX),
            batch: batch_hold::BatchHolds::default(),
            rounds: Cell::new(0),
            rounds_done: Cell::new(0),
            doomed: RefCell::new(Vec::new()),
            deferred: RefCell::new(VecDeque::new()),
            held_calls: RefCell::new(None),
            id_shift: id_shift(n),
            meter: load::Meter::default(),
            cpu_wait: cpu_wait::CpuWait::default(),
            shared,
        }
    }

    // ----- context -------------------------------------------------------

    /// Sets whether this worker is in delegated context; returns the
    /// previous state (for hooks that cannot hold a [`DelegatedGuard`]).
    pub(crate) fn set_delegated(&self, on: bool) -> bool {
        self.delegated.replace(on)
    }

    /// Records that this worker serves the batch of client `c` until the
    /// guard goes.
    #[inline]
    pub(super) fn batch_of(&self, c: usize) -> BatchOf<'_> {
        self.serving.set(c);
        BatchOf(self)
    }

    /// The client whose batch this worker serves now; `None` between
    /// batches (a request then comes from one of this worker's own fibers
    /// or callbacks).
    #[inline]
    pub(crate) fn batch_client(&self) -> Option<usize> {
        Some(self.serving.get()).filter(|&c| c != usize::MAX)
    }

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

    /// A trust id unique in this runtime (the whole program): the count of
    /// ids this worker issued, above the bits that name the worker
    /// (`index + 1`; 0 is no worker), the top bit clear (ids made outside
    /// the runtime have it set, see `trust::outside_id`). Ids never wrap:
    /// a worker that has issued all of its 2^(63 - shift) ids refuses to
    /// make more. With 1024 workers that is 2^52 ≈ 4.5·10^15 ids each,
    /// 14 years at ten million clones a second on every worker.
    #[inline]
    pub(crate) fn new_id(&self) -> u64 {
        let c = self.next_id.get();
        assert!(
            c < 1u64 << (63 - self.id_shift),
            "gossamer: worker {} has issued all 2^{} trust ids it can make; a further clone would reuse a live \
             trust's id (hold fewer trusts to one property, and clone them on more threads)",
            self.index,
            63 - self.id_shift
        );
        self.next_id.set(c + 1);
        (c << self.id_shift) | (self.index as u64 + 1)
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

    /// Counts one request this worker relayed to where a moved property's
    /// value is (`Stats::relayed_requests`).
    pub(crate) fn count_relayed(&self) {
        let c = &self.shared.local_worker(self.index).relayed;
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
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
        // Only the fibers ready now: one that yields again waits for the
        // next pass, after the slots were polled, since what it waits for
        // (a completion, a message) usually arrives through them.
        for _ in 0..n {
            let Some(id) = self.ready.borrow_mut().pop_front() else { break };
            let mut f =
                self.fibers.borrow_mut()[id as usize].take().expect("gossamer: woke a fiber that is not suspended");
            self.current.set(id);
            self.local_streak.set(0);
            let done = f.resume();
            self.current.set(NO_FIBER);
            if done {
                (*f).recycle(&mut self.pool.borrow_mut());
                self.free_fibers.borrow_mut().push(id);
                self.live.set(self.live.get() - 1);
                self.shared.doorbell(self.index).live_fibers.store(self.live.get() as u64, Ordering::Relaxed);
            } else {
                self.fibers.borrow_mut()[id as usize] = Some(f);
            }
        }
        n > 0
    }

    // ----- the loop ------------------------------------------------------

    /// Runs what threads outside the runtime handed over: injected tasks
    /// and submitted requests. The tasks are taken first and run last, so
    /// that a thread's submitted request runs before anything it injected
    /// later (both in the order it issued them). Each call is one outside
    /// round: when it returns, everything queued before it began has run
    /// (doomed properties wait for one, see `release_doomed`).
    fn drain_injector(&self) -> bool {
        let round = self.rounds.get() + 1;
        self.rounds.set(round);
        let did = self.drain_outside();
        self.rounds_done.set(round);
        did
    }

    /// One outside round (see `drain_injector`).
    fn drain_outside(&self) -> bool {
        let node = self.shared.local_worker(self.index);
        let tasks = if node.has_inject.load(Ordering::Acquire) {
            let mut q = node.inject.lock().unwrap_or_else(|e| e.into_inner());
            node.has_inject.store(false, Ordering::Relaxed);
            Some(std::mem::take(&mut *q))
        } else {
            None
        };
        let mut did = self.drain_submissions();
        if let Some(tasks) = tasks {
            did = true;
            let _g = self.enter_delegated();
            for t in tasks {
                if let Err(p) = catch_unwind(AssertUnwindSafe(t)) {
                    self.report_panic("injected task", p);
                }
            }
        }
        did
    }

    /// Runs the requests submitted from outside the runtime since the last
    /// call, in the order they were submitted.
    fn drain_submissions(&self) -> bool {
        let mut p = self.shared.local_worker(self.index).submissions.take();
        if p.is_null() {
            return false;
        }
        {
            let _g = self.enter_delegated();
            while !p.is_null() {
                // SAFETY: taken nodes are valid until run; run once each,
                // after their link is read.
                let next = unsafe { (*p).next.load(Ordering::Relaxed) };
                // SAFETY: as above.
                let run = unsafe { (*p).run };
                // SAFETY: `run` is the node's own runner, called once with it.
                if let Err(e) = catch_unwind(AssertUnwindSafe(|| unsafe { run(p, Some(self)) })) {
                    self.report_panic("request from outside the runtime", e);
                }
                p = next;
            }
        }
        true
    }

    /// Keeps a property whose id set is empty until every request that may
    /// still name it has arrived (see `property`).
    pub(crate) fn doom(&self, h: *mut Header) {
        self.doomed.borrow_mut().push((self.rounds.get(), h));
    }

    /// Sends round `round` of `h`'s fence to every other worker of the
    /// program: each answers through its own lane to us, so its answer
    /// arrives after everything it queued for us before. Returns the
    /// number of answers to wait for.
    pub(crate) fn fence(&self, h: *mut Header, round: u32) -> u32 {
        let me = self.index;
        let h = crate::runtime::property::SendPtr(h);
        let mut sent = 0;
        for t in (0..self.shared.n).filter(|&t| t != me) {
            self.send_plain(t, move || {
                if let Some(w) = super::context::current() {
                    w.send_plain(me, move || {
                        let h = h;
                        if let Some(w) = super::context::current() {
                            // SAFETY: on `h`'s trustee, which keeps it
                            // while its fence round is open.
                            unsafe { crate::runtime::property::fence_reply(w, h.0, round) }
                        }
                    });
                }
            });
            sent += 1;
        }
        sent
    }

    /// Whether a local-shortcut request must wait in the deferred queue: a
    /// closure (or a runtime message, or a drop) runs on this worker now,
    /// possibly holding a borrow of the very property, or earlier requests
    /// of this thread wait there.
    #[inline]
    pub(crate) fn must_defer(&self) -> bool {
        self.delegated.get() || !self.deferred.borrow().is_empty()
    }

    /// Queues a local-shortcut request to run after the current closure,
    /// after those queued before it.
    pub(crate) fn defer(&self, run: Box<dyn FnOnce()>) {
        self.deferred.borrow_mut().push_back(run);
    }

    /// Runs the deferred requests, in order, unless a closure still runs.
    #[inline]
    pub(crate) fn run_deferred(&self) {
        if self.delegated.get() || self.deferred.borrow().is_empty() {
            return;
        }
        self.run_deferred_slow();
    }

    #[cold]
    fn run_deferred_slow(&self) {
        loop {
            let next = self.deferred.borrow_mut().pop_front();
            let Some(run) = next else { break };
            let _g = self.enter_delegated();
            if let Err(p) = catch_unwind(AssertUnwindSafe(run)) {
                self.report_panic("deferred request", p);
            }
        }
    }

    /// Forgets a doomed property that got a trust again.
    pub(crate) fn undoom(&self, h: *mut Header) {
        self.doomed.borrow_mut().retain(|&(_, d)| !std::ptr::eq(d, h));
    }

    /// Drops the doomed properties that no request can name any more:
    /// their fence round is complete, and an outside round that started
    /// after they were doomed has completed. Runs in the worker loop only,
    /// never inside a closure. True if one was dropped or waits only for
    /// the next outside round (the loop must come round again).
    fn release_doomed(&self) -> bool {
        use crate::runtime::property;
        self.run_deferred();
        let done = self.rounds_done.get();
        let ready: Vec<*mut Header> = {
            let mut d = self.doomed.borrow_mut();
            let mut ready = Vec::new();
            // SAFETY: doomed headers are registered here, hence live.
            d.retain(|&(tag, h)| match unsafe { property::fenced(h) } {
                None => false,
                Some(true) if tag < done => {
                    ready.push(h);
                    false
                }
                Some(_) => true,
            });
            ready
        };
        let again = !ready.is_empty()
            // SAFETY: as above.
            || self.doomed.borrow().iter().any(|&(_, h)| unsafe { property::fenced(h) } == Some(true));
        for h in ready {
            let g = self.enter_delegated();
            // SAFETY: doomed here with no trust left, and every request that
            // named it has run (above); each leaves the list once. An earlier
            // drop in this loop cannot have given it a trust again: a trust
            // to it would have kept its set from emptying.
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| unsafe { property::release(self, h) })) {
                self.report_panic("property drop", p);
            }
            drop(g);
            self.run_deferred();
        }
        again
    }

    pub(crate) fn run(&self) {
        let node = self.shared.doorbell(self.index);
        let inject = self.shared.local_worker(self.index);
        let mut idle = Idle::default();
        loop {
            let (pass, sampled) = self.meter.begin();
            let mut did = self.drain_injector();
            self.run_deferred();
            if !self.doomed.borrow().is_empty() {
                did |= self.release_doomed();
            }
            // A dedicated trustee serves first: while batches keep coming,
            // its own fibers (which cannot move) get every few passes only.
            let hold = self.meter.served_last.get()
                && pass % load::DEDICATED_FIBER_TURN != 0
                && self.shared.is_dedicated(self.index)
                && !self.ready.borrow().is_empty();
            let ran = if hold {
                did = true;
                false
            } else {
                self.run_ready()
            };
            did |= self.flush_all();
            did |= self.progress_fabric();
            let serve_start = sampled.map(|_| Instant::now());
            let served = self.serve();
            let serve_end = sampled.map(|_| Instant::now());
            self.meter.served_last.set(served);
            did |= served;
            self.run_deferred();
            did |= self.poll();
            did |= self.flush_all();
            if let (Some(t0), Some(s0), Some(s1)) = (sampled, serve_start, serve_end) {
                self.meter_pass(t0, (s0, s1), served, did || ran);
                self.sample_cpu_wait(s1);
            }
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
                // (Even when the program has no more threads than the
                // machine has cores: other programs may share them.)
                if idle.rounds % self.shared.tune(self.index).fiber_yield() == 0 {
                    thread::yield_now();
                }
                continue;
            }
            if stopping {
                let q = self.live.get() == 0
                    && self.lanes_idle()
                    && !inject.has_inject.load(Ordering::SeqCst)
                    && inject.submissions.is_empty();
                self.set_quiet(q);
            }
            self.idle(&mut idle);
        }
        self.cleanup();
    }

    /// After the runtime stopped: unwind fibers that never finished, drop
    /// the properties still entrusted here, drop undelivered injected tasks.
    ///
    /// Everything here runs user code (destructors, a fiber's unwinding):
    /// each piece runs inside `catch_unwind`, and abandoned fibers are
    /// unwound in fiber context (see `Fiber::abandon`), never by a forced
    /// unwind in which a blocking call would abort the process.
    fn cleanup(&self) {
        let fibers: Vec<(u32, Box<Fiber>)> = std::mem::take(&mut *self.fibers.borrow_mut())
            .into_iter()
            .enumerate()
            .filter_map(|(id, f)| Some((id as u32, f?)))
            .collect();
        if !fibers.is_empty() {
            tracing::warn!(worker = self.index, count = fibers.len(), "shutdown abandoned fibers that never finished");
        }
        // Each is unwound from where it waits, as this worker's current
        // fiber, before the properties go (see `Fiber::abandon`).
        for (id, f) in fibers {
            self.current.set(id);
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f.abandon())) {
                self.report_panic("abandoned fiber", p);
            }
            self.current.set(NO_FIBER);
        }
        self.cleaning.set(true);
        // Requests from outside that came too late: their futures learn
        // that the runtime shut down. The properties are not touched.
        let mut p = self.shared.local_worker(self.index).submissions.close();
        while !p.is_null() {
            // SAFETY: as in `drain_submissions`.
            let next = unsafe { (*p).next.load(Ordering::Relaxed) };
            // SAFETY: as above.
            let run = unsafe { (*p).run };
            // SAFETY: `run` is the node's own runner, called once with it.
            if let Err(e) = catch_unwind(AssertUnwindSafe(|| unsafe { run(p, None) })) {
                self.report_panic("abandoned request", e);
            }
            p = next;
        }
        self.doomed.borrow_mut().clear(); // still registered: dropped below
        let pending = self.lanes.iter().filter(|l| !l.borrow().completions.is_empty()).count();
        if pending > 0 {
            tracing::warn!(worker = self.index, lanes = pending, "shutdown left requests unanswered");
        }
        self.run_deferred();
        // Calls held behind requests that went unanswered never run; they
        // hold handles, dropped while the properties are still there.
        let held = self.held_calls.borrow_mut().take();
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| drop(held))) {
            self.report_panic("held calls", p);
        }
        // The values first, each marked before its drop, so that a drop
        // that reaches a property already dropped (a cycle of trusts, or a
        // drop that delegates) has its closure refused; the cells after
        // all of them, so that the mark stays readable until then.
        let mut dropped = Vec::new();
        loop {
            let batch = std::mem::take(&mut *self.properties.borrow_mut());
            if batch.is_empty() {
                break;
            }
            for &h in &batch {
                let g = self.enter_delegated();
                // SAFETY: registered headers are live and owned by this
                // trustee; taken from the registry, each is dropped once.
                let r =
                    catch_unwind(AssertUnwindSafe(|| unsafe { crate::runtime::property::drop_value_at_shutdown(h) }));
                drop(g);
                if let Err(p) = r {
                    self.report_panic("property drop at shutdown", p);
                }
                self.run_deferred();
            }
            dropped.extend(batch);
        }
        for h in dropped {
            // SAFETY: every value is dropped, and nothing runs any more
            // that could reach these cells.
            unsafe { crate::runtime::property::free_at_shutdown(h) };
        }
        // What user code did above may have spawned fibers (never run) or
        // injected tasks; their drops run user destructors, so each is
        // dropped inside `catch_unwind`, like everything else here.
        let late: Vec<Box<Fiber>> = std::mem::take(&mut *self.fibers.borrow_mut()).into_iter().flatten().collect();
        for f in late {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f.abandon())) {
                self.report_panic("abandoned fiber", p);
            }
        }
        let tasks =
            std::mem::take(&mut *self.shared.local_worker(self.index).inject.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| drop(t))) {
                self.report_panic("undelivered injected task", p);
            }
        }
    }
}
