//! Live trustee settings: how many of this process's workers are dedicated
//! trustees right now, each worker's polling parameters, and the load each
//! worker measures (time serving delegated closures, time running fibers)
//! for the controller that picks the dedicated count (`autodedicate`).
//!
//! Everything here is read by the workers with relaxed loads off the fast
//! path (when choosing where to place, when idling) and written rarely, by
//! the program, the controller or `gossamer top`; the load counters are
//! written only by their own worker, with plain stores.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::shared::Shared;
use crate::error::Error;

/// The polling parameters of one trustee (worker thread), settable while
/// the runtime runs ([`Runtime::set_trustee_params`](crate::Runtime::set_trustee_params),
/// [`TrusteeRef::set_params`](crate::TrusteeRef::set_params), `gossamer top --set`).
///
/// ```
/// use std::time::Duration;
/// let rt = gossamer::Runtime::builder().workers(2).build()?;
/// let mut p = rt.trustee_params(1)?;
/// assert_eq!(p.idle_spin, Duration::from_micros(100));
/// p.idle_spin = Duration::from_micros(20);
/// rt.set_trustee_params(Some(1), p)?;
/// assert_eq!(rt.trustee_params(1)?.idle_spin, Duration::from_micros(20));
/// # Ok::<(), gossamer::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrusteeParams {
    /// Idle rounds polled with one pause between them before the worker
    /// starts yielding its core (default 128; at most 2^20).
    pub tight_polls: u32,
    /// How long an idle worker keeps polling, yielding the core between
    /// polls, before it sleeps (default: the builder's `idle_spin`, 100 µs;
    /// at most 10 s).
    pub idle_spin: Duration,
    /// The longest a sleeping worker sleeps before it looks at its slots
    /// again without being woken (default 50 ms; 100 µs to 1 s).
    pub sleep_poll: Duration,
    /// While fibers poll (they run, and nothing moves through the slots),
    /// the worker yields its core every this many rounds (default 64;
    /// 1 to 2^20).
    pub fiber_yield: u32,
}

impl Default for TrusteeParams {
    fn default() -> Self {
        TrusteeParams {
            tight_polls: 128,
            idle_spin: Duration::from_micros(100),
            sleep_poll: Duration::from_millis(50),
            fiber_yield: 64,
        }
    }
}

/// The largest `tight_polls` and `fiber_yield`.
pub(crate) const MAX_ROUNDS: u32 = 1 << 20;
/// The longest `idle_spin`.
pub(crate) const MAX_IDLE_SPIN: Duration = Duration::from_secs(10);
/// The bounds of `sleep_poll`.
pub(crate) const SLEEP_POLL: (Duration, Duration) = (Duration::from_micros(100), Duration::from_secs(1));

impl TrusteeParams {
    /// Checks every parameter against its documented bounds.
    pub fn check(&self) -> Result<(), Error> {
        let bad = |name: &'static str, value: String, allowed: &'static str| {
            Err(Error::BadTrusteeParam { name, value, allowed })
        };
        if self.tight_polls > MAX_ROUNDS {
            return bad("tight_polls", self.tight_polls.to_string(), "0 to 1048576");
        }
        if self.idle_spin > MAX_IDLE_SPIN {
            return bad("idle_spin", format!("{:?}", self.idle_spin), "at most 10 s");
        }
        if self.sleep_poll < SLEEP_POLL.0 || self.sleep_poll > SLEEP_POLL.1 {
            return bad("sleep_poll", format!("{:?}", self.sleep_poll), "100 µs to 1 s");
        }
        if self.fiber_yield == 0 || self.fiber_yield > MAX_ROUNDS {
            return bad("fiber_yield", self.fiber_yield.to_string(), "1 to 1048576");
        }
        Ok(())
    }
}

/// How the number of dedicated trustees is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DedicatedPolicy {
    /// The last `k` workers of this process are dedicated trustees until
    /// told otherwise.
    Fixed(usize),
    /// A controller picks `k` from the load it measures: the time each
    /// worker spends serving delegated closures, running fibers and idle
    /// (see [`Builder::dedicated_trustees_auto`](crate::Builder::dedicated_trustees_auto)).
    Auto,
}

/// One change of the number of dedicated trustees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DedicatedChange {
    /// When, since the runtime started.
    pub at: Duration,
    /// The count before.
    pub from: usize,
    /// The count after.
    pub to: usize,
    /// Whether the controller made it (else the program or `gossamer top`).
    pub auto: bool,
}

/// Changes kept for [`Runtime::dedicated_history`](crate::Runtime::dedicated_history).
const HISTORY: usize = 256;

