//! An adaptive property beyond its own process, and the `fn` forms of its
//! calls (`apply_with`, `apply_with_then`, `try_apply_with_then`,
//! `apply_with_async`), which are how code reaches it from there.
//!
//! A handle is either *local* (made in the trustee's process: it points at
//! the shared node and may run closures in place) or *remote* (it holds
//! only a `Trust` to the owner property). Serializing a handle writes that
//! trust, as a `Trust` crosses (a clone owned by the message); the handle
//! read back from it is remote, wherever it lands. Every call on a remote
//! handle is a request to the trustee, which runs the closure under the
//! property's lock, as it serves every delegated request: exclusive access
//! never depends on where the caller is. The value is dropped once, on the
//! trustee, after the last handle: remote handles keep the owner property
//! alive through their trusts, exactly as clones of a `Trust` do.
//!
//! Per-client order: a fiber's requests through one handle run in issue
//! order (they are requests to one trustee). In the trustee's own process a
//! thread counts its delegated requests under the owner property's
//! address, whichever handle issued them, so a local handle never runs a
//! closure in place ahead of a request the same thread sent through a
//! remote handle that came back.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::gate::{Policy, Thresholds};
use super::slot::{Held, NodeRef, Owner};
use super::{Adaptive, Counted, Route, DRAIN_WAITS};
use crate::channel::remote::FnCode;
use crate::error::Panicked;
use crate::runtime::context;
use crate::trust::future::{self, ApplyFuture};
use crate::trust::{PlainThen, ThenKind, Transferable, Trust, TryThen};

/// What a handle holds.
pub(super) enum Handle<T: Send + 'static> {
    /// Made in the trustee's process: the shared node.
    Local(NodeRef<T>),
    /// Read from a message: a trust to the owner property; every call
    /// delegates. Boxed, so that a handle is two words.
    Remote(Box<Trust<Owner<T>>>),
}

/// The argument of a `fn` form on its way to the trustee: the user's `fn`
/// and its argument.
type WithArg<T, V, U> = (FnCode<T, V, U>, V);

/// Serves one `fn` form on the trustee, under the lock.
fn serve_with<T: Send + 'static, V, U>(o: &mut Owner<T>, (code, v): WithArg<T, V, U>) -> U {
    let mut held = Held::serving(&o.0.slot);
    (code.0)(held.value(), v)
}

impl<T: Send + 'static> Serialize for Adaptive<T> {
    /// Writes a clone of the handle's trust (see [`Trust`]'s `Serialize`):
    /// read back, it is a handle that always delegates.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.trust().serialize(s)
    }
}

impl<'de, T: Send + 'static> Deserialize<'de> for Adaptive<T> {
    /// Takes the trust a message carries (checked as a [`Trust`] is) as a
    /// handle that delegates every call.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Adaptive { handle: Handle::Remote(Box::new(Trust::deserialize(d)?)) })
    }
}

