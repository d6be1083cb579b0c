//! The client side of direct requests to a moved property: per thread and
//! property, the route this thread's requests take (through the origin,
//! or straight to a cell that holds the value or forwards it), the count
//! of its requests still outstanding, and the rule that a route changes
//! only while that count is zero (see the module documentation of
//! `trust::migrate`).
//!
//! A thread keeps a route only for a property whose origin relayed one of
//! its requests and told it where the value was; until then, and for every
//! property that never moved, its requests take the common path, which
//! pays one thread-local test ([`active`]) for all this.
//!
//! Threads of other processes keep routes too, for the requests they may
//! send there (`apply_with` and its forms, see `far`): the route names a
//! cell of the property's process, and the messages of the protocol (the
//! hint, the origin asking for the route back, the thread giving it back)
//! travel as runtime messages between the processes. Routes are keyed by
//! the origin's process as well as its address ([`Key`]), as addresses of
//! different processes may be equal.
//!
//! What goes through the origin whatever the route (the start of a launch)
//! is a *detour* ([`after_routed`]): it waits in the entry, in issue
//! order, until every request the route carries has completed, and what
//! the thread issues after it waits behind it.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::resume_unwind;

use super::{origin, resolve, route, run_here, Closure, Reply, Request, Resolved, Then, Transferable, Waiter};
use crate::runtime::context;
use crate::runtime::property::{Header, PropertyCell, SendPtr};
use crate::runtime::worker::Worker;

/// A route: the trustee and cell requests go to, or `None` for the origin.
type Via = Option<(usize, *mut Header)>;

/// What a thread keys its route to a moved property by: the rank of the
/// process the property lives in (it moves only within that process) and
/// its origin's address there.
pub(crate) type Key = (usize, usize);

/// The key of the property whose origin is at `addr` on trustee `t`.
#[inline]
pub(crate) fn key(w: &Worker, t: usize, addr: usize) -> Key {
    let p = &w.shared.placement;
    if w.shared.is_local(t) {
        return (p.rank, addr);
    }
    (p.rank_of(t).unwrap_or(usize::MAX), addr)
}

/// A request held back until the route may change, sent by the route
/// given to it, counted; or, uncounted, through the origin (`None`) once
/// the route is given back.
type Held = Box<dyn FnOnce(&Worker, Option<Via>)>;

/// What waits in an entry, in issue order.
enum Waiting {
    /// A request for the route (see [`Held`]).
    Routed(Held),
    /// Something that goes through the origin whatever the route (the
    /// start of a launch), sent once every request the route carries has
    /// completed.
    Detour(Detoured),
}

/// What a detour does once it may go: sends itself.
type Detoured = Box<dyn FnOnce(&Worker)>;

/// This thread's route to one moved property.
struct Entry {
    /// Where its requests go now.
    via: Via,
    /// The latest place the value was seen, taken as `via` once nothing
    /// is outstanding.
    next: Option<(usize, *mut Header)>,
    /// Requests sent by this entry and not yet completed.
    outstanding: u32,
    /// Every request this thread sent to the property before the entry
    /// existed has run (one sent by the entry completed with nothing
    /// outstanding after it).
    settled: bool,
    /// Requests issued while the route waits to change or behind a
    /// detour, in issue order.
    held: VecDeque<Waiting>,
    /// The origin's trustee, once it asked for the route back.
    retiring: Option<usize>,
}

impl Entry {
    /// True when the route is to change (or the entry to settle) once the
    /// requests outstanding have completed.
    fn changing(&self) -> bool {
        self.next.is_some() || !self.settled
    }

    /// Takes the next hint as the route if nothing can be overtaken.
    fn switch(&mut self) {
        if self.outstanding == 0 && self.settled {
            if let Some(n) = self.next.take() {
                self.via = Some(n);
            }
        }
    }
}

/// Hashes a cell address: one multiplication (the keys are addresses
/// of distinct live cells, never chosen by a peer).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26);
    }
}

type Routes = HashMap<Key, Entry, BuildHasherDefault<AddrHasher>>;

thread_local! {
    /// True while this thread keeps a route to some property.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// Per origin (its process and address).
    static ROUTES: RefCell<Routes> = RefCell::new(Routes::default());
}

/// True when this thread keeps a route to some moved property: only then
/// does a request look one up.
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// True when this thread keeps a route to the property `origin`.
pub(crate) fn routes(origin: Key) -> bool {
    ROUTES.with(|m| m.borrow().contains_key(&origin))
}

/// What to do with one more request to a property.
enum Go {
    /// Send it by this route (counted as outstanding).
    Send(Via),
    /// Hold it: the route changes once the outstanding requests complete,
    /// or earlier requests are held.
    Hold,
}

