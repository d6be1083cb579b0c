//! The gate of an adaptive property: the per-property lock, the mode word
//! that routes callers (in place or delegated), the policy, and the
//! measurements from which an adaptive gate picks its mode.
//!
//! Every access to the value holds the lock, whoever makes it: a caller in
//! place or the trustee serving a delegated request (which may keep it for
//! the rest of the batch it serves, see `runtime::worker::batch_hold`;
//! [`Gate::lock`] takes such a lock over on the thread that keeps it), or
//! else, for the trustee alone, the *bias*: while the property delegates,
//! the trustee serves without the lock, under a handshake with asymmetric
//! fences that anyone taking the lock performs to revoke the bias first
//! ([`Gate::enter_biased`], [`Gate::revoke`]). The mode word only decides
//! who takes the lock; it is a hint that may be stale, never what makes
//! access exclusive. The measurements are written only by the lock holder
//! (or the trustee under the bias), with plain loads and stores.
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
//! depend on the trustee's thread being scheduled. A property whose
//! trustee's thread waits for a CPU much of the time ([`starved`]: other
//! processes share its core) does not try delegation, and one that
//! delegates goes back to the lock at a caller's next check: callers
//! would wait a scheduler's time slice whenever that thread is
//! descheduled.

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
/// The mode proper, below the bias bit.
const MODE_MASK: u32 = 3;
/// The lock is biased towards the trustee (see [`Gate::enter_biased`]): a
/// bit beside the mode, set and cleared only by a holder of the lock.
const BIAS: u32 = 4;

const POLICY_DELEGATE: u32 = 0;
const POLICY_ADAPTIVE: u32 = 1;
const POLICY_LOCK: u32 = 2;

/// Spins before a waiter gives up its time slice: the holder runs a
/// closure that never blocks, usually for well under a microsecond. Few,
/// because a waiter that yields early also keeps two threads from taking
/// turns at the lock's cache line, and beside busy processes lets the
/// holder run alone: on 2 cores with the policy forced to lock, 4 spins
/// instead of 64 ran 4 contended objects at 0.90–1.01× `parking-lot`
/// instead of 0.77–0.96, and beside 2 busy processes at 23.5 Mops/s
/// instead of 12–18 (`benchmarks/adaptive.md`, "Yielding early, and
/// trustees that wait for a CPU").
#[cfg(not(loom))]
const SPINS: u32 = 4;
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

/// A trustee whose thread waited for a CPU this share (percent) of its
/// last measured interval or more is *starved* (see
/// `runtime::worker::cpu_wait`): its properties do not try delegation, and
/// one that delegates goes back to the lock. Callers delegating to it would
/// wait a scheduler's time slice whenever its thread is descheduled (faa on
/// 2 cores beside 2 busy processes: 64% waiting, against 1% quiet).
const STARVED_PERCENT: u32 = 20;

/// Whether local worker `t`'s thread waits for a CPU too much of the time
/// to serve delegated requests (see [`STARVED_PERCENT`]); false off the
/// runtime's workers.
#[cfg(not(loom))]
pub(crate) fn starved(t: usize) -> bool {
    context::current().is_some_and(|w| w.shared.is_local(t) && w.shared.tune(t).cpu_wait_percent() >= STARVED_PERCENT)
}

/// Under the model checker no thread waits for a CPU.
#[cfg(loom)]
pub(crate) fn starved(_t: usize) -> bool {
    false
}

/// The small counts of the trials, one byte each of `Gate::tries` (each
/// stays at or below 64).
#[derive(Clone, Copy)]
enum Try {
    /// Contended lock windows since delegation last lost.
    Explore = 0,
    /// How many of them make the next trial of delegation.
    ExploreEvery = 1,
    /// Delegate windows won by delegation since the lock was measured.
    Stale = 2,
    /// How many of them make the next measurement of the lock.
    StaleEvery = 3,
}

