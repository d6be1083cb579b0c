//! `Adaptive<T>`: a trust that runs closures in place under a per-property
//! lock while the property is uncontended, and delegates them to its
//! trustee, as a [`Trust<T>`](crate::Trust) does, while it is contended.
//!
//! # The switch protocol
//!
//! An adaptive property is a [`Node`] shared by every handle (a handle is
//! one pointer to it) and by the trustee: the value, a lock, a *mode word*
//! (delegate or lock), a *policy* (delegate, adaptive, lock) and the one
//! `Trust` to the trustee's [`Owner`], an ordinary property that points
//! back at the node. The node counts its handles; the last one to go drops
//! the trust, and the owner, dropped on the trustee like any property
//! after its last trust, drops the value.
//!
//! 1. **Every access holds the lock.** A caller in place takes it around
//!    its closure; the trustee holds it around every delegated closure it
//!    serves. Exclusive access therefore never depends on the mode: the
//!    mode word only says who should take the lock, and may be stale. A
//!    caller that read "lock" just before the switch to delegation (a
//!    *straggler*) still runs in place; the trustee then waits for the lock
//!    (it spins, then yields its thread, as the holder runs a closure that
//!    cannot block). While all callers delegate, only the trustee takes
//!    the lock: it is never contended and stays in the trustee's cache.
//!    Within the batch of one client it serves, the trustee keeps the locks
//!    it took (up to 8) until the batch ends, so that a run of requests to
//!    one property takes its lock once (`runtime::worker::batch_hold`); a
//!    straggler waits at most for the rest of that batch. Should the
//!    trustee itself need a lock it keeps (a closure of the batch changes
//!    another of its properties' policy, or the value is dropped), it takes
//!    it over instead of waiting for itself; a closure that changes the
//!    policy of the very property it runs on panics instead of hanging.
//!
//!    **The bias.** While the property delegates, the lock is *biased*
//!    towards the trustee (a bit beside the mode, set by a holder of the
//!    lock when delegation starts or is confirmed at a window's end): the
//!    trustee then serves without taking it, marking the gate with its
//!    thread's token and checking, after a compiler fence, that the bias
//!    holds and the lock is free. Anyone else who takes the lock while the
//!    bias is set (a straggler, a thread avoiding the trustee, a change of
//!    policy) clears the bias and, after a heavy fence (`membarrier`, which
//!    forces a full barrier on every running thread of the process), waits
//!    for the trustee's mark to go. The two fences make a Dekker handshake:
//!    either the trustee sees the lock taken (and takes the lock itself,
//!    after the holder) or the revoker sees the mark (and waits). So the
//!    rule "every access holds the lock" becomes "every access holds the
//!    lock, or the bias, and never both at once". A revocation costs one
//!    barrier and is paid at most once per delegate window; where
//!    `membarrier` is missing the lock is never biased.
//! 2. **Per-client order.** A thread counts its delegated requests to each
//!    adaptive property until their answers are in (`pending`). It runs a
//!    closure in place only when none is outstanding: a fiber that may
//!    block first yields (a bounded number of times) until they are
//!    answered; otherwise the call is *held* on the thread, behind them,
//!    and runs in place once they are answered (a fiber of the thread
//!    issues held calls in order, delegating those the mode no longer
//!    sends in place). A call to a property with held calls is held
//!    behind them, whatever its form; in delegated context, where nothing
//!    runs in place, a call with none held is delegated behind the
//!    outstanding ones. Delegated requests from one thread to one trustee
//!    run in issue order, and a closure run in place finishes before the
//!    caller issues its next request, so a fiber's requests take effect in
//!    the order it issued them, whichever path each took and whenever the
//!    mode switched. Holding instead of delegating is what lets a client
//!    that keeps requests in flight (a window of `apply_then` calls) get
//!    back in place after a spell of delegation: delegated behind its own
//!    requests, its calls would keep one outstanding for good.
//! 3. **Measuring** (see `gate` for the rule). Each mode measures the
//!    property's throughput over its windows: callers in place (who also
//!    record whether they found the lock held), or the trustee over the
//!    requests it serves. Contention in lock mode makes the property try
//!    delegation, which it keeps only while it measures faster than the
//!    lock did; in delegate mode the lock is tried again every few windows.
//!    Ties go to the lock. A blocking call that waited for the trustee far
//!    longer than serving takes (its thread is preempted, parked or busy
//!    elsewhere) switches to lock mode at once, and so does a delegate
//!    window that a caller finds old and slower than the lock; either
//!    counts as a lost trial. A trustee whose thread waits for a CPU a
//!    fifth of the time or more (each worker measures it, see
//!    `runtime::worker::cpu_wait`) starts no trial, and its delegating
//!    properties go back to the lock at a caller's next check. The
//!    decisions are made by whoever holds the lock when a window closes,
//!    so they need no more synchronisation than the lock.
//! 4. **Per thread and trustee.** A thread that finds a trustee falling
//!    behind (either finding above) avoids it for a stretch of calls that
//!    doubles with each finding in a row: it runs its calls to that
//!    trustee's adaptive properties in place, whatever their mode (rule 1
//!    makes that safe, and rule 2 is checked as always), instead of each
//!    property stalling the thread's requests in a trial of its own.
//! 5. **Where it does not apply.** Callers outside the runtime's workers,
//!    in another process, and in delegated context (inside a closure or a
//!    callback, where a nested lock could deadlock) always delegate. A
//!    handle sent to another process (see `remote`) holds only the trust:
//!    there every call is a request to the trustee, which serves it under
//!    the lock like any delegated one. The
//!    value is dropped on the trustee after the last handle, exactly once,
//!    when the owner property goes, under the lock, which it leaves
//!    *retired*: a caller that still reaches the lock in place (only
//!    possible while the runtime shuts down and drops every property) is
//!    refused with a panic instead of reaching a dropped value.
//!
//! Unlike `Trust<T>`, whose paths take no lock and no atomic
//! read-modify-write, an adaptive property uses one compare-and-swap per
//! call in place, by design; the trustee serves under the bias without
//! one, or, while the bias is revoked, with one per run of requests served
//! in a batch.

