//! The gate of an adaptive property: the per-property lock, the mode word
//! that routes callers (in place or delegated), the policy, and the
//! contention statistics from which an adaptive gate picks its mode.
//!
//! Every access to the value holds the lock, whoever makes it: a caller in
//! place or the trustee serving a delegated request. The mode word only
//! decides who takes the lock; it is a hint that may be stale, never what
//! makes access exclusive. The statistics are written only by the lock
//! holder, with plain loads and stores.

use crate::sync::{AtomicU32, Ordering};

/// Who runs a closure on an adaptive property now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Callers send their closures to the trustee, as with a `Trust<T>`.
    Delegate,
    /// Callers run their closures in place, under the property's lock.
    Lock,
}

/// What decides an adaptive property's mode (see
/// [`Adaptive::set_policy`](crate::Adaptive::set_policy)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Always delegate.
    Delegate,
    /// Measure contention and switch between the two modes (the default).
    Adaptive,
    /// Always run in place under the lock (within the trustee's process).
    Lock,
}

/// The thresholds of [`Policy::Adaptive`]; settable per property with
/// [`Adaptive::set_thresholds`](crate::Adaptive::set_thresholds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// In lock mode, the share of callers (percent) that found the lock
    /// held, over one window, above which the property switches to
    /// delegation.
    pub contended_percent: u32,
    /// Calls in lock mode per measurement window.
    pub lock_window: u32,
    /// Requests served by delegation before the property tries lock mode
    /// again; doubled (up to `delegate_window_max`) each time the trial
    /// finds contention at once, reset when it finds none.
    pub delegate_window_min: u32,
    /// The most requests served between two trials of lock mode.
    pub delegate_window_max: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { contended_percent: 40, lock_window: 512, delegate_window_min: 4096, delegate_window_max: 1 << 20 }
    }
}

const FREE: u32 = 0;
const HELD: u32 = 1;

const MODE_DELEGATE: u32 = 0;
const MODE_LOCK: u32 = 1;
/// The value is gone (dropped by its owner, at the latest at shutdown):
/// callers delegate, and one that took the lock in place refuses.
const MODE_RETIRED: u32 = 2;

const POLICY_DELEGATE: u32 = 0;
const POLICY_ADAPTIVE: u32 = 1;
const POLICY_LOCK: u32 = 2;

/// Spins before a waiter gives up its time slice: the holder runs a
/// closure that never blocks, usually for well under a microsecond.
const SPINS: u32 = 64;

/// Lock, mode, policy and statistics of one adaptive property. The fields
/// every call touches come first (`repr(C)`), so that they share a cache
/// line with the value that precedes the gate in its slot.
#[repr(C)]
pub(crate) struct Gate {
    lock: AtomicU32,
    mode: AtomicU32,
    // Statistics and thresholds: written by the lock holder only
    // (`set_policy` and `set_thresholds` too take the lock).
    ops: AtomicU32,
    lock_window: AtomicU32,
    contended: AtomicU32,
    policy: AtomicU32,
    served: AtomicU32,
    delegate_window: AtomicU32,
    /// 1 while a lock window follows a delegate window (a trial).
    trial: AtomicU32,
    contended_percent: AtomicU32,
    delegate_window_min: AtomicU32,
    delegate_window_max: AtomicU32,
}

impl Gate {
    /// A free gate in lock mode under the adaptive policy: a new property
    /// is uncontended until measured otherwise.
    pub(crate) fn new() -> Gate {
        let t = Thresholds::default();
        Gate {
            lock: AtomicU32::new(FREE),
            mode: AtomicU32::new(MODE_LOCK),
            policy: AtomicU32::new(POLICY_ADAPTIVE),
            ops: AtomicU32::new(0),
            contended: AtomicU32::new(0),
            served: AtomicU32::new(0),
            delegate_window: AtomicU32::new(t.delegate_window_min),
            trial: AtomicU32::new(0),
            contended_percent: AtomicU32::new(t.contended_percent),
            lock_window: AtomicU32::new(t.lock_window),
            delegate_window_min: AtomicU32::new(t.delegate_window_min),
            delegate_window_max: AtomicU32::new(t.delegate_window_max),
        }
    }

    /// The current mode (a routing hint: see the module doc).
    #[inline]
    pub(crate) fn mode(&self) -> Mode {
        if self.mode.load(Ordering::Relaxed) == MODE_LOCK {
            Mode::Lock
        } else {
            Mode::Delegate
        }
    }

