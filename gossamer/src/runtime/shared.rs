//! State shared by the workers of a runtime: the region (slot matrix,
//! doorbells, program-wide flags), the local workers' injection queues for
//! threads outside the runtime, and where this process's threads sit among
//! all threads of the program. Also the process-wide list of live runtimes.

use std::cell::Cell;
use std::ops::Range;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

use super::park;
use crate::channel::matrix::Matrix;
use crate::fabric::shm::region::{Doorbell, Region, Shape};
use crate::fabric::Fabric;

/// Work handed to a worker from outside the runtime.
pub(crate) type Task = Box<dyn FnOnce() + Send>;

/// The configuration a runtime was built with.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) workers: usize,
    pub(crate) dedicated: usize,
    pub(crate) pin: bool,
    pub(crate) stack_size: usize,
    pub(crate) stack_pool: usize,
    pub(crate) worker_stack_size: usize,
    pub(crate) idle_spin: Duration,
    /// Whether a controller picks the dedicated count (`autodedicate`).
    pub(crate) dedicated_auto: bool,
    /// The controller's measuring window.
    pub(crate) dedicated_window: Duration,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) name: String,
    /// Profiles, wait tracking, the `gossamer top` socket.
    pub(crate) observe: super::profile::Options,
    /// Trust ids each worker counts as already issued (tests only).
    pub(crate) trust_ids_issued: u64,
    /// Simulated processes (see `strict`).
    pub(crate) strict: super::strict::Strict,
}

/// Where this process's workers sit among all threads of the program.
#[derive(Clone, Debug)]
pub(crate) struct Placement {
    /// This process's rank.
    pub(crate) rank: usize,
    /// Global thread ids of each rank.
    pub(crate) ranks: Vec<Range<usize>>,
    /// Global thread ids of each host (each a union of whole ranks).
    pub(crate) hosts: Vec<Range<usize>>,
    /// Names of the hosts, in the same order.
    pub(crate) host_names: Vec<String>,
    /// The program's secret, the same in every process: it authenticates
    /// trusts in transit (see `trust::wire`). Never leaves the program.
    pub(crate) key: [u64; 2],
}

impl Placement {
    pub(crate) fn single(workers: usize) -> Self {
        Placement {
            rank: 0,
            ranks: std::iter::once(0..workers).collect(),
            hosts: std::iter::once(0..workers).collect(),
            host_names: vec![super::host::host_name()],
            key: new_program_key(),
        }
    }

    /// The rank of the process that runs thread `t`, if any does.
    pub(crate) fn rank_of(&self, t: usize) -> Option<usize> {
        self.ranks.iter().position(|r| r.contains(&t))
    }

    /// The index of the host that runs thread `t`.
    pub(crate) fn host_of(&self, t: usize) -> usize {
        self.hosts.iter().position(|h| h.contains(&t)).expect("gossamer: a thread outside every host")
    }

    /// This process's host's threads.
    pub(crate) fn host(&self) -> Range<usize> {
        self.hosts[self.host_of(self.local().start)].clone()
    }

    pub(crate) fn threads(&self) -> usize {
        self.ranks.last().map_or(0, |r| r.end)
    }

    pub(crate) fn local(&self) -> Range<usize> {
        self.ranks[self.rank].clone()
    }
}

/// Per local worker: what threads outside the runtime use to reach it.
#[repr(align(128))]
pub(crate) struct Local {
    pub(crate) thread: OnceLock<Thread>,
    pub(crate) has_inject: AtomicBool,
    pub(crate) inject: Mutex<Vec<Task>>,
    /// Asynchronous requests from outside the runtime (`apply_async`).
    pub(crate) submissions: Submissions,
    /// Requests this worker relayed to where a moved property's value is
    /// (written by the worker alone: a load and a store).
    pub(crate) relayed: AtomicU64,
}

/// The front of a request submitted from outside the runtime: a node of
/// the trustee's [`Submissions`] stack. The rest of the request follows it
/// (`repr(C)`), and `run` knows its type.
#[repr(C)]
pub(crate) struct SubNode {
    /// The next node: older while on the stack, newer once taken.
    pub(crate) next: AtomicPtr<SubNode>,
    /// Runs the request on its trustee (`Some`), or abandons it at shutdown
    /// (`None`); either way, releases the stack's reference to the node.
    pub(crate) run: unsafe fn(*mut SubNode, Option<&super::worker::Worker>),
}