mod gate;
#[cfg(all(test, loom))]
mod loom_model;
mod pending;
mod registry;
mod remote;
mod slot;

use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::future::{self, ApplyFuture};
use super::{Delegable, PlainThen, ThenKind, Transferable, Trust, TrusteeRef, TryThen};
use crate::error::Panicked;
use crate::fiber;
use crate::runtime::context;
use crate::runtime::worker::{Call, Worker};

use gate::Progress;
pub use gate::{Mode, Policy, Thresholds};
use pending::{Counter, Ticket};
use remote::Handle;
use slot::{Held, Node, NodeRef, Owner};

/// A wait for the trustee longer than this means its thread is not
/// running (a served request takes microseconds).
const SLOW_TRUSTEE: Duration = Duration::from_millis(1);

/// How many times a fiber that waits for its result anyway (`apply`)
/// yields for its outstanding requests to be answered before it holds its
/// call behind them (other fibers of its thread may keep issuing). The
/// forms that do not wait are held at once.
const DRAIN_WAITS: u32 = 64;

/// A handle to an adaptive property: the calls of a [`Trust<T>`] (`apply`,
/// `apply_then`, `try_apply_then`, `apply_async`, `clone`), run in place
/// under a per-property lock while the property is uncontended and
/// delegated to its trustee while it is contended (see the module
/// documentation of `trust::adaptive` in the source for the protocol).
///
/// Made by [`TrusteeRef::entrust_adaptive`] or [`entrust_adaptive`]. The
/// guarantees are those of a trust: each closure runs exactly once with
/// exclusive access, a fiber's requests take effect in the order it issued
/// them, and the value is dropped once, on its trustee, after the last
/// handle.
///
/// A handle is [`Transferable`], like a [`Trust`]: sent to another process
/// (as an `apply_with` argument, a `spawn_with` argument, a field of a
/// message), it becomes a handle there on which every call is delegated to
/// the trustee, never run in place, under the rules of a `Trust` in another
/// process: its code crosses as a `fn` (`apply_with`, `apply_with_then`,
/// `try_apply_with_then`, `apply_with_async`), and a generic closure
/// (`apply`, …) to a trustee in another process is refused in the caller.
///
/// ```
/// use gossamer::{Mode, Policy};
/// let rt = gossamer::Runtime::builder().workers(2).build()?;
/// rt.block_on(|| {
///     let hits = gossamer::trustee(1).entrust_adaptive(0u64);
///     let h2 = hits.clone();
///     let other = gossamer::spawn_on(1, move || {
///         for _ in 0..1000 {
///             h2.apply(|n| *n += 1);
///         }
///     });
///     for _ in 0..1000 {
///         hits.apply_then(|n| *n += 1, |()| {});
///     }
///     other.join().unwrap();
///     assert_eq!(hits.apply(|n| *n), 2000);
///     // The policy can be changed at any time, from any handle.
///     hits.set_policy(Policy::Delegate);
///     assert_eq!(hits.mode(), Mode::Delegate);
///     hits.apply(|n| *n += 1);
///     assert_eq!(hits.apply(|n| *n), 2001);
/// });
/// # Ok::<(), gossamer::Error>(())
/// ```
pub struct Adaptive<T: Send + 'static> {
    handle: Handle<T>,
}