    /// Switches the mode, unless the value is gone (a switch without the
    /// lock, by `note_slow_trustee`, may race with `retire`: it loses).
    fn set_mode(&self, m: Mode) {
        let new = if m == Mode::Lock { MODE_LOCK } else { MODE_DELEGATE };
        let _ =
            self.mode.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| (old != MODE_RETIRED).then_some(new));
    }

    /// Marks the value as gone. Only while holding the lock, and for good.
    pub(crate) fn retire(&self) {
        self.mode.store(MODE_RETIRED, Ordering::Relaxed);
    }

    /// Whether the value is gone. Exact while holding the lock.
    #[inline]
    pub(crate) fn retired(&self) -> bool {
        self.mode.load(Ordering::Relaxed) == MODE_RETIRED
    }

    pub(crate) fn policy(&self) -> Policy {
        match self.policy.load(Ordering::Relaxed) {
            POLICY_DELEGATE => Policy::Delegate,
            POLICY_LOCK => Policy::Lock,
            _ => Policy::Adaptive,
        }
    }

    /// Sets the policy; a fixed policy fixes the mode at once, the adaptive
    /// one starts a fresh measurement in the current mode.
    pub(crate) fn set_policy(&self, p: Policy) {
        self.lock();
        let (code, mode) = match p {
            Policy::Delegate => (POLICY_DELEGATE, Some(Mode::Delegate)),
            Policy::Adaptive => (POLICY_ADAPTIVE, None),
            Policy::Lock => (POLICY_LOCK, Some(Mode::Lock)),
        };
        self.policy.store(code, Ordering::Relaxed);
        if let Some(m) = mode {
            self.set_mode(m);
        }
        self.reset_window();
        self.served.store(0, Ordering::Relaxed);
        self.unlock();
    }

    pub(crate) fn thresholds(&self) -> Thresholds {
        Thresholds {
            contended_percent: self.contended_percent.load(Ordering::Relaxed),
            lock_window: self.lock_window.load(Ordering::Relaxed),
            delegate_window_min: self.delegate_window_min.load(Ordering::Relaxed),
            delegate_window_max: self.delegate_window_max.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn set_thresholds(&self, t: Thresholds) {
        self.lock();
        self.contended_percent.store(t.contended_percent, Ordering::Relaxed);
        self.lock_window.store(t.lock_window.max(1), Ordering::Relaxed);
        let min = t.delegate_window_min.max(1);
        self.delegate_window_min.store(min, Ordering::Relaxed);
        self.delegate_window_max.store(t.delegate_window_max.max(min), Ordering::Relaxed);
        self.delegate_window.store(min, Ordering::Relaxed);
        self.reset_window();
        self.unlock();
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        self.lock.load(Ordering::Relaxed) == FREE
            && self.lock.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Takes the lock, spinning, then yielding the OS thread while it is
    /// held (its holder may have been preempted).
    pub(crate) fn lock(&self) {
        let mut spins = 0u32;
        while !self.try_lock() {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                yield_thread();
            }
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        self.lock.store(FREE, Ordering::Release);
    }

    fn reset_window(&self) {
        self.ops.store(0, Ordering::Relaxed);
        self.contended.store(0, Ordering::Relaxed);
    }

    /// Counts one call run in place (`contended`: it found the lock held)
    /// and, under the adaptive policy, closes the window when it is full:
    /// too many contended calls switch the property to delegation. Only
    /// while holding the lock.
    #[inline]
    pub(crate) fn note_in_place(&self, contended: bool) {
        let ops = self.ops.load(Ordering::Relaxed) + 1;
        self.ops.store(ops, Ordering::Relaxed);
        if contended {
            let c = self.contended.load(Ordering::Relaxed) + 1;
            self.contended.store(c, Ordering::Relaxed);
        }
        if ops >= self.lock_window.load(Ordering::Relaxed) {
            self.close_lock_window(ops);
        }
    }

    #[cold]
    fn close_lock_window(&self, ops: u32) {
        let c = self.contended.load(Ordering::Relaxed) as u64;
        self.reset_window();
        if self.policy.load(Ordering::Relaxed) != POLICY_ADAPTIVE || self.mode() != Mode::Lock {
            return;
        }
        let busy = c * 100 >= ops as u64 * self.contended_percent.load(Ordering::Relaxed) as u64;
        let trial = self.trial.load(Ordering::Relaxed) == 1;
        self.trial.store(0, Ordering::Relaxed);
        let min = self.delegate_window_min.load(Ordering::Relaxed);
        if busy {
            // A trial that met contention at once waits twice as long
            // before the next one.
            if trial {
                let w = self.delegate_window.load(Ordering::Relaxed);
                let max = self.delegate_window_max.load(Ordering::Relaxed);
                self.delegate_window.store(w.saturating_mul(2).min(max), Ordering::Relaxed);
            } else {
                self.delegate_window.store(min, Ordering::Relaxed);
            }
            self.served.store(0, Ordering::Relaxed);
            self.set_mode(Mode::Delegate);
        } else {
            self.delegate_window.store(min, Ordering::Relaxed);
        }
    }

    /// Counts one request served by the trustee and, under the adaptive
    /// policy in delegate mode, starts a trial of lock mode once the
    /// delegate window is full. Only while holding the lock.
    #[inline]
    pub(crate) fn note_served(&self) {
        if self.mode.load(Ordering::Relaxed) != MODE_DELEGATE {
            return;
        }
        let n = self.served.load(Ordering::Relaxed) + 1;
        self.served.store(n, Ordering::Relaxed);
        if n >= self.delegate_window.load(Ordering::Relaxed) {
            self.start_trial();
        }
    }

    #[cold]
    fn start_trial(&self) {
        self.served.store(0, Ordering::Relaxed);
        if self.policy.load(Ordering::Relaxed) == POLICY_ADAPTIVE {
            self.trial.store(1, Ordering::Relaxed);
            self.reset_window();
            self.set_mode(Mode::Lock);
        }
    }

    /// A delegated call waited far longer than a served request takes: the
    /// trustee's thread is not running (preempted, parked or busy
    /// elsewhere). Under the adaptive policy, callers go in place.
    pub(crate) fn note_slow_trustee(&self) {
        if self.policy.load(Ordering::Relaxed) == POLICY_ADAPTIVE && self.mode() == Mode::Delegate {
            self.set_mode(Mode::Lock);
        }
    }
}

#[cfg(not(loom))]
fn yield_thread() {
    std::thread::yield_now();
}

#[cfg(loom)]
fn yield_thread() {
    loom::thread::yield_now();
}