impl SubNode {
    pub(crate) fn new(run: unsafe fn(*mut SubNode, Option<&super::worker::Worker>)) -> Self {
        SubNode { next: AtomicPtr::new(ptr::null_mut()), run }
    }
}

/// The queue through which threads outside the runtime hand asynchronous
/// requests to one trustee: a lock-free stack that producers push onto
/// with one compare-and-swap and the trustee takes whole with one swap,
/// then reverses, so that requests run in the order they were pushed.
/// Closed for good (a sentinel head) when the trustee stops: pushes then
/// fail, and the caller abandons the request itself.
#[repr(align(128))]
pub(crate) struct Submissions {
    head: AtomicPtr<SubNode>,
}

impl Submissions {
    fn new() -> Self {
        Submissions { head: AtomicPtr::new(ptr::null_mut()) }
    }

    fn closed() -> *mut SubNode {
        ptr::NonNull::<SubNode>::dangling().as_ptr()
    }

    /// Pushes `node`; `Ok(true)` if the stack was empty (the trustee may
    /// need waking), `Err(())` if the trustee has stopped.
    ///
    /// # Safety
    /// `node` must be a valid node that is on no stack; on `Ok` the stack
    /// owns one reference to it until its `run` is called.
    pub(crate) unsafe fn push(&self, node: *mut SubNode) -> Result<bool, ()> {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            if head == Self::closed() {
                return Err(());
            }
            // SAFETY: per the contract the node is valid and not yet shared
            // through the stack.
            unsafe { (*node).next.store(head, Ordering::Relaxed) };
            match self.head.compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return Ok(head.is_null()),
                Err(h) => head = h,
            }
        }
    }

    /// Whether anything waits (as the trustee sees it: everything pushed
    /// before what it has synchronised with is seen).
    pub(crate) fn is_empty(&self) -> bool {
        let h = self.head.load(Ordering::Acquire);
        h.is_null() || h == Self::closed()
    }

    /// Takes everything pushed so far; returns the oldest node, linked to
    /// the newer ones through `next` (null: nothing).
    pub(crate) fn take(&self) -> *mut SubNode {
        if self.head.load(Ordering::Relaxed).is_null() {
            return ptr::null_mut();
        }
        Self::reverse(self.head.swap(ptr::null_mut(), Ordering::Acquire))
    }

    /// Closes the stack for good; returns what was on it, oldest first.
    pub(crate) fn close(&self) -> *mut SubNode {
        let h = self.head.swap(Self::closed(), Ordering::Acquire);
        if h == Self::closed() {
            return ptr::null_mut();
        }
        Self::reverse(h)
    }

    fn reverse(mut p: *mut SubNode) -> *mut SubNode {
        let mut prev = ptr::null_mut();
        while !p.is_null() {
            // SAFETY: nodes on the stack stay valid until run, and once
            // taken only the trustee touches their links.
            let next = unsafe { (*p).next.load(Ordering::Relaxed) };
            // SAFETY: as above.
            unsafe { (*p).next.store(prev, Ordering::Relaxed) };
            prev = p;
            p = next;
        }
        prev
    }
}

pub(crate) struct Shared {
    pub(crate) id: u64,
    /// Threads in the whole program.
    pub(crate) n: usize,
    pub(crate) placement: Placement,
    /// This process's threads.
    pub(crate) local: Range<usize>,
    /// This host's threads (those whose slots are in `region`).
    pub(crate) host: Range<usize>,
    pub(crate) config: Config,
    pub(crate) matrix: Matrix,
    pub(crate) region: Region,
    /// The shape of every host's region (to aim puts at other hosts).
    pub(crate) shapes: Vec<Shape>,
    /// Between hosts: the fabric (none when the program has one host).
    pub(crate) fabric: Option<Arc<dyn Fabric>>,
    /// Between hosts: brings the doorbells of other hosts' threads in our
    /// region up to date before shutdown reads them (set by the rack).
    pub(crate) refresh: OnceLock<Box<dyn Fn() + Send + Sync>>,
    locals: Box<[Local]>,
    pub(crate) unhandled_panics: AtomicU64,
    /// Round-robin cursor for placement from outside the runtime.
    pub(crate) outside_rr: AtomicU64,
    /// What is profiled, whether waits are tracked (see `profile`).
    pub(crate) observe: super::profile::Control,
    /// The dedicated count and the trustees' parameters, live (see `tuning`).
    pub(crate) tuning: super::tuning::Tuning,
}

