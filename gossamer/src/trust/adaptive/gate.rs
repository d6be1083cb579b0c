//! The gate of an adaptive property: the per-property lock, the mode word
//! that routes callers (in place or delegated), the policy, and the
//! measurements from which an adaptive gate picks its mode.
//!
//! Every access to the value holds the lock, whoever makes it: a caller in
//! place or the trustee serving a delegated request (which may keep it for
//! the rest of the batch it serves, see `runtime::worker::batch_hold`;
//! [`Gate::lock`] takes such a lock over on the thread that keeps it). The
//! mode word only decides who takes the lock; it is a hint that may be
//! stale, never what makes access exclusive. The measurements are written
//! only by the lock holder, with plain loads and stores.
//!
//! **How the adaptive policy decides.** Each mode measures the property's
//! throughput over its windows: in lock mode the callers in place, over
//! `lock_window` calls (and the share of them that found the lock held);
//! in delegate mode the trustee, over the requests it serves. Contention
//! in lock mode (a share of contended calls at or above the threshold) is
//! what makes the property consider delegation: it switches when
//! delegation was measured faster than the lock by a margin, or when it
//! has never been measured, and otherwise stays, trying delegation again
//! after a number of contended windows that doubles each time the trial
//! loses. In delegate mode, the lock's last rate is compared at the end of
//! each window: the property goes back to lock mode as soon as the lock
//! was about as fast, and in any case every few windows to measure it
//! again; each measurement that confirms delegation doubles that number
//! of windows (up to 64), and the delegate window keeps its size. Ties go
//! to the lock, which is faster for an uncontended caller and does not
//! depend on the trustee's thread being scheduled.

#[cfg(not(loom))]
use std::sync::OnceLock;
#[cfg(not(loom))]
use std::time::Instant;

use crate::runtime::context;
use crate::runtime::worker::batch_hold::TakeOver;
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
    /// Measure and switch between the two modes (the default).
    Adaptive,
    /// Always run in place under the lock (within the trustee's process).
    Lock,
}

/// The thresholds of [`Policy::Adaptive`]; settable per property with
/// [`Adaptive::set_thresholds`](crate::Adaptive::set_thresholds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// In lock mode, the share of calls (percent) that found the lock
    /// held, over one window, at or above which the property considers
    /// delegation.
    pub contended_percent: u32,
    /// Calls in lock mode per measurement window.
    pub lock_window: u32,
    /// Requests served per measurement window in delegate mode, at first;
    /// the window doubles (up to `delegate_window_max`) while delegation
    /// stays the faster mode.
    pub delegate_window_min: u32,
    /// The longest delegate window.
    pub delegate_window_max: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { contended_percent: 5, lock_window: 4096, delegate_window_min: 4096, delegate_window_max: 1 << 16 }
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
#[cfg(not(loom))]
const SPINS: u32 = 64;
/// Under the model checker every failed attempt yields, so that the model
/// lets the holder run.
#[cfg(loom)]
const SPINS: u32 = 0;

/// Delegation must beat the lock's rate by this many percent to win.
const DELEGATE_MARGIN: u64 = 110;
/// The lock wins back at this share (percent) of delegation's rate.
const LOCK_MARGIN: u64 = 95;
/// Delegate windows won by delegation before the lock is measured again,
/// at first; doubled each time the new measurement confirms delegation.
const STALE_WINDOWS: u32 = 4;
/// The most delegate windows between two measurements of the lock.
const MAX_STALE: u32 = 64;
/// The most contended lock windows between two trials of delegation.
const MAX_EXPLORE: u32 = 64;
/// A delegate window older than this (microseconds) is judged by callers
/// too: if its trustee has served fewer requests per second than the lock
/// ran, it is not keeping up (its thread is not running often enough).
const SLOW_WINDOW_US: u32 = 2000;

/// Microseconds since the first measurement of the process (wraps after
/// 71 minutes; only differences over one window are used).
#[cfg(not(loom))]
fn now_us() -> u32 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u32
}

