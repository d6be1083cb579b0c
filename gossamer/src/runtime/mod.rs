//! The runtime: worker threads, fiber placement, and orderly shutdown.

mod autodedicate;
mod builder;
mod calls;
pub(crate) mod context;
pub(crate) mod fence;
mod handle;
mod host;
pub(crate) mod join;
mod live;
pub(crate) mod migrate_hooks;
mod observe;
pub(crate) mod park;
mod parker;
pub mod profile;
pub(crate) mod property;
pub(crate) mod shared;
mod signal;
pub(crate) mod strict;
pub(crate) mod stuck;
pub(crate) mod top_adaptive;
mod top_command;
pub(crate) mod top_follow;
mod top_socket;
pub(crate) mod tuning;
pub(crate) mod worker;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

pub use builder::Builder;
pub use calls::{current_thread, spawn, spawn_on, stats, threads, yield_now};
pub use handle::Handle;
pub use host::host_name;
pub use join::{JoinFuture, JoinHandle};
pub use live::{dedicated, set_dedicated, set_dedicated_policy};
pub use parker::{Parker, Unparker};
pub use tuning::{DedicatedChange, DedicatedPolicy, TrusteeParams};

use crate::error::Error;
use crate::fabric::shm::region::Region;
use shared::{Config, Placement, Shared};
use worker::Worker;

/// A set of worker threads, each a trustee and a fiber scheduler.
///
/// Dropping the runtime shuts it down in order: it waits (up to the
/// configured timeout) until every fiber has finished and every request has
/// been answered, then stops the workers, which drop the properties still
/// entrusted to them.
pub struct Runtime {
    pub(crate) shared: Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
}

/// Counters of a running runtime.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Panics that reached no caller: in `apply_then` closures and
    /// then-callbacks, or in runtime messages.
    pub unhandled_panics: u64,
    /// Fibers alive right now, over all workers.
    pub live_fibers: u64,
    /// Requests that reached a cell a moved property left (see
    /// [`Trust::migrate_to`](crate::Trust::migrate_to)) and were relayed
    /// from there to where its value is, over all workers, since the
    /// start. A client thread, in this process or another, learns where
    /// the value went from the first of its requests relayed, and sends
    /// the next ones there: a count that keeps growing means moves faster
    /// than clients catch up.
    pub relayed_requests: u64,
}

/// What shutdown found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// True when every fiber finished and every request was answered in time.
    pub clean: bool,
    /// How long the shutdown took.
    pub elapsed: Duration,
}

impl Runtime {
    /// A builder with default settings: one worker per available core;
    /// see [`Builder`] for the rest.
    ///
    /// ```
    /// let rt = gossamer::Runtime::builder().workers(2).build()?;
    /// let counter = rt.entrust(0u64); // from outside the runtime
    /// let c = counter.clone();
    /// rt.block_on(move || c.apply(|v| *v += 1));
    /// assert_eq!(rt.block_on(move || counter.apply(|v| *v)), 1);
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A runtime with default settings (one worker per available core).
    pub fn new() -> Result<Runtime, Error> {
        Builder::default().build()
    }

    pub(crate) fn start(config: Config) -> Result<Runtime, Error> {
        let n = config.workers;
        Self::start_with(config, Placement::single(n), Region::private(n), None)
    }