impl Try {
    /// Nothing counted; the next trial after one contended window, the
    /// next measurement of the lock after [`STALE_WINDOWS`].
    const fn initial() -> u32 {
        (1 << (8 * Try::ExploreEvery as u32)) | (STALE_WINDOWS << (8 * Try::StaleEvery as u32))
    }
}

const _: () = assert!(MAX_EXPLORE < 256 && MAX_STALE < 256);

/// The fences of the biased lock: the trustee's side costs a compiler
/// fence, the rare revoker's side forces a full barrier on every running
/// thread of the process (`membarrier`, see `runtime::fence`). The lock is
/// biased only where that works.
#[cfg(not(loom))]
mod bias_fence {
    pub(super) fn available() -> bool {
        crate::runtime::fence::asymmetric()
    }
    #[inline(always)]
    pub(super) fn light() {
        crate::runtime::fence::light();
    }
    pub(super) fn heavy() {
        crate::runtime::fence::heavy();
    }
}

/// Under the model checker both sides are full fences, which is what the
/// pair of asymmetric ones amounts to.
#[cfg(loom)]
mod bias_fence {
    use loom::sync::atomic::{fence, Ordering};
    pub(super) fn available() -> bool {
        true
    }
    pub(super) fn light() {
        fence(Ordering::SeqCst);
    }
    pub(super) fn heavy() {
        fence(Ordering::SeqCst);
    }
}

/// A number per thread, never 0, never given to two threads of the
/// process: what a thread serving under the bias marks the gate with.
#[inline]
fn token() -> u32 {
    use std::cell::Cell;
    #[cfg(not(loom))]
    thread_local! {
        static TOKEN: Cell<u32> = const { Cell::new(0) };
    }
    #[cfg(loom)]
    loom::thread_local! {
        static TOKEN: Cell<u32> = Cell::new(0);
    }
    TOKEN.with(|t| match t.get() {
        0 => {
            let v = next_token();
            t.set(v);
            v
        }
        v => v,
    })
}