/// What to do with one more request to `origin`; `None` if this thread
/// keeps no route to it.
fn issue(origin: Key) -> Option<Go> {
    ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        let e = m.get_mut(&origin)?;
        if !e.held.is_empty() || (e.outstanding != 0 && (e.changing() || e.retiring.is_some())) {
            return Some(Go::Hold);
        }
        // Nothing this thread sent earlier can be overtaken by a change.
        e.switch();
        e.outstanding += 1;
        Some(Go::Send(e.via))
    })
}

/// True when a request to `origin` may not run at once: the yield or the
/// deferred requests run just now may have changed the entry.
fn must_wait(origin: Key) -> bool {
    ROUTES.with(|m| m.borrow().get(&origin).is_none_or(|e| e.outstanding != 0 || !e.held.is_empty() || e.changing()))
}

/// Holds `f` until the route to `origin` may change.
fn hold(origin: Key, f: Held) {
    ROUTES.with(|m| {
        if let Some(e) = m.borrow_mut().get_mut(&origin) {
            e.held.push_back(Waiting::Routed(f));
        }
    });
}

/// Runs `send`, which sends something for the property whose origin is
/// at `origin` on trustee `t` through the origin whatever this thread's
/// route (the start of a launch, see `migrate::launch`), once it cannot
/// overtake what this thread sent earlier by the route: at once if
/// nothing is outstanding or held, else after those requests (the ones
/// held first) have completed. Requests issued meanwhile wait behind it.
pub(crate) fn after_routed(w: &Worker, t: usize, origin: usize, send: impl FnOnce(&Worker) + 'static) {
    if !active() {
        return send(w);
    }
    if let Err(send) = detour(w, t, origin, Box::new(send)) {
        send(w);
    }
}

/// From a fiber that may block: returns once every request this thread
/// sent by its route to the property whose origin is at `origin` on
/// trustee `t` has completed (at once if none is outstanding or held),
/// for a detour the fiber sends itself. Requests issued meanwhile wait
/// until it resumes.
pub(crate) fn wait_routed(w: &Worker, t: usize, origin: usize) {
    if !active() {
        return;
    }
    let wait = Waiter::<()>::new(w.current_fiber());
    let reply = Reply::<()>::Wake(wait.as_data());
    if detour(w, t, origin, Box::new(move |w| reply.finish(w, Ok(())))).is_ok() {
        wait.wait();
    }
}

/// Holds `send` behind everything this thread's route to the property
/// whose origin is at `origin` on trustee `t` carries or holds; gives it
/// back when there is nothing of the kind (no route, or nothing
/// outstanding or held).
fn detour(w: &Worker, t: usize, origin: usize, send: Detoured) -> Result<(), Detoured> {
    let key = key(w, t, origin);
    ROUTES.with(|m| match m.borrow_mut().get_mut(&key) {
        Some(e) if e.outstanding != 0 || !e.held.is_empty() => {
            e.held.push_back(Waiting::Detour(send));
            Ok(())
        }
        _ => Err(send),
    })
}

/// A request sent for `origin` completed.
fn done(w: &Worker, origin: Key) {
    let quiet = ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        let Some(e) = m.get_mut(&origin) else { return false };
        e.outstanding -= 1;
        if e.outstanding != 0 {
            return false;
        }
        e.settled = true;
        !e.held.is_empty() || e.retiring.is_some()
    });
    if !quiet {
        return;
    }
    // The origin asked for the route back (what was issued meanwhile is
    // held): give it back now, and send what was held through the origin,
    // in order, as a thread without a route does.
    let given_back = ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        let to = m.get(&origin)?.retiring?;
        let e = m.remove(&origin)?;
        ACTIVE.set(!m.is_empty());
        Some((to, e.held))
    });
    if let Some((to, held)) = given_back {
        acknowledge(w, to, origin);
        for h in held {
            match h {
                Waiting::Routed(f) => f(w, None),
                Waiting::Detour(f) => f(w),
            }
        }
        return;
    }
    // Send what was held, in order, by the new route; a detour once
    // everything sent before it has completed.
    loop {
        let step = ROUTES.with(|m| {
            let mut m = m.borrow_mut();
            let e = m.get_mut(&origin)?;
            match e.held.front()? {
                Waiting::Detour(_) if e.outstanding != 0 => None,
                Waiting::Routed(_) if e.outstanding != 0 && e.changing() => None,
                Waiting::Detour(_) => e.held.pop_front().map(|h| (h, None)),
                Waiting::Routed(_) => {
                    e.switch();
                    e.outstanding += 1;
                    e.held.pop_front().map(|h| (h, Some(e.via)))
                }
            }
        });
        match step {
            Some((Waiting::Routed(f), via)) => f(w, via),
            Some((Waiting::Detour(f), _)) => f(w),
            None => break,
        }
    }
}