impl TrusteeRef {
    /// Gives `value` to this trustee as an adaptive property (see
    /// [`Adaptive`]) and returns the first handle to it. It starts in lock
    /// mode under [`Policy::Adaptive`].
    ///
    /// # Panics
    /// As [`entrust`](TrusteeRef::entrust).
    pub fn entrust_adaptive<T: Send + 'static>(&self, value: T) -> Adaptive<T> {
        Adaptive::made(Node::make(value, |o| self.entrust(o)))
    }
}

/// Entrusts `value` as an adaptive property to a trustee picked
/// round-robin, as [`entrust`](crate::entrust) does.
///
/// # Panics
/// Outside the runtime's threads.
pub fn entrust_adaptive<T: Send + 'static>(value: T) -> Adaptive<T> {
    Adaptive::made(Node::make(value, super::entrust))
}

/// Serves one delegated closure on the trustee, under the lock.
fn serve<T, F: FnOnce(&mut T) -> U, U>(owner: &mut Owner<T>, f: F) -> U {
    let mut held = Held::serving(&owner.0.slot);
    f(held.value())
}

impl<T: Send + 'static> Adaptive<T> {
    /// The first handle to a new adaptive property (known to the profile
    /// since its node was made).
    fn made(node: NodeRef<T>) -> Self {
        Adaptive { handle: Handle::Local(node) }
    }

    #[inline]
    fn trust(&self) -> &Trust<Owner<T>> {
        match &self.handle {
            Handle::Local(node) => node.trust(),
            Handle::Remote(trust) => trust,
        }
    }

    /// The node, for a handle made in the property's process.
    #[inline]
    fn local(&self) -> Option<&Node<T>> {
        match &self.handle {
            Handle::Local(node) => Some(node),
            Handle::Remote(_) => None,
        }
    }

    /// What this thread counts its outstanding requests under: the owner
    /// property's address, the same for every handle to the property in
    /// its process, however the handle got there.
    fn key(&self) -> usize {
        self.trust().profile_id().0 as usize
    }

    /// Where the calling thread's call goes now: in place (a worker of the
    /// property's process, outside delegated context, the property routed
    /// in place, and no request of this thread to it outstanding), held
    /// behind this thread's outstanding requests or held calls to it, or
    /// delegated. A fiber whose call would run in place but for outstanding
    /// requests first yields, up to `drain_waits` times, for their answers.
    #[inline]
    fn route(&self, drain_waits: u32) -> Route<'_, T> {
        let counter = Counter::of(self.key());
        let Some(node) = self.local() else { return Route::Delegate(counter) };
        let held = counter.held();
        if !held && !self.routed_in_place(node) {
            return Route::Delegate(counter);
        }
        let Some(w) = self.counting_worker() else { return Route::Delegate(counter) };
        if held {
            // Behind its own held calls, in order.
            return Route::Hold(w);
        }
        if !self.in_place_allowed_here(w) {
            return Route::Delegate(counter);
        }
        let mut waits = 0;
        while counter.outstanding() {
            if counter.held() || !fiber::in_fiber() || waits >= drain_waits {
                return Route::Hold(w);
            }
            // Let the worker take in the answers; they arrive in order.
            w.yield_now();
            waits += 1;
            if !counter.held() && (!self.routed_in_place(node) || !self.in_place_allowed_here(w)) {
                return Route::Delegate(counter);
            }
        }
        Route::InPlace(w, node)
    }

    /// The calling thread's worker, if it counts its requests to this
    /// property (a worker of this runtime in the trustee's process:
    /// callers elsewhere never run in place, and never hold calls).
    #[inline]
    fn counting_worker(&self) -> Option<&'static Worker> {
        let w = context::current()?;
        let trust = self.trust();
        (w.shared.id == trust.runtime && w.shared.is_local(trust.trustee as usize)).then_some(w)
    }

    /// Whether `w`, a counting worker, may run a call in place now, its
    /// outstanding requests aside: the property routed in place, and not in
    /// delegated context.
    #[inline]
    fn in_place_allowed(&self, node: &Node<T>, w: &Worker) -> bool {
        self.routed_in_place(node) && self.in_place_allowed_here(w)
    }

    /// Whether `w`, a counting worker, may run a call in place, the mode
    /// aside: outside delegated context, the trustee not across processes.
    #[inline]
    fn in_place_allowed_here(&self, w: &Worker) -> bool {
        !w.shared.crosses(Some(w.index), self.trust().trustee as usize) && !w.must_defer()
    }

    /// Whether the mode sends callers in place, or this thread avoids the
    /// property's trustee for now (see `pending`).
    #[inline]
    fn routed_in_place(&self, node: &Node<T>) -> bool {
        let gate = &node.slot.gate;
        gate.mode() == Mode::Lock || (gate.may_override() && pending::avoiding(self.trust().trustee as usize))
    }

    /// Whether the calling thread counts its delegated requests (a worker
    /// of this runtime in the trustee's process: callers elsewhere never
    /// run in place), counted under `counter`, the thread's counter of the
    /// property.
    fn ticket(&self, counter: Counter) -> Option<Ticket> {
        if let Some(node) = self.local() {
            if pending::check_due() {
                let t = self.trust().trustee as usize;
                match node.slot.gate.check_progress(t) {
                    Progress::Slow => pending::trustee_slow(t),
                    Progress::KeepsUp => pending::trustee_keeps_up(t),
                    Progress::Unjudged => {}
                }
            }
        }
        self.counting_worker().map(|_| Ticket::take(counter))
    }

    /// Runs `f` on the property, exclusively, and waits for its result, as
    /// [`Trust::apply`] does: in place under the lock, or delegated.
    ///
    /// # Panics
    /// As [`Trust::apply`] (a blocking call in delegated context, a panic
    /// in `f`).
    #[inline]
    pub fn apply<F, U>(&self, f: F) -> U
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        let (w, node) = match self.route(DRAIN_WAITS) {
            Route::InPlace(w, node) => (w, node),
            Route::Hold(w) => return self.apply_held(w, f),
            Route::Delegate(counter) => return self.apply_delegated(counter, f),
        };
        w.check_may_block();
        // A fiber whose calls all run in place never suspends: now and
        // then, let the worker's other fibers and trustee duties run.
        w.local_turn();
        let u = {
            let mut held = Held::in_place(&node.slot, self.trust().trustee as usize);
            let _g = w.enter_delegated();
            f(held.value())
        };
        w.run_deferred();
        u
    }

    /// `apply` behind this thread's held calls to the property: held with
    /// them, and waited for.
    #[cold]
    fn apply_held<F, U>(&self, w: &Worker, f: F) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable,
    {
        w.check_may_block();
        let done = Arc::new(future::Done::new());
        let d = done.clone();
        self.then_impl::<F, U, _, TryThen>(
            f,
            move |r: Result<U, Panicked>| d.complete(Some(r.map_err(Panicked::into_panic))),
            "apply",
        );
        future::block_on(ApplyFuture::from_done(done))
    }

    /// `apply`, delegated to the trustee.
    fn apply_delegated<F, U>(&self, counter: Counter, f: F) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable,
    {
        let ticket = self.ticket(counter);
        let adaptive = self.local().filter(|n| n.slot.gate.policy() == Policy::Adaptive);
        let start = adaptive.map(|n| (n, Instant::now()));
        let u = self.trust().apply_as(move |o: &mut Owner<T>| serve(o, f), Call::User("apply"));
        if let Some((n, s)) = start {
            if s.elapsed() > SLOW_TRUSTEE {
                n.slot.gate.note_slow_trustee();
                pending::trustee_slow(self.trust().trustee as usize);
            }
        }
        drop(ticket);
        u
    }

    /// Runs `f` on the property without waiting, then `then` with its
    /// result on this thread, as [`Trust::apply_then`] does (in place, both
    /// run at once). Allowed in delegated context, where it delegates.
    ///
    /// In lock mode, while requests of this thread to the property are
    /// still in flight (delegated before the switch), the call waits on
    /// this thread behind them, without blocking the caller, and runs in
    /// place once they are answered: `then` runs later then, not at once,
    /// and in delegated context, as a delegated call's callback does.
    #[inline]
    pub fn apply_then<F, U, G>(&self, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(U) + 'static,
    {
        self.then_impl::<F, U, G, PlainThen>(f, then, "apply_then")
    }

    /// Like [`apply_then`](Adaptive::apply_then), but `then` always runs,
    /// with `Err` if `f` panicked.
    pub fn try_apply_then<F, U, G>(&self, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(Result<U, Panicked>) + 'static,
    {
        self.then_impl::<F, U, G, TryThen>(f, then, "try_apply_then")
    }

    #[inline]
    fn then_impl<F, U, G, K>(&self, f: F, then: G, call: &'static str)
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: 'static,
        K: ThenKind<U, G> + ThenKind<U, Counted<G>> + 'static,
    {
        match self.route(0) {
            Route::InPlace(w, node) => self.then_in_place::<F, U, G, K>(w, node, f, then),
            Route::Hold(w) => self.hold_then::<F, U, G, K>(w, f, then, call),
            Route::Delegate(counter) => self.then_delegated::<F, U, G, K>(counter, f, then, call),
        }
    }

    /// Holds the call behind this thread's outstanding requests to the
    /// property (see `pending`).
    #[cold]
    fn hold_then<F, U, G, K>(&self, w: &Worker, f: F, then: G, call: &'static str)
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable,
        G: 'static,
        K: ThenKind<U, G> + ThenKind<U, Counted<G>> + 'static,
    {
        let held = HeldThen::<T, F, G, K> { handle: self.clone(), f, then, call, _kind: PhantomData };
        pending::hold(w, self.key(), Box::new(held));
    }

    /// Runs `f` in place, then `then`.
    #[inline]
    fn then_in_place<F, U, G, K>(&self, w: &Worker, node: &Node<T>, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U,
        K: ThenKind<U, G>,
    {
        let r = {
            let mut held = Held::in_place(&node.slot, self.trust().trustee as usize);
            let _g = w.enter_delegated();
            catch_unwind(AssertUnwindSafe(|| f(held.value())))
        };
        // As on the local shortcut of a `Trust`: the callback runs at
        // once, after the closure, the lock released.
        if let Some((what, p)) = K::run(then, r) {
            w.report_panic(what, p);
        }
        w.run_deferred();
    }

    /// Delegates `f` to the trustee, `then` to run with its answer
    /// (`counter`: the thread's counter of the property).
    #[inline]
    fn then_delegated<F, U, G, K>(&self, counter: Counter, f: F, then: G, call: &'static str)
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: 'static,
        K: ThenKind<U, G> + ThenKind<U, Counted<G>> + 'static,
    {
        match self.ticket(counter) {
            Some(ticket) => self.trust().then_impl::<_, U, _, K>(
                move |o: &mut Owner<T>| serve(o, f),
                Counted { ticket, then },
                Call::User(call),
            ),
            None => self.trust().then_impl::<_, U, G, K>(move |o: &mut Owner<T>| serve(o, f), then, Call::User(call)),
        }
    }

    /// Runs `f` on the property and returns a future for its result, from
    /// any thread, as [`Trust::apply_async`] does. On a worker in lock mode
    /// the closure runs in place and the future is ready at once.
    pub fn apply_async<F, U>(&self, f: F) -> ApplyFuture<U>
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with_async`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        match context::current() {
            Some(w) if w.shared.id == self.trust().runtime => {
                let done = Arc::new(future::Done::new());
                let d = done.clone();
                self.try_apply_then(f, move |r: Result<U, Panicked>| d.complete(Some(r.map_err(Panicked::into_panic))));
                ApplyFuture::from_done(done)
            }
            _ => self.trust().submit_outside(move |o: &mut Owner<T>| serve(o, f)),
        }
    }

    /// The current mode: who runs closures now. Always
    /// [`Mode::Delegate`] on a handle in another process than the trustee.
    pub fn mode(&self) -> Mode {
        match self.local() {
            Some(node) => node.slot.gate.mode(),
            None => Mode::Delegate,
        }
    }

    /// The policy in force.
    ///
    /// # Panics
    /// On a handle in another process, as [`Trust::apply_with`] (it asks
    /// the trustee, and waits).
    pub fn policy(&self) -> Policy {
        match self.local() {
            Some(node) => node.slot.gate.policy(),
            None => remote::policy(self.trust()),
        }
    }

    /// Sets the policy of the property (every handle to it), at once and
    /// while it is in use: [`Policy::Delegate`] and [`Policy::Lock`] fix
    /// the mode, [`Policy::Adaptive`] measures from the current mode on.
    /// Callers that read the old mode finish under the lock as before (see
    /// the switch protocol); order and exclusive access hold throughout.
    ///
    /// # Panics
    /// On a handle in another process, as [`Trust::apply_with`] (it asks
    /// the trustee, and waits).
    pub fn set_policy(&self, p: Policy) {
        match self.local() {
            Some(node) => node.slot.gate.set_policy(p),
            None => remote::set_policy(self.trust(), p),
        }
    }

    /// The thresholds of [`Policy::Adaptive`] for this property.
    ///
    /// # Panics
    /// As [`policy`](Adaptive::policy).
    pub fn thresholds(&self) -> Thresholds {
        match self.local() {
            Some(node) => node.slot.gate.thresholds(),
            None => remote::thresholds(self.trust()),
        }
    }

    /// Sets the thresholds of [`Policy::Adaptive`] for this property.
    ///
    /// # Panics
    /// As [`set_policy`](Adaptive::set_policy).
    pub fn set_thresholds(&self, t: Thresholds) {
        match self.local() {
            Some(node) => node.slot.gate.set_thresholds(t),
            None => remote::set_thresholds(self.trust(), t),
        }
    }

    /// The trustee that serves delegated requests and drops the value.
    pub fn trustee(&self) -> TrusteeRef {
        self.trust().trustee()
    }

    /// True when the calling thread is the property's trustee.
    pub fn is_local(&self) -> bool {
        self.trust().is_local()
    }

    /// The id under which profiles name this property's delegated
    /// requests.
    pub fn profile_id(&self) -> crate::profile::TrustId {
        self.trust().profile_id()
    }
}

/// Where a call goes (see `Adaptive::route`).
enum Route<'a, T> {
    InPlace(&'static Worker, &'a Node<T>),
    Hold(&'static Worker),
    /// Delegated, with the thread's counter of the property.
    Delegate(Counter),
}

/// A call held on its thread (see `pending`): the closure, its callback
/// and a handle that keeps the property alive until it is issued.
struct HeldThen<T: Send + 'static, F, G, K> {
    handle: Adaptive<T>,
    f: F,
    then: G,
    call: &'static str,
    _kind: PhantomData<K>,
}

impl<T, F, U, G, K> pending::HeldCall for HeldThen<T, F, G, K>
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Transferable,
    G: 'static,
    K: ThenKind<U, G> + ThenKind<U, Counted<G>> + 'static,
{
    fn issue(self: Box<Self>, w: &Worker) -> Result<(), Box<dyn pending::HeldCall>> {
        let h = &self.handle;
        let in_place = match (h.local(), h.counting_worker()) {
            (Some(node), Some(w)) if h.in_place_allowed(node, w) => Some(w),
            _ => None,
        };
        // In place only once the thread's requests to it are answered;
        // delegated at once, behind them.
        let counter = Counter::of(h.key());
        if in_place.is_some() && counter.delegated() {
            return Err(self);
        }
        let HeldThen { handle, f, then, call, .. } = *self;
        // Run as a delegated call's callback is, in delegated context:
        // nothing here may suspend the fiber that issues the held calls
        // (one held behind it meanwhile would go first).
        let _g = w.enter_delegated();
        match (in_place, handle.local()) {
            (Some(w), Some(node)) => handle.then_in_place::<F, U, G, K>(w, node, f, then),
            _ => handle.then_delegated::<F, U, G, K>(counter, f, then, call),
        }
        Ok(())
    }
}

/// A then-callback that keeps its request counted as outstanding until it
/// has run (or been dropped, when the closure panicked).
struct Counted<G> {
    ticket: Ticket,
    then: G,
}

impl<U, G: FnOnce(U)> ThenKind<U, Counted<G>> for PlainThen {
    fn run(g: Counted<G>, r: std::thread::Result<U>) -> Option<(&'static str, Box<dyn std::any::Any + Send>)> {
        let Counted { ticket, then } = g;
        drop(ticket);
        <PlainThen as ThenKind<U, G>>::run(then, r)
    }
}

impl<U, G: FnOnce(Result<U, Panicked>)> ThenKind<U, Counted<G>> for TryThen {
    fn run(g: Counted<G>, r: std::thread::Result<U>) -> Option<(&'static str, Box<dyn std::any::Any + Send>)> {
        let Counted { ticket, then } = g;
        drop(ticket);
        <TryThen as ThenKind<U, G>>::run(then, r)
    }
}

impl<T: Send + 'static> Clone for Adaptive<T> {
    /// Another handle to the same property (not a copy of the value).
    fn clone(&self) -> Self {
        let handle = match &self.handle {
            Handle::Local(node) => {
                node.add_handle();
                Handle::Local(node.share())
            }
            Handle::Remote(trust) => Handle::Remote(trust.clone()),
        };
        Adaptive { handle }
    }
}

#[cfg(all(test, not(loom)))]
impl<T: Send + 'static> Adaptive<T> {
    /// The node of a handle made in the property's process.
    pub(crate) fn node_for_tests(&self) -> &NodeRef<T> {
        match &self.handle {
            Handle::Local(node) => node,
            Handle::Remote(_) => panic!("a handle from another process has no node here"),
        }
    }
}

impl<T: Send + 'static> Drop for Adaptive<T> {
    fn drop(&mut self) {
        // A handle in another process holds its own trust, dropped with it.
        if let Handle::Local(node) = &self.handle {
            node.drop_handle();
        }
    }
}

impl<T: Send + 'static> std::fmt::Debug for Adaptive<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adaptive").field("trust", self.trust()).field("mode", &self.mode()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod starved_tests {
    use super::*;
    use crate::Runtime;

    /// Thresholds under which every lock window counts as contended and
    /// closes after a few calls (the property tries delegation at once,
    /// unless its trustee is starved), and a delegate window never closes
    /// in these tests.
    fn eager() -> Thresholds {
        Thresholds { contended_percent: 0, lock_window: 16, delegate_window_min: 1 << 30, delegate_window_max: 1 << 30 }
    }

    /// `n` calls from worker `on`, until `until` says stop; whether any
    /// of them found the property delegating.
    fn calls_from(rt: &Runtime, on: usize, a: &Adaptive<u64>, n: u64, until: fn(Mode) -> bool) -> (u64, bool) {
        let a = a.clone();
        rt.spawn_on(on, move || {
            let mut saw = false;
            for i in 0..n {
                if until(a.mode()) {
                    return (i, saw);
                }
                saw |= a.mode() == Mode::Delegate;
                a.apply(|v| *v += 1);
            }
            (n, saw)
        })
        .join()
        .unwrap()
    }

    /// A property whose trustee's thread waits for a CPU much of the time
    /// does not try delegation, and one that delegates goes back to the
    /// lock at a caller's next check; once the trustee runs, it tries
    /// again.
    #[test]
    fn a_starved_trustee_keeps_its_properties_under_the_lock() {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let a = rt.trustee(1).entrust_adaptive(0u64);
        a.set_thresholds(eager());
        let tune = rt.shared.tune(1);
        tune.force_cpu_wait_percent(Some(90));
        let (n1, saw) = calls_from(&rt, 0, &a, 2000, |_| false);
        assert!(!saw && a.mode() == Mode::Lock, "a starved trustee's property tried delegation");
        // Its thread runs again: the next contended window switches.
        tune.force_cpu_wait_percent(Some(0));
        let (n2, _) = calls_from(&rt, 0, &a, 2000, |m| m == Mode::Delegate);
        assert_eq!(a.mode(), Mode::Delegate, "the property never tried delegation");
        // Starved while delegating: a caller's next check (one in 64
        // delegated calls) sends it back.
        tune.force_cpu_wait_percent(Some(90));
        let (n3, _) = calls_from(&rt, 0, &a, 1000, |m| m == Mode::Lock);
        assert!(n3 <= 130, "{n3} calls delegated to a starved trustee");
        assert_eq!(a.mode(), Mode::Lock);
        let a2 = a.clone();
        assert_eq!(rt.spawn_on(0, move || a2.apply(|v| *v)).join().unwrap(), n1 + n2 + n3);
        drop(a);
        rt.shutdown();
    }
}