#[cold]
fn next_token() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    let v = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    assert!(v != 0, "gossamer: this process has started more than 2^32 - 1 threads that use adaptive properties");
    v
}

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
    /// The small counts of the trials, a byte each (see [`Try`]).
    tries: AtomicU32,
    contended_percent: AtomicU32,
    delegate_window_min: AtomicU32,
    delegate_window_max: AtomicU32,
    // What every call writes: the lock, the biased trustee's mark, and the
    // current window's counts.
    lock: AtomicU32,
    /// The token of the thread serving a request under the bias now (see
    /// [`enter_biased`](Gate::enter_biased)); 0: none.
    serving: AtomicU32,
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
            tries: AtomicU32::new(Try::initial()),
            serving: AtomicU32::new(0),
            contended_percent: AtomicU32::new(t.contended_percent),
            delegate_window_min: AtomicU32::new(t.delegate_window_min),
            delegate_window_max: AtomicU32::new(t.delegate_window_max),
        }
    }

    /// The current mode (a routing hint: see the module doc).
    #[inline]
    pub(crate) fn mode(&self) -> Mode {
        if self.mode.load(Ordering::Relaxed) & MODE_MASK == MODE_LOCK {
            Mode::Lock
        } else {
            Mode::Delegate
        }
    }

    /// Switches the mode, unless the value is gone (a switch without the
    /// lock, by `note_slow_trustee`, may race with `retire`: it loses).
    /// The bias stays as it was: only [`revoke`](Gate::revoke) clears it.
    fn set_mode(&self, m: Mode) {
        let new = if m == Mode::Lock { MODE_LOCK } else { MODE_DELEGATE };
        let _ = self.mode.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            (old & MODE_MASK != MODE_RETIRED).then_some(new | (old & BIAS))
        });
    }

    /// Marks the value as gone, for good, clearing the bias. Only while
    /// holding the lock with the bias revoked, or on the only thread that
    /// serves under the bias (see [`lock_to_drop`](Gate::lock_to_drop)).
    pub(crate) fn retire(&self) {
        self.mode.store(MODE_RETIRED, Ordering::Relaxed);
    }

    /// Whether the value is gone. Exact while holding the lock.
    #[inline]
    pub(crate) fn retired(&self) -> bool {
        self.mode.load(Ordering::Relaxed) & MODE_MASK == MODE_RETIRED
    }

    /// Whether the lock is biased towards the trustee now.
    #[inline]
    fn biased(&self) -> bool {
        self.mode.load(Ordering::Relaxed) & BIAS != 0
    }

    fn get(&self, t: Try) -> u32 {
        (self.tries.load(Ordering::Relaxed) >> (8 * t as u32)) & 0xff
    }

    fn put(&self, t: Try, v: u32) {
        let shift = 8 * t as u32;
        let w = self.tries.load(Ordering::Relaxed) & !(0xff << shift);
        self.tries.store(w | (v.min(0xff) << shift), Ordering::Relaxed);
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

    /// [`set_policy`](Gate::set_policy) if the lock is free now and no
    /// request is being served under the bias; whether it was. For a
    /// caller that must not wait for the lock (it holds another).
    pub(crate) fn try_set_policy(&self, p: Policy) -> bool {
        if !self.try_lock() {
            return false;
        }
        if !self.try_revoke() {
            self.unlock();
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
        if self.mode() == Mode::Delegate {
            self.set_bias();
        }
        self.forget();
    }

    /// Drops every measurement and starts a fresh window. Holder only.
    fn forget(&self) {
        for a in [&self.lock_rate, &self.delegate_rate] {
            a.store(0, Ordering::Relaxed);
        }
        self.tries.store(Try::initial(), Ordering::Relaxed);
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
        if self.mode() == Mode::Delegate {
            self.set_bias();
        }
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

    /// Takes the lock for a caller other than the serving trustee: waits
    /// for it as [`lock_plain`](Gate::lock_plain) does, then revokes the
    /// trustee's bias if it has one (see [`revoke`](Gate::revoke)).
    ///
    /// # Panics
    /// If this thread's trustee is running a closure on the value now (it
    /// holds the lock or serves under the bias): the caller is inside that
    /// closure and would wait forever.
    pub(crate) fn lock(&self) {
        self.lock_plain();
        self.revoke();
    }

    /// Takes the lock, spinning, then yielding the OS thread while it is
    /// held (its holder may have been preempted). A lock this thread's
    /// trustee keeps for its batch is taken over at once. The bias is left
    /// alone: this is how the trustee takes the lock when it cannot serve
    /// under the bias, and what [`lock`](Gate::lock) starts with.
    ///
    /// # Panics
    /// If this thread's trustee holds the lock for a closure running on the
    /// value now: the caller is inside that closure and would wait forever.
    #[cfg_attr(loom, allow(clippy::absurd_extreme_comparisons))] // no spins under loom
    pub(crate) fn lock_plain(&self) {
        if self.try_lock() {
            return;
        }
        // This thread may keep the lock itself, for the batch it serves.
        if let Some(w) = context::current() {
            match w.batch.take_over(self.addr()) {
                TakeOver::NotKept => {}
                TakeOver::Taken => return,
                TakeOver::InUse => in_use(),
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

    /// The trustee's way in while the lock is biased towards it: marks the
    /// gate with this thread's token, and proceeds, without taking the
    /// lock, if the bias still holds and the lock is free; else it unmarks
    /// the gate and returns false (the caller takes the lock instead).
    ///
    /// This is the trustee's half of a Dekker handshake with
    /// [`revoke`](Gate::revoke): the trustee stores its mark, then loads
    /// the lock and the bias; a revoker takes the lock and clears the bias,
    /// then loads the mark. One of them sees the other's store, because
    /// the revoker's heavy fence forces a full barrier on the trustee's
    /// thread wherever it is, so the trustee's side needs only a compiler
    /// fence: no atomic read-modify-write, no fence instruction. Only the
    /// thread that serves the property's requests comes here, one at a
    /// time (the trustee; after a move, the next one).
    ///
    /// Once it returns true, the caller has the value to itself until
    /// [`exit_biased`](Gate::exit_biased).
    #[inline]
    pub(crate) fn enter_biased(&self) -> bool {
        if !self.biased() {
            return false;
        }
        let me = token();
        // A closure that runs on the value under the bias and reaches it
        // again (which the runtime does not do) takes the slow way, which
        // refuses it.
        if self.serving.load(Ordering::Relaxed) == me {
            return false;
        }
        self.serving.store(me, Ordering::Relaxed);
        bias_fence::light();
        // Acquire on the mode: the holder that set the bias took the lock
        // before, so a bias just set is never seen beside a stale "free".
        // Acquire on the lock: what its last holder did happens before.
        if self.mode.load(Ordering::Acquire) & BIAS != 0 && self.lock.load(Ordering::Acquire) == FREE {
            return true;
        }
        self.serving.store(0, Ordering::Release);
        false
    }

    /// Leaves what [`enter_biased`](Gate::enter_biased) entered; what the
    /// trustee did happens before what a revoker that waited for it does.
    #[inline]
    pub(crate) fn exit_biased(&self) {
        self.serving.store(0, Ordering::Release);
    }

    /// Whether this thread serves the property under the bias now (then it
    /// may not take the lock: it would reach the value twice).
    pub(crate) fn serving_here(&self) -> bool {
        let s = self.serving.load(Ordering::Relaxed);
        s != 0 && s == token()
    }

    /// Biases the lock towards the trustee while the property delegates
    /// (where asymmetric fences work). Only while holding the lock; with
    /// release ordering, so that a trustee that sees the bias also sees the
    /// lock taken (see [`enter_biased`](Gate::enter_biased)).
    fn set_bias(&self) {
        if bias_fence::available() {
            let _ = self.mode.fetch_update(Ordering::Release, Ordering::Relaxed, |old| {
                (old & MODE_MASK == MODE_DELEGATE).then_some(old | BIAS)
            });
        }
    }

    /// Clears the bias, if any, and waits until no request is served under
    /// it (the revoker's half of the handshake of
    /// [`enter_biased`](Gate::enter_biased)). Only while holding the lock;
    /// afterwards the value is the holder's alone. Returns whether the
    /// lock was biased (a caller in place counts that as contention).
    ///
    /// # Panics
    /// If this thread serves the property under the bias now (a closure
    /// running on the value reached it again): it would wait for itself.
    /// The lock is released first.
    pub(crate) fn revoke(&self) -> bool {
        if !self.clear_bias() {
            return false;
        }
        let me = token();
        let mut spins = 0u32;
        loop {
            // Acquire: the trustee's accesses happen before ours.
            let mark = self.serving.load(Ordering::Acquire);
            if mark == 0 {
                return true;
            }
            self.refuse_own_mark(mark, me);
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                yield_thread();
            }
        }
    }

    /// Releases the lock and panics if `mark`, read from the gate, is `me`,
    /// this thread's [`token`]: it serves the property under the bias now
    /// (a closure running on the value reached the lock) and would wait for
    /// itself.
    fn refuse_own_mark(&self, mark: u32, me: u32) {
        if mark != 0 && mark == me {
            self.unlock();
            in_use();
        }
    }

    /// [`revoke`](Gate::revoke) without waiting: if a request is being
    /// served under the bias, the bias is restored and this returns false.
    /// Only while holding the lock.
    fn try_revoke(&self) -> bool {
        if !self.clear_bias() {
            return true;
        }
        if self.serving.load(Ordering::Acquire) == 0 {
            return true;
        }
        // Still holding the lock: the bias may be set again.
        self.mode.fetch_or(BIAS, Ordering::Release);
        false
    }

    /// Clears the bias and fences heavily, if it was set. Only while
    /// holding the lock (which it cannot be while a trustee enters under
    /// the bias: both load each other's words after the fence pair).
    fn clear_bias(&self) -> bool {
        if !self.biased() {
            return false;
        }
        self.mode.fetch_and(!BIAS, Ordering::Relaxed);
        bias_fence::heavy();
        true
    }

    /// Takes the lock to drop the value, on the thread that serves the
    /// property's requests (the owner is dropped where it lives, after its
    /// last request): as no request can be served under the bias any more
    /// and only this thread ever serves under it, the bias needs no
    /// handshake, and dropping many biased properties costs no barriers.
    ///
    /// # Panics
    /// As [`lock`](Gate::lock), if this thread serves the property under
    /// the bias now.
    pub(crate) fn lock_to_drop(&self) {
        self.lock_plain();
        let mark = self.serving.load(Ordering::Acquire);
        if mark != 0 {
            self.refuse_own_mark(mark, token());
            // Not expected (only this thread serves): wait as any caller.
            self.revoke();
        }
    }

    /// Counts one call run in place (`contended`: it found the lock held)
    /// on a property of trustee `trustee`, and closes the window when it is
    /// full. Only while holding the lock.
    #[inline]
    pub(crate) fn note_in_place(&self, contended: bool, trustee: usize) {
        let ops = self.ops.load(Ordering::Relaxed) + 1;
        self.ops.store(ops, Ordering::Relaxed);
        if contended {
            let c = self.contended.load(Ordering::Relaxed) + 1;
            self.contended.store(c, Ordering::Relaxed);
        }
        if ops >= self.lock_window.load(Ordering::Relaxed) {
            self.close_lock_window(ops, trustee);
        }
    }

    #[cold]
    fn close_lock_window(&self, ops: u32, trustee: usize) {
        let r = rate(ops, self.window_start.load(Ordering::Relaxed));
        let c = self.contended.load(Ordering::Relaxed) as u64;
        self.new_window();
        if self.policy.load(Ordering::Relaxed) != POLICY_ADAPTIVE || self.mode() != Mode::Lock {
            return;
        }
        self.lock_rate.store(r, Ordering::Relaxed);
        let busy = c * 100 >= ops as u64 * self.contended_percent.load(Ordering::Relaxed) as u64;
        // Contention that delegation cannot relieve: the trustee's thread
        // is not running much of the time.
        if !busy || starved(trustee) {
            self.put(Try::Explore, 0);
            return;
        }
        let d = self.delegate_rate.load(Ordering::Relaxed) as u64;
        let explore = self.get(Try::Explore) + 1;
        let every = self.get(Try::ExploreEvery);
        let min = self.delegate_window_min.load(Ordering::Relaxed);
        if d == 0 || d * 100 > r as u64 * DELEGATE_MARGIN {
            // Delegation is unknown, or was faster: switch. When this
            // measurement confirmed it, measure the lock less often and
            // go on with the delegate window where it was.
            self.put(Try::Explore, 0);
            self.put(Try::ExploreEvery, 1);
            if d == 0 {
                self.put(Try::StaleEvery, STALE_WINDOWS);
                self.delegate_window.store(min, Ordering::Relaxed);
            } else {
                let se = self.get(Try::StaleEvery);
                self.put(Try::StaleEvery, (se * 2).min(MAX_STALE));
            }
        } else if explore >= every {
            // The lock was faster; try delegation again now and then,
            // less often each time it loses.
            self.put(Try::Explore, 0);
            self.put(Try::ExploreEvery, (every * 2).min(MAX_EXPLORE));
            self.put(Try::StaleEvery, STALE_WINDOWS);
            self.delegate_window.store(min, Ordering::Relaxed);
        } else {
            self.put(Try::Explore, explore);
            return;
        }
        self.put(Try::Stale, 0);
        self.set_mode(Mode::Delegate);
        self.set_bias();
    }

    /// Counts one request served by the trustee and closes the delegate
    /// window when it is full. Only while holding the lock (`locked`), or
    /// serving under the bias.
    #[inline]
    pub(crate) fn note_served(&self, locked: bool) {
        if self.mode.load(Ordering::Relaxed) & MODE_MASK != MODE_DELEGATE {
            return;
        }
        let n = self.served.load(Ordering::Relaxed) + 1;
        self.served.store(n, Ordering::Relaxed);
        if n >= self.delegate_window.load(Ordering::Relaxed) {
            self.close_delegate_window(n, locked);
        }
    }

    /// Judges a full delegate window. A trustee that keeps delegation and
    /// holds the lock biases it (again) towards itself: a caller in place
    /// revokes the bias, and it comes back at most once per window.
    #[cold]
    fn close_delegate_window(&self, served: u32, locked: bool) {
        let r = rate(served, self.window_start.load(Ordering::Relaxed));
        self.new_window();
        if self.policy.load(Ordering::Relaxed) != POLICY_ADAPTIVE {
            if locked && self.mode() == Mode::Delegate {
                self.set_bias();
            }
            return;
        }
        self.delegate_rate.store(r, Ordering::Relaxed);
        let l = self.lock_rate.load(Ordering::Relaxed) as u64;
        let stale = self.get(Try::Stale) + 1;
        let lock_wins = l * 100 >= r as u64 * LOCK_MARGIN || context::current().is_some_and(|w| starved(w.index));
        if lock_wins || stale >= self.get(Try::StaleEvery) {
            // The lock was about as fast, or is to be measured again.
            self.put(Try::Stale, 0);
            if lock_wins {
                self.put(Try::StaleEvery, STALE_WINDOWS);
                self.delegate_window.store(self.delegate_window_min.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            self.set_mode(Mode::Lock);
        } else {
            self.put(Try::Stale, stale);
            let w = self.delegate_window.load(Ordering::Relaxed);
            let max = self.delegate_window_max.load(Ordering::Relaxed);
            self.delegate_window.store(w.saturating_mul(2).min(max), Ordering::Relaxed);
        }
        if locked && self.mode() == Mode::Delegate {
            self.set_bias();
        }
    }

    /// Called now and then by callers that delegate to trustee `trustee`:
    /// a trustee whose thread waits for a CPU much of the time
    /// ([`starved`]), or a delegate window that has lasted long while the
    /// trustee served fewer requests per second than the lock ran, means
    /// the trustee's thread is not running often enough (a busy or
    /// oversubscribed machine): back to the lock. The trial counts as lost
    /// when the lock is free to take (its rate is
    /// recorded, so the next one waits its turn); while the lock is biased
    /// towards the trustee only the mode switches, and the next contended
    /// lock window judges against the last delegate window that closed
    /// (recording the loss there too made no clear difference beside busy
    /// processes: `benchmarks/adaptive.md`). The reads are of words the
    /// holder writes; a stale one only delays or hastens this hint.
    pub(crate) fn check_progress(&self, trustee: usize) -> Progress {
        if self.policy.load(Ordering::Relaxed) != POLICY_ADAPTIVE || self.mode() != Mode::Delegate {
            return Progress::Unjudged;
        }
        if starved(trustee) {
            self.lose_trial(1);
            return Progress::Slow;
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
        // Under the bias the trustee may be writing the measurements now:
        // only the mode is switched (callers in place revoke the bias).
        if !self.biased() && self.try_lock() {
            if self.mode() == Mode::Delegate && !self.biased() {
                self.delegate_rate.store(rate.max(1), Ordering::Relaxed);
                self.put(Try::Stale, 0);
                self.put(Try::StaleEvery, STALE_WINDOWS);
                self.delegate_window.store(self.delegate_window_min.load(Ordering::Relaxed), Ordering::Relaxed);
                self.set_mode(Mode::Lock);
                self.new_window();
            } else {
                self.set_mode(Mode::Lock);
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
        self.mode.load(Ordering::Relaxed) & MODE_MASK == MODE_DELEGATE
            && self.policy.load(Ordering::Relaxed) == POLICY_ADAPTIVE
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

/// A closure running on an adaptive property reached that same property's
/// lock: it would wait for its own call.
#[cold]
fn in_use() -> ! {
    panic!(
        "gossamer: a closure running on an adaptive property changed that same property's policy or thresholds (it \
         would wait for the lock its own call holds); change it after the closure, e.g. in an apply_then callback"
    )
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
        g.note_in_place(true, 0);
        g.unlock();
    }

    fn served(g: &Gate) {
        g.lock();
        g.note_served(true);
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

    /// A gate biased towards a trustee, where asymmetric fences work (they
    /// do on the Linux machines the tests run on; elsewhere the lock is
    /// never biased and there is nothing to check).
    fn biased_gate() -> Option<Gate> {
        crate::runtime::fence::init(false);
        if !bias_fence::available() {
            eprintln!("membarrier unavailable: the lock is never biased here");
            return None;
        }
        let g = Gate::new();
        g.set_policy(Policy::Delegate);
        assert!(g.biased(), "delegation biases the lock towards the trustee");
        Some(g)
    }

    /// The trustee serving under the bias and callers taking the lock (each
    /// revoking the bias, which the trustee's window end sets again) are
    /// never inside at once, and each side gets in.
    #[test]
    fn the_bias_and_the_lock_exclude_each_other() {
        let Some(g) = biased_gate() else { return };
        // Every request served under the lock ends a window, which biases
        // the lock again.
        g.set_thresholds(Thresholds { delegate_window_min: 1, delegate_window_max: 1, ..Thresholds::default() });
        use std::sync::atomic::{AtomicBool, AtomicU32 as Count, Ordering::Relaxed};
        let (inside, overlaps) = (AtomicBool::new(false), Count::new(0));
        let enter = |spins: u32| {
            if inside.swap(true, Relaxed) {
                overlaps.fetch_add(1, Relaxed);
            }
            for _ in 0..spins {
                std::hint::spin_loop();
            }
            inside.store(false, Relaxed);
        };
        let (mut biased, mut locked) = (0u32, 0u32);
        std::thread::scope(|s| {
            let callers = s.spawn(|| {
                for _ in 0..500 {
                    g.lock();
                    enter(20);
                    g.unlock();
                }
            });
            // Long stays under the bias (tens of microseconds), so that a
            // revoker that did not wait would overlap one.
            let mut rounds = 0u32;
            while rounds < 1000 || !callers.is_finished() {
                rounds += 1;
                if g.enter_biased() {
                    enter(2000);
                    g.note_served(false);
                    g.exit_biased();
                    biased += 1;
                } else {
                    g.lock_plain();
                    enter(20);
                    g.note_served(true);
                    g.unlock();
                    locked += 1;
                }
            }
            callers.join().unwrap();
        });
        assert_eq!(overlaps.load(Relaxed), 0, "two holders at once");
        assert!(biased > 0 && locked > 0, "served under the bias {biased} times, under the lock {locked}");
    }

    /// A closure that runs under the bias and reaches its own property's
    /// lock is refused with a panic, which leaves the lock free.
    #[test]
    fn reaching_the_lock_from_under_the_bias_panics_instead_of_hanging() {
        let Some(g) = biased_gate() else { return };
        assert!(g.enter_biased());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.set_policy(Policy::Lock)));
        assert!(r.is_err());
        assert!(g.serving_here());
        g.exit_biased();
        assert!(g.try_lock(), "the lock was released");
        g.unlock();
    }
}