/// Tells the origin's trustee `to` that this thread dropped its route to
/// the property `origin`.
fn acknowledge(w: &Worker, to: usize, origin: Key) {
    if !w.shared.is_local(to) {
        return super::far::acknowledge(w, to, origin.1);
    }
    w.send(to, move || {
        let w = context::current().expect("gossamer: runtime message outside a worker");
        origin::retired(w, origin.1);
    });
}

/// A relaying record tells where it saw the value of the property whose
/// origin is at `hint.origin` (with a relayed result). The origin's hint
/// (`create`) may give this thread a route (and the origin will ask for it
/// back); a record left behind only updates a route that leads to that
/// very record. Records relay to each other too (a record whose forward is
/// stale in its turn): the result of such a hop comes back to the thread
/// of the record that sent it on, and its hint is about that record's
/// path, not this thread's own route, which may be newer than the record:
/// taken, it could send this thread's requests to a cell that a sweep this
/// thread took no part in frees (see `origin`).
pub(super) fn note(w: &Worker, hint: super::Hint) {
    let (t, cell) = (hint.at.0, hint.at.1 .0);
    let from = (hint.from.0, hint.from.1 .0);
    // The record that tells is in the property's process.
    let origin = key(w, from.0, hint.origin);
    ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        match m.get_mut(&origin) {
            Some(e) if hint.create || e.via.is_some_and(|v| first_hop(w, v) == from) => {
                e.next = (e.via != Some((t, cell))).then_some((t, cell));
            }
            Some(_) => {}
            None if hint.create => {
                m.insert(
                    origin,
                    Entry {
                        via: None,
                        next: Some((t, cell)),
                        outstanding: 0,
                        settled: false,
                        held: VecDeque::new(),
                        retiring: None,
                    },
                );
                ACTIVE.set(true);
            }
            None => {}
        }
    });
}

/// The cell of another thread that requests sent by the route `via` reach
/// first: `via` itself, or, for a record of this thread, where its
/// forwards lead (requests follow them here, see `resolve`).
fn first_hop(w: &Worker, via: (usize, *mut Header)) -> (usize, *mut Header) {
    match resolve::<()>(w, via.0, via.1.cast()) {
        Resolved::At(t, cell) => (t, cell.cast()),
        // Only an origin drains, and a route never names one.
        Resolved::Held(_) => via,
    }
}

/// The origin's trustee `from` asks for the route to `origin` back (no
/// trust to the property is left, or it sweeps the records left behind by
/// hand-overs, see `origin`); done once this thread's requests sent by the
/// route are. Requests issued meanwhile wait, then go through the origin.
pub(super) fn retire(w: &Worker, from: usize, origin: usize) {
    let origin = key(w, from, origin);
    let now = ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        match m.get_mut(&origin) {
            Some(e) if e.outstanding != 0 || !e.held.is_empty() => {
                e.retiring = Some(from);
                false
            }
            Some(_) => {
                m.remove(&origin);
                ACTIVE.set(!m.is_empty());
                true
            }
            None => true,
        }
    });
    if now {
        acknowledge(w, from, origin);
    }
}

/// Sends `req` by route `via` (`None`: to the origin `origin` on trustee
/// `t`), counted for `key`; `reply` gets the result. Without a route
/// (`via` is `None`: it was given back), uncounted to the origin.
fn go<T: 'static, R: Request<T>>(
    w: &Worker,
    key: Key,
    t: usize,
    origin: *mut PropertyCell<T>,
    via: Option<Via>,
    req: R,
    reply: Reply<R::Out>,
) {
    let Some(via) = via else { return route(w, t, origin, req, reply, false) };
    let (t, cell) = via.map_or((t, origin), |(t, c)| (t, c.cast()));
    let counted: Then<R::Out> = Box::new(move |w, r| {
        done(w, key);
        reply.finish(w, r)
    });
    route(w, t, cell, req, Reply::Then(counted), false);
}

/// Sends `req` for the property whose origin is `origin` on trustee `t`
/// by this thread's route, and hands the result to `reply`; gives both
/// back if this thread keeps no route to it.
pub(crate) fn send<T: 'static, R: Request<T>>(
    w: &Worker,
    t: usize,
    origin: *mut PropertyCell<T>,
    req: R,
    reply: Reply<R::Out>,
) -> Result<(), (R, Reply<R::Out>)> {
    let key = key(w, t, origin.addr());
    match issue(key) {
        None => Err((req, reply)),
        Some(Go::Send(via)) => {
            go(w, key, t, origin, Some(via), req, reply);
            Ok(())
        }
        Some(Go::Hold) => {
            let origin = SendPtr(origin);
            hold(key, Box::new(move |w, via| go(w, key, t, { origin }.0, via, req, reply)));
            Ok(())
        }
    }
}

