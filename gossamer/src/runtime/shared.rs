//! State shared by the workers of a runtime: the region (slot matrix,
//! doorbells, program-wide flags), the local workers' injection queues for
//! threads outside the runtime, and where this process's threads sit among
//! all threads of the program. Also the process-wide list of live runtimes.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

use super::park;
use super::region::{Doorbell, Region};
use crate::channel::matrix::Matrix;

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
    pub(crate) shutdown_timeout: Duration,
    pub(crate) name: String,
}

/// Where this process's workers sit among all threads of the program.
#[derive(Clone, Debug)]
pub(crate) struct Placement {
    /// This process's rank.
    pub(crate) rank: usize,
    /// Global thread ids of each rank.
    pub(crate) ranks: Vec<Range<usize>>,
    /// The program's secret, the same in every process: it authenticates
    /// trusts in transit (see `trust::wire`). Never leaves the program.
    pub(crate) key: [u64; 2],
}

impl Placement {
    pub(crate) fn single(workers: usize) -> Self {
        Placement { rank: 0, ranks: std::iter::once(0..workers).collect(), key: new_program_key() }
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
}

pub(crate) struct Shared {
    pub(crate) id: u64,
    /// Threads in the whole program.
    pub(crate) n: usize,
    pub(crate) placement: Placement,
    /// This process's threads.
    pub(crate) local: Range<usize>,
    pub(crate) config: Config,
    pub(crate) matrix: Matrix,
    pub(crate) region: Region,
    locals: Box<[Local]>,
    pub(crate) unhandled_panics: AtomicU64,
    /// Round-robin cursor for placement from outside the runtime.
    pub(crate) outside_rr: AtomicU64,
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
    pub(crate) fn new(config: Config, placement: Placement, region: Region) -> Arc<Shared> {
        super::fence::init(placement.ranks.len() > 1);
        let local = placement.local();
        assert_eq!(region.threads(), placement.threads());
        let shared = Arc::new(Shared {
            id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            n: placement.threads(),
            locals: local
                .clone()
                .map(|_| Local {
                    thread: OnceLock::new(),
                    has_inject: AtomicBool::new(false),
                    inject: Mutex::new(Vec::new()),
                })
                .collect(),
            local,
            placement,
            matrix: region.matrix(),
            region,
            unhandled_panics: AtomicU64::new(0),
            outside_rr: AtomicU64::new(0),
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

    pub(crate) fn unregister(&self) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(i, _)| *i != self.id);
    }

    #[inline]
    pub(crate) fn is_local(&self, t: usize) -> bool {
        self.local.contains(&t)
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

    /// Records a panic that no caller could receive.
    #[cold]
    pub(crate) fn report_panic(&self, worker: Option<usize>, what: &str, payload: Box<dyn std::any::Any + Send>) {
        self.unhandled_panics.fetch_add(1, Ordering::Relaxed);
        tracing::error!(worker, "unhandled panic in {what}: {}", crate::error::panic_message(&*payload));
    }

    /// This process's workers that run user fibers (not dedicated trustees).
    pub(crate) fn client_workers(&self) -> Range<usize> {
        self.local.start..self.local.end - self.config.dedicated
    }

    /// Workers where pool-level `entrust` places properties.
    pub(crate) fn trustee_range(&self) -> Range<usize> {
        if self.config.dedicated > 0 {
            self.local.end - self.config.dedicated..self.local.end
        } else if self.placement.ranks.len() > 1 {
            0..self.n
        } else {
            self.local.clone()
        }
    }
}