/// The model checker needs every execution to be a function of the
/// interleaving alone: time stands still (rates then follow the counts).
#[cfg(loom)]
fn now_us() -> u32 {
    0
}

/// Calls per second over a window of `ops` calls that began at `start`.
fn rate(ops: u32, start: u32) -> u32 {
    let us = now_us().wrapping_sub(start).max(1) as u64;
    (ops as u64 * 1_000_000 / us).clamp(1, u32::MAX as u64) as u32
}

/// Lock, mode, policy and measurements of one adaptive property, in two
/// parts (`repr(C)`): first what callers read on every call and only the
/// lock holder writes, rarely (mode, policy, thresholds, the last rates),
/// then what changes on every call (the lock and the window's counts).
/// Inside a node (`slot::Node`) the first part shares a cache line with
/// the trust that callers read to delegate, and the second one with the
/// value, which follows the gate: while callers delegate, the trustee
/// writes only that second line and callers read only the first, so no
/// line moves between their cores on each request (measured: with both
/// parts in one line, a delegated request cost 2-3 times what one on a
/// `Trust<T>` does; `slot::tests` checks the layout).
#[repr(C)]
pub(crate) struct Gate {
    mode: AtomicU32,
    policy: AtomicU32,
    // Measurements and thresholds: written by the lock holder only
    // (`set_policy` and `set_thresholds` too take the lock).
    lock_window: AtomicU32,
    delegate_window: AtomicU32,
    /// When the current window began (`now_us`).
    window_start: AtomicU32,
    /// The last measured rates (calls per second; 0: never measured).
    lock_rate: AtomicU32,
    delegate_rate: AtomicU32,
    /// Contended lock windows since delegation last lost, and how many
    /// of them make the next trial.
    explore: AtomicU32,
    explore_every: AtomicU32,
    /// Delegate windows won by delegation since the lock was measured.
    stale: AtomicU32,
    /// How many of them make the next measurement of the lock.
    stale_every: AtomicU32,
    contended_percent: AtomicU32,
    delegate_window_min: AtomicU32,
    delegate_window_max: AtomicU32,
    // What every call writes: the lock, and the current window's counts.
    lock: AtomicU32,
    ops: AtomicU32,
    contended: AtomicU32,
    served: AtomicU32,
}

impl Gate {
    /// Where in a gate the fields callers read on every call lie, and
    /// where those every call writes: the offsets of `mode`, `policy`,
    /// `lock` and `served` (for the layout test of `slot`).
    #[cfg(all(test, not(loom)))]
    pub(crate) const OFFSETS: [usize; 4] = [
        std::mem::offset_of!(Gate, mode),
        std::mem::offset_of!(Gate, policy),
        std::mem::offset_of!(Gate, lock),
        std::mem::offset_of!(Gate, served),
    ];