/// `apply` by this thread's route to the property whose origin is
/// `origin` on trustee `t` (which this thread keeps: see [`routes`]), from
/// a fiber that may block.
pub(crate) fn call<T, F, U>(w: &'static Worker, t: usize, origin: *mut PropertyCell<T>, f: F) -> U
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Transferable,
{
    let key = key(w, t, origin.addr());
    let here = ROUTES.with(|m| {
        let m = m.borrow();
        let e = m.get(&key)?;
        let (t, cell) = e.via?;
        (t == w.index).then_some((cell, e.outstanding == 0 && e.held.is_empty() && !e.changing()))
    });
    if let Some((cell, quiet)) = here {
        // A fiber that only ever hits a value on its own thread would never
        // suspend: now and then, let the others run (as the local shortcut
        // does).
        w.local_turn();
        if quiet {
            // Nothing of this thread is outstanding or held, and the route
            // stays: run it at once, uncounted (it completes here).
            w.run_deferred();
            if let Resolved::At(t2, c2) = resolve(w, w.index, cell.cast::<PropertyCell<T>>()) {
                if t2 == w.index && !must_wait(key) {
                    let r = run_here(w, c2, Closure::new(f));
                    w.run_deferred();
                    return r.unwrap_or_else(|p| resume_unwind(p));
                }
            }
        }
    }
    let wait = Waiter::<U>::new(w.current_fiber());
    let data = wait.as_data();
    let reply = Reply::Wake(data);
    match issue(key) {
        // The route was given back while this fiber yielded above: go as a
        // thread without one does.
        None => route(w, t, origin, Closure::new(f), reply, false),
        Some(Go::Send(via)) => {
            let (t, cell) = via.map_or((t, origin), |(t, c)| (t, c.cast()));
            if t == w.index {
                // Earlier requests of this thread come first.
                w.run_deferred();
                if let Resolved::At(t2, c2) = resolve(w, t, cell) {
                    if t2 == w.index {
                        let r = run_here(w, c2, Closure::new(f));
                        done(w, key);
                        w.run_deferred();
                        return r.unwrap_or_else(|p| resume_unwind(p));
                    }
                }
            }
            // Another thread: not completed inline (`cell` stands for the
            // origin with no route of its own).
            go(w, key, t, cell, Some(None), Closure::new(f), reply);
        }
        Some(Go::Hold) => {
            let origin = SendPtr(origin);
            hold(key, Box::new(move |w, via| go(w, key, t, { origin }.0, via, Closure::new(f), reply)));
        }
    }
    wait.wait()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::trust::migrate::Hint;

    /// A hint from `from` that the value is at `at`.
    fn hint(origin: usize, at: (usize, *mut Header), from: (usize, *mut Header), create: bool) -> Hint {
        Hint { origin, at: (at.0, SendPtr(at.1)), from: (from.0, SendPtr(from.1)), create }
    }

    fn next(origin: Key) -> Option<(usize, *mut Header)> {
        ROUTES.with(|m| m.borrow().get(&origin).and_then(|e| e.next))
    }

    #[test]
    #[cfg_attr(miri, ignore = "runs a runtime with fibers")]
    fn a_records_hint_updates_only_a_route_that_leads_to_that_record() {
        let rt = crate::Runtime::builder().workers(3).build().unwrap();
        rt.block_on(|| {
            let w = context::current().unwrap();
            assert_eq!(w.index, 0);
            // Addresses of cells on other threads: compared, never read.
            let cell = |n: usize| std::ptr::without_provenance_mut::<Header>(0x1000 * n);
            let origin = 0x7000;
            // One process: rank 0.
            let k = (0, origin);
            let (old, newer, unrelated) = ((1, cell(1)), (2, cell(2)), (1, cell(3)));
            assert!(next(k).is_none());
            // A record's hint creates no route.
            note(w, hint(origin, newer, old, false));
            assert!(!routes(k), "only the origin gives a route");
            // The origin's does, first through the origin itself.
            note(w, hint(origin, old, (1, cell(9)), true));
            assert!(routes(k));
            assert_eq!(next(k), Some(old));
            ROUTES.with(|m| {
                let mut m = m.borrow_mut();
                let e = m.get_mut(&k).unwrap();
                e.via = e.next.take();
            });
            // A hint from a record this route does not lead to (another
            // record's relay came back here) leaves the route alone.
            note(w, hint(origin, newer, unrelated, false));
            assert_eq!(next(k), None, "a hint about another record's path");
            // From the record it leads to: taken as the next route.
            note(w, hint(origin, newer, old, false));
            assert_eq!(next(k), Some(newer));
            ROUTES.with(|m| m.borrow_mut().remove(&k));
            ACTIVE.set(false);
        });
    }
}