/// One worker's live parameters and measured load.
#[repr(align(128))]
pub(crate) struct WorkerTune {
    tight_polls: AtomicU32,
    fiber_yield: AtomicU32,
    idle_spin_ns: AtomicU64,
    sleep_poll_ns: AtomicU64,
    /// Estimated nanoseconds spent serving request slots, and running
    /// fibers, since the worker started (written by the worker only).
    pub(crate) serve_ns: AtomicU64,
    pub(crate) fiber_ns: AtomicU64,
    /// The share (percent) of its last measured interval the worker's
    /// thread waited for a CPU (written by the worker only; see
    /// `worker::cpu_wait`).
    cpu_wait_percent: AtomicU32,
    /// A share that tests force, above 100 when none is.
    #[cfg(test)]
    cpu_wait_forced: AtomicU32,
}

impl WorkerTune {
    fn new(p: TrusteeParams) -> Self {
        let w = WorkerTune {
            tight_polls: AtomicU32::new(0),
            fiber_yield: AtomicU32::new(0),
            idle_spin_ns: AtomicU64::new(0),
            sleep_poll_ns: AtomicU64::new(0),
            serve_ns: AtomicU64::new(0),
            fiber_ns: AtomicU64::new(0),
            cpu_wait_percent: AtomicU32::new(0),
            #[cfg(test)]
            cpu_wait_forced: AtomicU32::new(u32::MAX),
        };
        w.store(p);
        w
    }