    /// A free gate in lock mode under the adaptive policy: a new property
    /// is uncontended until measured otherwise.
    pub(crate) fn new() -> Gate {
        let t = Thresholds::default();
        Gate {
            lock: AtomicU32::new(FREE),
            mode: AtomicU32::new(MODE_LOCK),
            ops: AtomicU32::new(0),
            lock_window: AtomicU32::new(t.lock_window),
            contended: AtomicU32::new(0),
            policy: AtomicU32::new(POLICY_ADAPTIVE),
            served: AtomicU32::new(0),
            delegate_window: AtomicU32::new(t.delegate_window_min),
            window_start: AtomicU32::new(now_us()),
            lock_rate: AtomicU32::new(0),
            delegate_rate: AtomicU32::new(0),
            explore: AtomicU32::new(0),
            explore_every: AtomicU32::new(1),
            stale: AtomicU32::new(0),
            stale_every: AtomicU32::new(STALE_WINDOWS),
            contended_percent: AtomicU32::new(t.contended_percent),
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
    /// A switch starts a fresh window.
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
    /// one measures afresh from the current mode.
    pub(crate) fn set_policy(&self, p: Policy) {
        self.lock();
        self.set_policy_held(p);
        self.unlock();
    }

    /// [`set_policy`](Gate::set_policy) if the lock is free now; whether it
    /// was. For a caller that must not wait for the lock (it holds another).
    pub(crate) fn try_set_policy(&self, p: Policy) -> bool {
        if !self.try_lock() {
            return false;
        }
        self.set_policy_held(p);
        self.unlock();
        true
    }

    /// Sets the policy. Holder only.
    fn set_policy_held(&self, p: Policy) {
        let (code, mode) = match p {
            Policy::Delegate => (POLICY_DELEGATE, Some(Mode::Delegate)),
            Policy::Adaptive => (POLICY_ADAPTIVE, None),
            Policy::Lock => (POLICY_LOCK, Some(Mode::Lock)),
        };
        self.policy.store(code, Ordering::Relaxed);
        if let Some(m) = mode {
            self.set_mode(m);
        }
        self.forget();
    }

    /// Drops every measurement and starts a fresh window. Holder only.
    fn forget(&self) {
        for a in [&self.lock_rate, &self.delegate_rate, &self.explore, &self.stale] {
            a.store(0, Ordering::Relaxed);
        }
        self.explore_every.store(1, Ordering::Relaxed);
        self.stale_every.store(STALE_WINDOWS, Ordering::Relaxed);
        self.delegate_window.store(self.delegate_window_min.load(Ordering::Relaxed), Ordering::Relaxed);
        self.new_window();
    }

    fn new_window(&self) {
        self.ops.store(0, Ordering::Relaxed);
        self.contended.store(0, Ordering::Relaxed);
        self.served.store(0, Ordering::Relaxed);
        self.window_start.store(now_us(), Ordering::Relaxed);
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
        self.forget();
        self.unlock();
    }

    /// The gate's address, as the worker's kept locks name it.
    #[inline]
    pub(crate) fn addr(&self) -> *const () {
        self as *const Gate as *const ()
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        self.lock.load(Ordering::Relaxed) == FREE
            && self.lock.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Takes the lock, spinning, then yielding the OS thread while it is
    /// held (its holder may have been preempted). A lock this thread's
    /// trustee keeps for its batch is taken over at once.
    ///
    /// # Panics
    /// If this thread's trustee holds the lock for a closure running on the
    /// value now: the caller is inside that closure and would wait forever.
    #[cfg_attr(loom, allow(clippy::absurd_extreme_comparisons))] // no spins under loom
    pub(crate) fn lock(&self) {
        if self.try_lock() {
            return;
        }
        // This thread may keep the lock itself, for the batch it serves.
        if let Some(w) = context::current() {
            match w.batch.take_over(self.addr()) {
                TakeOver::NotKept => {}
                TakeOver::Taken => return,
                TakeOver::InUse => panic!(
                    "gossamer: a closure running on an adaptive property changed that same property's policy or \
                     thresholds (it would wait for the lock its own call holds); change it after the closure, e.g. \
                     in an apply_then callback"
                ),
            }
        }
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

    /// Counts one call run in place (`contended`: it found the lock held)
    /// and closes the window when it is full. Only while holding the lock.
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
        let r = rate(ops, self.window_start.load(Ordering::Relaxed));
        let c = self.contended.load(Ordering::Relaxed) as u64;
        self.new_window();
        if self.policy.load(Ordering::Relaxed) != POLICY_ADAPTIVE || self.mode() != Mode::Lock {
            return;
        }
        self.lock_rate.store(r, Ordering::Relaxed);
        let busy = c * 100 >= ops as u64 * self.contended_percent.load(Ordering::Relaxed) as u64;
        if !busy {
            self.explore.store(0, Ordering::Relaxed);
            return;
        }
        let d = self.delegate_rate.load(Ordering::Relaxed) as u64;
        let explore = self.explore.load(Ordering::Relaxed) + 1;
        let every = self.explore_every.load(Ordering::Relaxed);
        let min = self.delegate_window_min.load(Ordering::Relaxed);
        if d == 0 || d * 100 > r as u64 * DELEGATE_MARGIN {
            // Delegation is unknown, or was faster: switch. When this
            // measurement confirmed it, measure the lock less often and
            // go on with the delegate window where it was.
            self.explore.store(0, Ordering::Relaxed);
            self.explore_every.store(1, Ordering::Relaxed);
            if d == 0 {
                self.stale_every.store(STALE_WINDOWS, Ordering::Relaxed);
                self.delegate_window.store(min, Ordering::Relaxed);
            } else {
                let se = self.stale_every.load(Ordering::Relaxed);
                self.stale_every.store((se * 2).min(MAX_STALE), Ordering::Relaxed);
            }
        } else if explore >= every {
            // The lock was faster; try delegation again now and then,
            // less often each time it loses.
            self.explore.store(0, Ordering::Relaxed);
            self.explore_every.store((every * 2).min(MAX_EXPLORE), Ordering::Relaxed);
            self.stale_every.store(STALE_WINDOWS, Ordering::Relaxed);
            self.delegate_window.store(min, Ordering::Relaxed);
        } else {
            self.explore.store(explore, Ordering::Relaxed);
            return;
        }
        self.stale.store(0, Ordering::Relaxed);
        self.set_mode(Mode::Delegate);
    }

    /// Counts one request served by the trustee and closes the delegate
    /// window when it is full. Only while holding the lock.
    #[inline]
    pub(crate) fn note_served(&self) {
        if self.mode.load(Ordering::Relaxed) != MODE_DELEGATE {
            return;
        }
        let n = self.served.load(Ordering::Relaxed) + 1;
        self.served.store(n, Ordering::Relaxed);
        if n >= self.delegate_window.load(Ordering::Relaxed) {
            self.close_delegate_window(n);
        }
    }

    #[cold]
    fn close_delegate_window(&self, served: u32) {
        let r = rate(served, self.window_start.load(Ordering::Relaxed));
        self.new_window();
        if self.policy.load(Ordering::Relaxed) != POLICY_ADAPTIVE {
            return;
        }
        self.delegate_rate.store(r, Ordering::Relaxed);
        let l = self.lock_rate.load(Ordering::Relaxed) as u64;
        let stale = self.stale.load(Ordering::Relaxed) + 1;
        let lock_wins = l * 100 >= r as u64 * LOCK_MARGIN;
        if lock_wins || stale >= self.stale_every.load(Ordering::Relaxed) {
            // The lock was about as fast, or is to be measured again.
            self.stale.store(0, Ordering::Relaxed);
            if lock_wins {
                self.stale_every.store(STALE_WINDOWS, Ordering::Relaxed);
                self.delegate_window.store(self.delegate_window_min.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            self.set_mode(Mode::Lock);
        } else {
            self.stale.store(stale, Ordering::Relaxed);
            let w = self.delegate_window.load(Ordering::Relaxed);
            let max = self.delegate_window_max.load(Ordering::Relaxed);
            self.delegate_window.store(w.saturating_mul(2).min(max), Ordering::Relaxed);
        }
    }

    /// Called now and then by callers that delegate: a delegate window
    /// that has lasted long while the trustee served fewer requests per
    /// second than the lock ran means the trustee's thread is not running
    /// often enough (a busy or oversubscribed machine): back to the lock,
    /// and the trial counts as lost (its rate is recorded, so the next one
    /// waits its turn). The reads are of words the holder writes; a stale
    /// one only delays or hastens this hint.
    pub(crate) fn check_progress(&self) -> Progress {
        if self.policy.load(Ordering::Relaxed) != POLICY_ADAPTIVE || self.mode() != Mode::Delegate {
            return Progress::Unjudged;
        }
        let start = self.window_start.load(Ordering::Relaxed);
        if now_us().wrapping_sub(start) < SLOW_WINDOW_US {
            return Progress::Unjudged;
        }
        let served = rate(self.served.load(Ordering::Relaxed), start);
        if (served as u64) < self.lock_rate.load(Ordering::Relaxed) as u64 {
            self.lose_trial(served);
            Progress::Slow
        } else {
            Progress::KeepsUp
        }
    }

    /// A delegated call waited far longer than a served request takes: the
    /// trustee's thread is not running (preempted, parked or busy
    /// elsewhere). Under the adaptive policy, callers go in place.
    pub(crate) fn note_slow_trustee(&self) {
        if self.policy.load(Ordering::Relaxed) == POLICY_ADAPTIVE && self.mode() == Mode::Delegate {
            self.lose_trial(1);
        }
    }

    /// Ends delegation from outside the lock holder's measurement: back to
    /// lock mode, with `rate` recorded as delegation's if the lock is free
    /// to take now (else the holder's next window decides).
    fn lose_trial(&self, rate: u32) {
        if self.try_lock() {
            if self.mode() == Mode::Delegate {
                self.delegate_rate.store(rate.max(1), Ordering::Relaxed);
                self.stale.store(0, Ordering::Relaxed);
                self.stale_every.store(STALE_WINDOWS, Ordering::Relaxed);
                self.delegate_window.store(self.delegate_window_min.load(Ordering::Relaxed), Ordering::Relaxed);
                self.set_mode(Mode::Lock);
                self.new_window();
            }
            self.unlock();
        } else {
            self.set_mode(Mode::Lock);
        }
    }

    /// Whether a caller may run in place although the mode says delegate:
    /// only under the adaptive policy, and never once the value is gone.
    #[inline]
    pub(crate) fn may_override(&self) -> bool {
        self.mode.load(Ordering::Relaxed) == MODE_DELEGATE && self.policy.load(Ordering::Relaxed) == POLICY_ADAPTIVE
    }
}

/// What a caller that delegates found about the trustee's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Not judged (not delegating, or the window is young).
    Unjudged,
    /// The trustee served slower than the lock ran: back to the lock.
    Slow,
    /// The trustee kept up.
    KeepsUp,
}

#[cfg(not(loom))]
fn yield_thread() {
    std::thread::yield_now();
}

#[cfg(loom)]
fn yield_thread() {
    loom::thread::yield_now();
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// One call in place that found the lock held, after `pause`.
    fn contended_call(g: &Gate, pause_ms: u64) {
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
        g.lock();
        g.note_in_place(true);
        g.unlock();
    }

    fn served(g: &Gate) {
        g.lock();
        g.note_served();
        g.unlock();
    }

    /// Delegate windows served until the gate goes back to lock mode.
    fn windows_until_lock(g: &Gate) -> u32 {
        let mut n = 0;
        while g.mode() == Mode::Delegate {
            served(g);
            n += 1;
            assert!(n < 1000, "never measured the lock again");
        }
        n
    }

    /// While delegation keeps winning, the lock is measured again after
    /// 4 delegate windows, then 8, then 16: each measurement that confirms
    /// delegation halves how often the next one comes.
    #[test]
    fn a_confirmed_delegation_measures_the_lock_less_often() {
        let g = Gate::new();
        // Every window one call; a slow lock (one call in 20 ms) against
        // delegate windows of one request at once.
        g.set_thresholds(Thresholds {
            contended_percent: 0,
            lock_window: 1,
            delegate_window_min: 1,
            delegate_window_max: 1,
        });
        contended_call(&g, 20);
        assert_eq!(g.mode(), Mode::Delegate, "unknown delegation is tried");
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(windows_until_lock(&g));
            contended_call(&g, 20);
            assert_eq!(g.mode(), Mode::Delegate, "the slow lock loses again");
        }
        assert_eq!(seen, [4, 8, 16]);
    }
}