/// A fresh random program key (from the operating system's generator).
pub(crate) fn new_program_key() -> [u64; 2] {
    let mut b = [0u8; 16];
    getrandom::getrandom(&mut b).expect("gossamer: the operating system gave no random bytes for the program key");
    [u64::from_le_bytes(b[..8].try_into().expect("8 bytes")), u64::from_le_bytes(b[8..].try_into().expect("8 bytes"))]
}

static NEXT_RUNTIME: AtomicU64 = AtomicU64::new(1);
static LIVE: Mutex<Vec<(u64, Weak<Shared>)>> = Mutex::new(Vec::new());

impl Shared {
    pub(crate) fn new(
        config: Config,
        placement: Placement,
        region: Region,
        fabric: Option<Arc<dyn Fabric>>,
    ) -> Arc<Shared> {
        super::fence::init(placement.ranks.len() > 1);
        let local = placement.local();
        assert_eq!(region.threads(), placement.threads());
        let (bulk_bytes, far_bulk) = (region.shape().bulk_bytes, region.shape().far_bulk);
        let shapes = placement
            .hosts
            .iter()
            .map(|h| Shape { n: placement.threads(), host: h.clone(), bulk_bytes, far_bulk })
            .collect();
        let threads = placement.threads();
        let local_len = local.len();
        let shared = Arc::new(Shared {
            id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            n: placement.threads(),
            locals: local
                .clone()
                .map(|_| Local {
                    thread: OnceLock::new(),
                    has_inject: AtomicBool::new(false),
                    inject: Mutex::new(Vec::new()),
                    submissions: Submissions::new(),
                    relayed: AtomicU64::new(0),
                })
                .collect(),
            local,
            host: placement.host(),
            placement,
            matrix: region.matrix(),
            region,
            shapes,
            fabric,
            refresh: OnceLock::new(),
            unhandled_panics: AtomicU64::new(0),
            outside_rr: AtomicU64::new(0),
            observe: super::profile::Control::new(threads, config.observe.clone()),
            tuning: super::tuning::Tuning::new(
                local_len,
                config.dedicated,
                config.dedicated_auto,
                super::tuning::TrusteeParams { idle_spin: config.idle_spin, ..Default::default() },
            ),
            config,
        });
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(_, w)| w.strong_count() > 0);
        live.push((shared.id, Arc::downgrade(&shared)));
        shared
    }

    /// The live runtime with this id, if it has not shut down.
    pub(crate) fn find(id: u64) -> Option<Arc<Shared>> {
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.iter().find(|(i, _)| *i == id).and_then(|(_, w)| w.upgrade()).filter(|s| !s.stopped())
    }

    /// Runs `f` with the live runtime `id`, from a thread outside it,
    /// without the global lookup each time: the last runtime used is kept
    /// in a thread-local (no atomic operation on the way), until it stops.
    /// `None` if that runtime has shut down.
    pub(crate) fn with_outside<R>(id: u64, f: impl FnOnce(&Arc<Shared>) -> R) -> Option<R> {
        thread_local! {
            static LAST: Cell<Option<Arc<Shared>>> = const { Cell::new(None) };
        }
        // Taken out while in use, so that a nested call cannot drop it.
        let cached = LAST.try_with(Cell::take).ok().flatten();
        let s = match cached {
            Some(s) if s.id == id && !s.stopped() => s,
            _ => Shared::find(id)?,
        };
        let r = f(&s);
        let _ = LAST.try_with(|c| c.set(Some(s)));
        Some(r)
    }

    pub(crate) fn unregister(&self) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(i, _)| *i != self.id);
    }

    #[inline]
    pub(crate) fn is_local(&self, t: usize) -> bool {
        self.local.contains(&t)
    }

    /// Whether thread `t` runs on this host (its slots are in our region).
    #[inline]
    pub(crate) fn same_host(&self, t: usize) -> bool {
        self.host.contains(&t)
    }

    /// The injection queue and thread handle of local worker `t`.
    pub(crate) fn local_worker(&self, t: usize) -> &Local {
        assert!(self.is_local(t), "gossamer: thread {t} is not in this process");
        &self.locals[t - self.local.start]
    }

    #[inline]
    pub(crate) fn doorbell(&self, t: usize) -> &Doorbell {
        self.region.doorbell(t)
    }

    /// The counters of this process's workers.
    pub(crate) fn stats(&self) -> super::Stats {
        super::Stats {
            unhandled_panics: self.unhandled_panics.load(Ordering::Relaxed),
            live_fibers: self.local.clone().map(|t| self.doorbell(t).live_fibers.load(Ordering::Relaxed)).sum(),
            relayed_requests: self.locals.iter().map(|l| l.relayed.load(Ordering::Relaxed)).sum(),
        }
    }

    /// Marks the program as stopping (as rank 0 does), and wakes this
    /// process's workers so that they report whether they are quiet.
    pub(crate) fn begin_stopping(&self) {
        let h = self.region.header();
        if h.stopping.load(Ordering::SeqCst) == 0 {
            h.stopping.store(1, Ordering::SeqCst);
            for t in self.local.clone() {
                self.ring(t);
            }
        }
    }

    /// Wakes every sleeping worker of this process (something landed from
    /// another host, and the slot that changed may be any of theirs).
    pub(crate) fn wake_local(&self) {
        for t in self.local.clone() {
            self.wake(t);
        }
    }

    /// Stops this process's workers (rank 0 has stopped the program).
    pub(crate) fn stop_all(&self) {
        self.region.header().stop.store(1, Ordering::SeqCst);
        for t in self.local.clone() {
            self.ring(t);
        }
    }

    pub(crate) fn stopping(&self) -> bool {
        self.region.header().stopping.load(Ordering::SeqCst) != 0
    }

    pub(crate) fn stopped(&self) -> bool {
        self.region.header().stop.load(Ordering::Acquire) != 0
    }

    /// Wakes worker `t` (of any process) if it sleeps. Call after publishing
    /// something it should see: the fence pairs with the sleeper's, so
    /// either the sleeper sees the new data or we see its flag.
    #[inline]
    pub(crate) fn wake(&self, t: usize) {
        super::fence::light();
        if self.doorbell(t).sleeping.load(Ordering::Relaxed) != 0 {
            self.ring(t);
        }
    }

    /// Wakes worker `t` unconditionally.
    #[cold]
    pub(crate) fn ring(&self, t: usize) {
        let thread = if self.is_local(t) { self.local_worker(t).thread.get() } else { None };
        park::wake(&self.doorbell(t).futex, thread);
    }

    /// Hands `task` to local worker `t` from any thread (slow path).
    pub(crate) fn inject(&self, t: usize, task: Task) {
        let node = self.local_worker(t);
        {
            let mut q = node.inject.lock().unwrap_or_else(|e| e.into_inner());
            q.push(task);
            node.has_inject.store(true, Ordering::Release);
        }
        self.wake(t);
    }

    /// Hands an asynchronous request to local worker `t` from a thread
    /// outside the runtime, waking it if need be. `false` if the worker has
    /// stopped: the request was not queued.
    ///
    /// # Safety
    /// As [`Submissions::push`].
    pub(crate) unsafe fn submit(&self, t: usize, node: *mut SubNode) -> bool {
        // SAFETY: per the contract.
        match unsafe { self.local_worker(t).submissions.push(node) } {
            Ok(was_empty) => {
                if was_empty {
                    self.wake(t);
                }
                true
            }
            Err(()) => false,
        }
    }

    /// Records a panic that no caller could receive.
    #[cold]
    pub(crate) fn report_panic(&self, worker: Option<usize>, what: &str, payload: Box<dyn std::any::Any + Send>) {
        self.unhandled_panics.fetch_add(1, Ordering::Relaxed);
        tracing::error!(worker, "unhandled panic in {what}: {}", crate::error::panic_message(&*payload));
        crate::error::drop_payload(payload);
    }

    /// This process's workers that run user fibers (not dedicated trustees)
    /// right now.
    pub(crate) fn client_workers(&self) -> Range<usize> {
        self.local.start..self.local.end - self.tuning.dedicated()
    }

    /// Workers where pool-level `entrust` places properties: this
    /// process's own, since `entrust` moves the value as it is (any `Send`
    /// type); a property goes to another process only through
    /// `entrust_on`, which serializes it.
    pub(crate) fn trustee_range(&self) -> Range<usize> {
        let dedicated = self.tuning.dedicated();
        if dedicated > 0 {
            self.local.end - dedicated..self.local.end
        } else {
            self.local.clone()
        }
    }
}
