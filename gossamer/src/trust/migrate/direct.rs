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

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::resume_unwind;

use super::{origin, resolve, route, run_here, Closure, Reply, Request, Resolved, Then, Transferable, Waiter};
use crate::runtime::context;
use crate::runtime::property::{Header, PropertyCell};
use crate::runtime::worker::Worker;

/// This thread's route to one moved property.
struct Entry {
    /// Where its requests go: the trustee and cell, or `None` for the
    /// origin.
    via: Option<(usize, *mut Header)>,
    /// The latest place the value was seen, taken as `via` at the next
    /// request issued with nothing outstanding.
    next: Option<(usize, *mut Header)>,
    /// Requests issued by this entry and not yet completed.
    outstanding: u32,
    /// Every request this thread sent to the property before the entry
    /// existed has run (one sent by the entry completed with nothing
    /// outstanding after it).
    settled: bool,
    /// The origin's trustee, once it asked for the route back.
    retiring: Option<usize>,
}

thread_local! {
    /// True while this thread keeps a route to some property.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// Per origin address.
    static ROUTES: RefCell<HashMap<usize, Entry>> = RefCell::new(HashMap::new());
}

/// True when this thread keeps a route to some moved property: only then
/// does a request look one up.
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// True when this thread keeps a route to the property whose origin is at
/// `origin`.
pub(crate) fn routes(origin: usize) -> bool {
    ROUTES.with(|m| m.borrow().contains_key(&origin))
}

/// The route for one more request to `origin`, counted as outstanding:
/// `Some(None)` for the origin, `None` if this thread keeps no route.
fn issue(origin: usize) -> Option<Option<(usize, *mut Header)>> {
    ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        let e = m.get_mut(&origin)?;
        if e.outstanding == 0 && e.settled {
            // Nothing this thread sent earlier can still be overtaken.
            if let Some(n) = e.next.take() {
                e.via = Some(n);
            }
        }
        e.outstanding += 1;
        Some(e.via)
    })
}

/// A request issued by `issue` for `origin` completed.
fn done(w: &Worker, origin: usize) {
    let ack = ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        let e = m.get_mut(&origin)?;
        e.outstanding -= 1;
        if e.outstanding != 0 {
            return None;
        }
        e.settled = true;
        let to = e.retiring?;
        m.remove(&origin);
        ACTIVE.set(!m.is_empty());
        Some(to)
    });
    if let Some(to) = ack {
        acknowledge(w, to, origin);
    }
}

/// Tells the origin's trustee `to` that this thread dropped its route.
fn acknowledge(w: &Worker, to: usize, origin: usize) {
    w.send(to, move || {
        let w = context::current().expect("gossamer: runtime message outside a worker");
        origin::retired(w, origin);
    });
}

/// The value of the property whose origin is at `origin` was seen in
/// `cell` on trustee `t` (told with a relayed result). `create`: the
/// origin itself told it (and will ask for the route back); a record left
/// behind only updates a route this thread keeps.
pub(super) fn note(origin: usize, t: usize, cell: *mut Header, create: bool) {
    ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        match m.get_mut(&origin) {
            Some(e) => e.next = Some((t, cell)),
            None if create => {
                m.insert(
                    origin,
                    Entry { via: None, next: Some((t, cell)), outstanding: 0, settled: false, retiring: None },
                );
                ACTIVE.set(true);
            }
            None => {}
        }
    });
}

/// The origin's trustee `from` asks for the route to `origin` back: no
/// trust to the property is left; done once this thread's requests are.
pub(super) fn retire(w: &Worker, from: usize, origin: usize) {
    let now = ROUTES.with(|m| {
        let mut m = m.borrow_mut();
        match m.get_mut(&origin) {
            Some(e) if e.outstanding != 0 => {
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
    let key = origin.addr();
    let Some(via) = issue(key) else { return Err((req, reply)) };
    let (t, cell) = via.map_or((t, origin), |(t, c)| (t, c.cast()));
    let counted: Then<R::Out> = Box::new(move |w, r| {
        done(w, key);
        reply.finish(w, r)
    });
    route(w, t, cell, req, Reply::Then(counted), false);
    Ok(())
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
    let key = origin.addr();
    let Some(via) = issue(key) else { unreachable!("gossamer: a route vanished under its caller") };
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
    // Another thread: not completed inline.
    let wait = Waiter::<U>::new(w.current_fiber());
    let data = wait.as_data();
    let counted: Then<U> = Box::new(move |w, r| {
        done(w, key);
        Reply::Wake(data).finish(w, r)
    });
    route(w, t, cell, Closure::new(f), Reply::Then(counted), false);
    wait.wait()
}