impl<T: Send + 'static> Adaptive<T> {
    /// Runs `f(value, w)` on the property, exclusively, and waits for its
    /// result, as [`Trust::apply_with`] does: the argument may own heap
    /// data or trusts, and the code is a `fn`, so this form also works on a
    /// handle in another process (where it is delegated). In the trustee's
    /// process it runs in place or is delegated, as
    /// [`apply`](Adaptive::apply) is.
    ///
    /// # Panics
    /// As [`Trust::apply_with`].
    pub fn apply_with<V, U>(&self, f: fn(&mut T, V) -> U, w: V) -> U
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        let (cw, node) = match self.route(DRAIN_WAITS) {
            Route::InPlace(cw, node) => (cw, node),
            Route::Hold(cw) => return self.apply_held(cw, move |v: &mut T| f(v, w)),
            Route::Delegate(counter) => {
                let ticket = self.ticket(counter);
                let u = self.trust().apply_with(serve_with::<T, V, U>, (FnCode(f), w));
                drop(ticket);
                return u;
            }
        };
        cw.check_may_block();
        cw.local_turn();
        let u = {
            let mut held = Held::in_place(&node.slot, self.trust().trustee as usize);
            let _g = cw.enter_delegated();
            f(held.value(), w)
        };
        cw.run_deferred();
        u
    }

    /// The non-blocking form of [`apply_with`](Adaptive::apply_with), as
    /// [`Trust::apply_with_then`]: `then` runs with the result on this
    /// thread.
    pub fn apply_with_then<V, U, G>(&self, f: fn(&mut T, V) -> U, w: V, then: G)
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(U) + 'static,
    {
        self.with_then::<V, U, G, PlainThen>(f, w, then)
    }

    /// Like [`apply_with_then`](Adaptive::apply_with_then), but `then`
    /// always runs, with `Err` if `f` panicked.
    pub fn try_apply_with_then<V, U, G>(&self, f: fn(&mut T, V) -> U, w: V, then: G)
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(Result<U, Panicked>) + 'static,
    {
        self.with_then::<V, U, G, TryThen>(f, w, then)
    }

    fn with_then<V, U, G, K>(&self, f: fn(&mut T, V) -> U, w: V, then: G)
    where
        V: Transferable,
        U: Transferable,
        G: 'static,
        K: ThenKind<U, G> + ThenKind<U, Counted<G>> + 'static,
    {
        match self.route(0) {
            Route::InPlace(cw, node) => self.then_in_place::<_, U, G, K>(cw, node, move |v: &mut T| f(v, w), then),
            // Held on a worker of the trustee's process, where the call,
            // when it goes, may be delegated as a closure.
            Route::Hold(cw) => self.hold_then::<_, U, G, K>(cw, move |v: &mut T| f(v, w), then, "apply_with_then"),
            Route::Delegate(counter) => {
                let arg = (FnCode(f), w);
                match self.ticket(counter) {
                    Some(ticket) => {
                        self.trust().with_then_impl::<_, U, _, K>(serve_with::<T, V, U>, arg, Counted { ticket, then })
                    }
                    None => self.trust().with_then_impl::<_, U, G, K>(serve_with::<T, V, U>, arg, then),
                }
            }
        }
    }

    /// Runs `f(value, w)` and returns a future for its result, from any
    /// thread, as [`Trust::apply_with_async`] does (in place, on a worker
    /// of the trustee's process in lock mode, the future is ready at once).
    ///
    /// # Panics
    /// As [`Trust::apply_with_async`].
    pub fn apply_with_async<V, U>(&self, f: fn(&mut T, V) -> U, w: V) -> ApplyFuture<U>
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        match context::current() {
            Some(cw) if cw.shared.id == self.trust().runtime => {
                let done = Arc::new(future::Done::new());
                let d = done.clone();
                self.try_apply_with_then(f, w, move |r: Result<U, Panicked>| {
                    d.complete(Some(r.map_err(Panicked::into_panic)))
                });
                ApplyFuture::from_done(done)
            }
            _ => self.trust().apply_with_async(serve_with::<T, V, U>, (FnCode(f), w)),
        }
    }
}

// The policy calls of a handle in another process: requests to the
// trustee, which reads or sets the gate there (taking the property's lock
// where the local call does).

const POLICIES: [Policy; 3] = [Policy::Delegate, Policy::Adaptive, Policy::Lock];

fn policy_code(p: Policy) -> u8 {
    POLICIES.iter().position(|&q| q == p).unwrap_or(1) as u8
}

pub(super) fn policy<T: Send + 'static>(trust: &Trust<Owner<T>>) -> Policy {
    let code = trust.apply_with(|o, ()| policy_code(o.0.slot.gate.policy()), ());
    POLICIES.get(code as usize).copied().unwrap_or(Policy::Adaptive)
}

pub(super) fn set_policy<T: Send + 'static>(trust: &Trust<Owner<T>>, p: Policy) {
    trust.apply_with(
        |o, code: u8| o.0.slot.gate.set_policy(POLICIES.get(code as usize).copied().unwrap_or(Policy::Adaptive)),
        policy_code(p),
    )
}

pub(super) fn thresholds<T: Send + 'static>(trust: &Trust<Owner<T>>) -> Thresholds {
    let (contended_percent, lock_window, delegate_window_min, delegate_window_max) = trust.apply_with(
        |o, ()| {
            let t = o.0.slot.gate.thresholds();
            (t.contended_percent, t.lock_window, t.delegate_window_min, t.delegate_window_max)
        },
        (),
    );
    Thresholds { contended_percent, lock_window, delegate_window_min, delegate_window_max }
}

pub(super) fn set_thresholds<T: Send + 'static>(trust: &Trust<Owner<T>>, t: Thresholds) {
    trust.apply_with(
        |o, (contended_percent, lock_window, delegate_window_min, delegate_window_max): (u32, u32, u32, u32)| {
            o.0.slot.gate.set_thresholds(Thresholds {
                contended_percent,
                lock_window,
                delegate_window_min,
                delegate_window_max,
            })
        },
        (t.contended_percent, t.lock_window, t.delegate_window_min, t.delegate_window_max),
    )
}