    /// Starts this process's workers of a program laid out by `placement`,
    /// over `region`.
    pub(crate) fn start_with(
        config: Config,
        placement: Placement,
        region: Region,
        fabric: Option<Arc<dyn crate::fabric::Fabric>>,
    ) -> Result<Runtime, Error> {
        let shared = Shared::new(config, placement, region, fabric);
        let cores = if shared.config.pin { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
        let mut threads = Vec::with_capacity(shared.local.len());
        for index in shared.local.clone() {
            let sh = shared.clone();
            let k = index - shared.local.start;
            let core = (!cores.is_empty()).then(|| cores[k % cores.len()]);
            let spawned = thread::Builder::new()
                .name(format!("{}-{index}", shared.config.name))
                .stack_size(shared.config.worker_stack_size)
                .spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    let _ = sh.local_worker(index).thread.set(thread::current());
                    let w = Worker::new(index, sh);
                    // Cleared by the guard on every exit, unwinding too,
                    // before `w` is dropped.
                    let _ctx = context::enter(&w);
                    // This thread's arena of the host's shared heap, if the
                    // program has several processes.
                    let _heap = w
                        .shared
                        .region
                        .heap()
                        .and_then(|h| crate::channel::heap::install(h, index, w.shared.placement.key));
                    w.run();
                });
            match spawned {
                Ok(h) => threads.push(h),
                Err(source) => {
                    let mut rt = Runtime { shared, threads };
                    rt.stop_now();
                    return Err(Error::Spawn { index, source });
                }
            }
        }
        observe::start_services(&shared);
        if shared.config.dedicated_auto {
            autodedicate::ensure_started(&shared);
        }
        Ok(Runtime { shared, threads })
    }

    /// A cheap, cloneable handle to this runtime, for code that does not
    /// own it: tokio tasks, other threads (see [`Handle`]).
    pub fn handle(&self) -> Handle {
        Handle::new(self.shared.clone())
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.shared.n
    }

    /// Whether publishing a batch needs only a compiler fence, because the
    /// rare sleeping side pays with Linux `membarrier` (see the `fence`
    /// module); false where `membarrier` is unavailable or disabled with
    /// `GOSSAMER_NO_MEMBARRIER`, and a real fence is used instead.
    pub fn asymmetric_fences(&self) -> bool {
        fence::asymmetric()
    }

    /// Counters of this process's workers (see also [`gossamer::stats`](crate::stats)).
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Runs `f` as a fiber on worker 0 and blocks the calling thread until
    /// it returns. Inside `f` the whole API is available. A panic in `f`
    /// resumes here.
    ///
    /// # Panics
    /// When called from a worker thread of a runtime (use `spawn` there).
    pub fn block_on<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        assert!(context::current().is_none(), "gossamer: block_on called from inside a runtime; spawn a fiber instead");
        match self.spawn_on(0, f).join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p.into_panic()),
        }
    }

    /// Starts a fiber on a worker chosen round-robin among those that run
    /// fibers.
    pub fn spawn<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        handle::spawn(&self.shared, f)
    }

    /// Starts a fiber on worker `thread`.
    ///
    /// # Panics
    /// If there is no such worker.
    pub fn spawn_on<F, R>(&self, thread: usize, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        assert!(thread < self.shared.n, "gossamer: no worker {thread} (the runtime has {})", self.shared.n);
        join::spawn_at(&self.shared, thread, f)
    }

    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Leaves a program that another process is stopping: joins this
    /// process's workers without waiting for quiescence.
    pub(crate) fn leave(mut self) {
        self.stop_now();
    }

    /// Shuts down now, reporting whether everything finished in time.
    pub fn shutdown(mut self) -> ShutdownReport {
        self.shutdown_inner()
    }

    fn snapshot(&self) -> (bool, Vec<u64>) {
        let sh = &self.shared;
        if let Some(refresh) = sh.refresh.get() {
            refresh();
        }
        let all_quiet = (0..sh.n).all(|t| sh.doorbell(t).quiet.load(Ordering::SeqCst) != 0);
        (all_quiet, (0..sh.n).map(|t| sh.doorbell(t).epoch.load(Ordering::SeqCst)).collect())
    }

    fn shutdown_inner(&mut self) -> ShutdownReport {
        let start = Instant::now();
        if self.threads.is_empty() {
            return ShutdownReport { clean: true, elapsed: Duration::ZERO };
        }
        self.shared.region.header().stopping.store(1, Ordering::SeqCst);
        for t in 0..self.shared.n {
            self.shared.ring(t);
        }
        // Quiescence: every worker reports quiet, twice, with no work done
        // in between (a worker that got work in between bumped its epoch).
        let timeout = self.shared.config.shutdown_timeout;
        let clean = loop {
            let (q1, e1) = self.snapshot();
            if q1 {
                thread::sleep(Duration::from_micros(500));
                let (q2, e2) = self.snapshot();
                if q2 && e1 == e2 {
                    break true;
                }
            }
            if start.elapsed() > timeout {
                let live = self.stats().live_fibers;
                tracing::error!(live_fibers = live, "shutdown timed out after {timeout:?}; abandoning what is left");
                break false;
            }
            thread::sleep(Duration::from_micros(200));
        };
        self.stop_now();
        ShutdownReport { clean, elapsed: start.elapsed() }
    }

    fn stop_now(&mut self) {
        self.shared.observe.shut_down();
        self.shared.region.header().stop.store(1, Ordering::SeqCst);
        for t in 0..self.shared.n {
            self.shared.ring(t);
        }
        for h in self.threads.drain(..) {
            if h.join().is_err() {
                tracing::error!("a worker thread panicked");
            }
        }
        // Moved values whose new trustee never registered them.
        if let Some(hooks) = migrate_hooks::HOOKS.get() {
            (hooks.drop_left)(self.shared.id);
        }
        self.shared.unregister();
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown_inner();
    }
}

pub(crate) fn spawn_at_worker<F, R>(w: &Worker, thread: usize, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    join::spawn_at(&w.shared, thread, f)
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! A small end-to-end run, kept small enough for Miri (where fibers
    //! fall back to threads), so that Miri checks the channel as used.
    use super::Runtime;

    #[test]
    fn delegation_round_trips_between_two_workers() {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let v = rt.block_on(|| {
            let remote = crate::trustee(1).entrust(vec![1u64]);
            let local = crate::local_trustee().entrust(0u64);
            for i in 0..5 {
                remote.apply(move |v| v.push(i));
                local.apply(|x| *x += 1);
            }
            let seen = std::rc::Rc::new(std::cell::Cell::new(0));
            let s = seen.clone();
            remote.apply_then(|v| v.len(), move |n| s.set(n));
            let big: Vec<u64> = remote.apply_with(
                |v, extra: Vec<u64>| {
                    v.extend(extra);
                    v.clone()
                },
                vec![7; 100],
            );
            let fiber = crate::spawn_on(1, move || remote.apply(|v| v.iter().sum::<u64>()));
            assert_eq!(seen.get(), 6);
            (big.len(), fiber.join().unwrap(), local.apply(|x| *x))
        });
        assert_eq!(v, (106, 1 + 10 + 700, 5));
        assert!(rt.shutdown().clean);
    }
}