    fn store(&self, p: TrusteeParams) {
        self.tight_polls.store(p.tight_polls, Ordering::Relaxed);
        self.fiber_yield.store(p.fiber_yield, Ordering::Relaxed);
        self.idle_spin_ns.store(p.idle_spin.as_nanos() as u64, Ordering::Relaxed);
        self.sleep_poll_ns.store(p.sleep_poll.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The share (percent) of its last measured interval the worker's
    /// thread waited for a CPU.
    #[inline]
    pub(crate) fn cpu_wait_percent(&self) -> u32 {
        #[cfg(test)]
        {
            let forced = self.cpu_wait_forced.load(Ordering::Relaxed);
            if forced <= 100 {
                return forced;
            }
        }
        self.cpu_wait_percent.load(Ordering::Relaxed)
    }

    /// Publishes the worker's measurement (by the worker only).
    pub(crate) fn set_cpu_wait_percent(&self, pct: u32) {
        self.cpu_wait_percent.store(pct, Ordering::Relaxed);
    }

    /// Makes [`cpu_wait_percent`](Self::cpu_wait_percent) report `pct`
    /// whatever the worker measures, or (`None`) its measurement again.
    #[cfg(test)]
    pub(crate) fn force_cpu_wait_percent(&self, pct: Option<u32>) {
        self.cpu_wait_forced.store(pct.map_or(u32::MAX, |p| p.min(100)), Ordering::Relaxed);
    }

    pub(crate) fn params(&self) -> TrusteeParams {
        TrusteeParams {
            tight_polls: self.tight_polls.load(Ordering::Relaxed),
            idle_spin: Duration::from_nanos(self.idle_spin_ns.load(Ordering::Relaxed)),
            sleep_poll: Duration::from_nanos(self.sleep_poll_ns.load(Ordering::Relaxed)),
            fiber_yield: self.fiber_yield.load(Ordering::Relaxed),
        }
    }

    #[inline]
    pub(crate) fn tight_polls(&self) -> u32 {
        self.tight_polls.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn fiber_yield(&self) -> u32 {
        self.fiber_yield.load(Ordering::Relaxed).max(1)
    }

    #[inline]
    pub(crate) fn idle_spin(&self) -> Duration {
        Duration::from_nanos(self.idle_spin_ns.load(Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn sleep_poll(&self) -> Duration {
        Duration::from_nanos(self.sleep_poll_ns.load(Ordering::Relaxed))
    }
}

/// The live settings of a runtime's local workers.
pub(crate) struct Tuning {
    dedicated: AtomicUsize,
    auto: AtomicBool,
    workers: Box<[WorkerTune]>,
    history: Mutex<VecDeque<DedicatedChange>>,
    started: Instant,
    /// Whether the controller thread was started.
    controller: AtomicBool,
}

impl Tuning {
    pub(crate) fn new(local: usize, dedicated: usize, auto: bool, params: TrusteeParams) -> Tuning {
        Tuning {
            dedicated: AtomicUsize::new(dedicated),
            auto: AtomicBool::new(auto),
            workers: (0..local).map(|_| WorkerTune::new(params)).collect(),
            history: Mutex::new(VecDeque::new()),
            started: Instant::now(),
            controller: AtomicBool::new(false),
        }
    }

    /// True for the one caller that gets to start the controller.
    pub(crate) fn claim_controller(&self) -> bool {
        !self.controller.swap(true, Ordering::Relaxed)
    }

    /// The dedicated trustees right now.
    #[inline]
    pub(crate) fn dedicated(&self) -> usize {
        self.dedicated.load(Ordering::Relaxed)
    }

    pub(crate) fn auto(&self) -> bool {
        self.auto.load(Ordering::Relaxed)
    }
}

impl Shared {
    /// Local worker `t`'s live parameters and load.
    #[inline]
    pub(crate) fn tune(&self, t: usize) -> &WorkerTune {
        &self.tuning.workers[t - self.local.start]
    }

    /// Whether local worker `t` is a dedicated trustee right now.
    #[inline]
    pub(crate) fn is_dedicated(&self, t: usize) -> bool {
        t + self.tuning.dedicated() >= self.local.end
    }

    /// The policy in force.
    pub(crate) fn dedicated_policy(&self) -> DedicatedPolicy {
        if self.tuning.auto() {
            DedicatedPolicy::Auto
        } else {
            DedicatedPolicy::Fixed(self.tuning.dedicated())
        }
    }

    /// Sets the policy: a fixed count (checked: at least one worker of this
    /// process must still run fibers), or the controller, which starts from
    /// the count in force.
    pub(crate) fn set_dedicated_policy(&self, policy: DedicatedPolicy) -> Result<(), Error> {
        match policy {
            DedicatedPolicy::Auto => {
                let _h = self.tuning.history.lock().unwrap_or_else(|e| e.into_inner());
                self.tuning.auto.store(true, Ordering::Relaxed);
                Ok(())
            }
            DedicatedPolicy::Fixed(k) => {
                self.check_dedicated(k)?;
                self.change_dedicated(k, false);
                Ok(())
            }
        }
    }

    pub(crate) fn check_dedicated(&self, k: usize) -> Result<(), Error> {
        if k >= self.local.len() {
            return Err(Error::TooManyDedicated { workers: self.local.len(), dedicated: k });
        }
        Ok(())
    }

    /// Makes the last `k` workers dedicated (`k` checked by the caller).
    /// Nothing moves: properties stay with their trustees and fibers with
    /// their threads; from now on placement picks among the new ranges, and
    /// a dedicated worker serves before it runs its remaining fibers.
    ///
    /// The controller's change (`by_controller`) applies only while the
    /// policy is still `Auto`; any other fixes the policy. Both happen under
    /// the history's lock, so that a count the program fixes is never
    /// overwritten by a decision the controller made just before.
    pub(crate) fn change_dedicated(&self, k: usize, by_controller: bool) {
        let mut h = self.tuning.history.lock().unwrap_or_else(|e| e.into_inner());
        if by_controller {
            if !self.tuning.auto() {
                return;
            }
        } else {
            self.tuning.auto.store(false, Ordering::Relaxed);
        }
        let from = self.tuning.dedicated.swap(k, Ordering::Relaxed);
        if from == k {
            return;
        }
        tracing::info!(from, to = k, auto = by_controller, "dedicated trustees changed");
        if h.len() == HISTORY {
            h.pop_front();
        }
        h.push_back(DedicatedChange { at: self.tuning.started.elapsed(), from, to: k, auto: by_controller });
    }

    pub(crate) fn dedicated_history(&self) -> Vec<DedicatedChange> {
        self.tuning.history.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect()
    }

    /// Trustee `t`'s parameters (a local worker).
    pub(crate) fn trustee_params(&self, t: usize) -> Result<TrusteeParams, Error> {
        if !self.is_local(t) {
            return Err(Error::NoSuchTrustee { index: t, local: self.local.clone() });
        }
        Ok(self.tune(t).params())
    }

    /// Sets the parameters of trustee `t`, or of every local worker.
    pub(crate) fn set_trustee_params(&self, t: Option<usize>, p: TrusteeParams) -> Result<(), Error> {
        p.check()?;
        match t {
            Some(t) if !self.is_local(t) => Err(Error::NoSuchTrustee { index: t, local: self.local.clone() }),
            Some(t) => {
                self.tune(t).store(p);
                self.ring(t);
                Ok(())
            }
            None => {
                for t in self.local.clone() {
                    self.tune(t).store(p);
                    self.ring(t);
                }
                Ok(())
            }
        }
    }
}
