//! One worker OS thread: its fibers and ready queue, and the loop that
//! drives everything else. The loop's parts live beside it: the client side
//! (queues, flushing, polling responses) in `client`, the trustee side
//! (serving request slots) in `trustee`, and idling without burning the
//! core in `idle`.
//!
//! User code never unwinds into this loop: every closure, callback,
//! completion, injected task and destructor of user values that the loop
//! runs is wrapped in `catch_unwind` (a panic is reported, its payload
//! dropped inside `catch_unwind` too), and the thread's context is cleared
//! by a guard, so even an internal panic leaves no dangling worker behind.

mod client;
mod far;
mod idle;
mod trustee;

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;

use crate::channel::remote::CODE_CACHE;
use crate::fiber::{self, Fiber, StackPool};
use crate::trust::property::Header;

use super::shared::Shared;

pub(crate) use client::{Completion, Lane};
use idle::Idle;

/// The message of the panic raised by a blocking call where none may block.
pub(crate) const BLOCKING_IN_DELEGATED: &str = "gossamer: a blocking call (apply, launch, join, Latch::lock on a held \
latch) was made in delegated context (inside a delegated closure, a then-callback or the trustee) where nothing may \
suspend; use apply_then to continue asynchronously, or make the outer call a launch() on a Trust<Latch<T>> so that \
the closure runs in a fiber that may block";

const NO_FIBER: u32 = u32::MAX;

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
    /// Per client on another host: the put of our last response to it.
    resp_puts: Box<[Cell<Option<crate::fabric::Ticket>>]>,
    /// This thread's access to the fabric (programs of several hosts).
    fabric: RefCell<Option<Box<dyn crate::fabric::ThreadFabric>>>,
    pool: RefCell<StackPool>,
    properties: RefCell<Vec<*mut Header>>,
    pub(crate) cleaning: Cell<bool>,
    next_id: Cell<u64>,
    live: Cell<usize>,
    rr: Cell<usize>,
    quiet: Cell<bool>,
    /// Local-shortcut `apply` calls since the running fiber last suspended.
    local_streak: Cell<u32>,
    /// Batches of outside submissions taken so far.
    batches: Cell<u64>,
    /// True while a taken batch of outside submissions runs.
    draining: Cell<bool>,
    /// Properties whose last trust is gone while requests from outside the
    /// runtime may still be queued for them, each with the number of
    /// batches taken when it was doomed (see `property::toggle`).
    doomed: RefCell<Vec<(u64, *mut Header)>>,
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
            resp_puts: (0..n).map(|_| Cell::new(None)).collect(),
            fabric: RefCell::new(shared.fabric.as_ref().map(|f| {
                f.thread(index).unwrap_or_else(|e| panic!("gossamer: worker {index} cannot join the fabric: {e}"))
            })),
            pool: RefCell::new(pool),
            properties: RefCell::new(Vec::new()),
            cleaning: Cell::new(false),
            next_id: Cell::new(0),
            live: Cell::new(0),
            rr: Cell::new(index),
            quiet: Cell::new(false),
            local_streak: Cell::new(0),
            batches: Cell::new(0),
            draining: Cell::new(false),
            doomed: RefCell::new(Vec::new()),
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
    /// later (both in the order it issued them).
    fn drain_injector(&self) -> bool {
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
    /// call, in the order they were submitted, then drops the properties
    /// that were only waiting for them.
    fn drain_submissions(&self) -> bool {
        let mut p = self.shared.local_worker(self.index).submissions.take();
        if p.is_null() {
            if !self.doomed.borrow().is_empty() {
                self.release_doomed();
            }
            return false;
        }
        self.batches.set(self.batches.get() + 1);
        {
            struct Draining<'a>(&'a Worker);
            impl Drop for Draining<'_> {
                fn drop(&mut self) {
                    self.0.draining.set(false);
                }
            }
            self.draining.set(true);
            let _d = Draining(self);
            let _g = self.enter_delegated();
            while !p.is_null() {
                // SAFETY: taken nodes are valid until run; run once each,
                // after their link is read.
                let next = unsafe { (*p).next.load(Ordering::Relaxed) };
                let run = unsafe { (*p).run };
                if let Err(e) = catch_unwind(AssertUnwindSafe(|| unsafe { run(p, Some(self)) })) {
                    self.report_panic("request from outside the runtime", e);
                }
                p = next;
            }
        }
        if !self.doomed.borrow().is_empty() {
            self.release_doomed();
        }
        true
    }

    /// Whether a request from outside the runtime may still be on its way
    /// to a property of this trustee: one is queued, or a taken batch is
    /// running. Every request was queued before the last trust to its
    /// property was dropped, so once this is false for a property whose
    /// trusts are all gone, nothing refers to it any more.
    pub(crate) fn outside_may_refer(&self) -> bool {
        self.draining.get() || !self.shared.local_worker(self.index).submissions.is_empty()
    }

    /// Keeps a property whose trusts are all gone until the requests from
    /// outside that may still refer to it have run.
    pub(crate) fn doom(&self, h: *mut Header) {
        self.doomed.borrow_mut().push((self.batches.get(), h));
    }

    /// Forgets a doomed property that got a trust again.
    pub(crate) fn undoom(&self, h: *mut Header) {
        self.doomed.borrow_mut().retain(|&(_, d)| !std::ptr::eq(d, h));
    }

    /// Drops the doomed properties that no queued request can refer to any
    /// more: those doomed before the last batch was taken (that batch held
    /// every request queued for them, and has run), and all of them when
    /// nothing is queued and no batch runs.
    fn release_doomed(&self) {
        let taken = self.batches.get();
        let all = !self.outside_may_refer();
        let ready: Vec<*mut Header> = {
            let mut d = self.doomed.borrow_mut();
            let mut ready = Vec::new();
            d.retain(|&(tag, h)| {
                let go = all || tag < taken;
                if go {
                    ready.push(h);
                }
                !go
            });
            ready
        };
        for h in ready {
            // SAFETY: doomed properties are registered here, with no trust
            // left and no request in flight (above); each is doomed once.
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| unsafe { crate::trust::property::release(self, h) })) {
                self.report_panic("property drop", p);
            }
        }
    }

    pub(crate) fn run(&self) {
        let node = self.shared.doorbell(self.index);
        let inject = self.shared.local_worker(self.index);
        let mut idle = Idle::default();
        loop {
            let mut did = self.drain_injector();
            let ran = self.run_ready();
            did |= self.flush_all();
            did |= self.progress_fabric();
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
                // (Even when the program has no more threads than the
                // machine has cores: other programs may share them.)
                if idle.rounds % 64 == 0 {
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
            let run = unsafe { (*p).run };
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
        loop {
            let h = self.properties.borrow_mut().pop();
            let Some(h) = h else { break };
            // SAFETY: registered headers are live and owned by this trustee;
            // popping it first means nothing else will drop it.
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| unsafe { ((*h).drop_fn)(h) })) {
                self.report_panic("property drop at shutdown", p);
            }
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
