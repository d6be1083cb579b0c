//! State shared by all workers of a runtime: the slot matrix, each worker's
//! sleep flag and injection queue (for threads outside the runtime), and the
//! shutdown flags. Also the process-wide list of live runtimes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

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

/// Per-worker state other threads may touch.
#[repr(align(128))]
pub(crate) struct Node {
    pub(crate) sleeping: AtomicBool,
    pub(crate) thread: OnceLock<Thread>,
    pub(crate) has_inject: AtomicBool,
    pub(crate) inject: Mutex<Vec<Task>>,
    /// Shutdown bookkeeping: no fibers, no requests, nothing pending.
    pub(crate) quiet: AtomicBool,
    /// Bumped (single writer, plain store) whenever the worker did work.
    pub(crate) epoch: AtomicU64,
    pub(crate) live_fibers: AtomicU64,
}

pub(crate) struct Shared {
    pub(crate) id: u64,
    pub(crate) n: usize,
    pub(crate) config: Config,
    pub(crate) matrix: Matrix,
    pub(crate) nodes: Box<[Node]>,
    pub(crate) stopping: AtomicBool,
    pub(crate) stop: AtomicBool,
    pub(crate) unhandled_panics: AtomicU64,
    /// Round-robin cursor for placement from outside the runtime.
    pub(crate) outside_rr: AtomicU64,
}

static NEXT_RUNTIME: AtomicU64 = AtomicU64::new(1);
static LIVE: Mutex<Vec<(u64, Weak<Shared>)>> = Mutex::new(Vec::new());

impl Shared {
    pub(crate) fn new(config: Config) -> Arc<Shared> {
        super::fence::init();
        let n = config.workers;
        let shared = Arc::new(Shared {
            id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            n,
            matrix: Matrix::new(n),
            nodes: (0..n)
                .map(|_| Node {
                    sleeping: AtomicBool::new(false),
                    thread: OnceLock::new(),
                    has_inject: AtomicBool::new(false),
                    inject: Mutex::new(Vec::new()),
                    quiet: AtomicBool::new(false),
                    epoch: AtomicU64::new(0),
                    live_fibers: AtomicU64::new(0),
                })
                .collect(),
            stopping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
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
        live.iter().find(|(i, _)| *i == id).and_then(|(_, w)| w.upgrade()).filter(|s| !s.stop.load(Ordering::Acquire))
    }

    pub(crate) fn unregister(&self) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|(i, _)| *i != self.id);
    }

    /// Wakes worker `t` if it sleeps. Call after publishing something it
    /// should see: the fence pairs with the one in the sleeper's check, so
    /// either the sleeper sees the new data or we see its flag.
    #[inline]
    pub(crate) fn wake(&self, t: usize) {
        super::fence::light();
        if self.nodes[t].sleeping.load(Ordering::Relaxed) {
            self.unpark(t);
        }
    }

    #[cold]
    pub(crate) fn unpark(&self, t: usize) {
        if let Some(th) = self.nodes[t].thread.get() {
            th.unpark();
        }
    }

    /// Hands `task` to worker `t` from any thread (slow path).
    pub(crate) fn inject(&self, t: usize, task: Task) {
        let node = &self.nodes[t];
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

    /// Workers that run user fibers (not dedicated trustees).
    pub(crate) fn client_workers(&self) -> usize {
        self.n - self.config.dedicated
    }

    /// Workers where pool-level `entrust` places properties.
    pub(crate) fn trustee_range(&self) -> std::ops::Range<usize> {
        if self.config.dedicated > 0 {
            self.client_workers()..self.n
        } else {
            0..self.n
        }
    }
}
