//! The bookkeeping of a moved property on the threads that hold its
//! records: which client threads the origin gave a route to, which cells
//! were left behind as forwarding records by hand-overs, how many relayed
//! requests are still out, and the retirement that ends it all once the
//! last trust is gone (see the module documentation of `trust::migrate`).
//!
//! **Sweeps.** A property that keeps moving would leave one record per
//! hand-over until its last trust goes. So once [`SWEEP_AT`] records are
//! left, the origin runs the retirement round early, for those records
//! only: it asks every client thread it gave a route to for that route
//! back, and once all have answered (each after its requests sent by the
//! route completed) frees the records that were left when the round
//! began. Nothing names them then: no client keeps a route (the routes
//! the origin hands out meanwhile name the holder of their time, never an
//! older cell), the origin and the newer records name only newer cells,
//! and a record's own hint travels with the result it relays, so none
//! arrives after the route it updates is gone. A record's hint updates
//! only a route that leads to that record (`direct::note`): a route given
//! after the round began leads to no record of the round, so a hint that
//! names one (from a record that relayed a request for another record of
//! the same thread) never reaches it. A client without a route sends
//! through the origin again until it is given a new one.
//!
//! Everything here runs on the thread that owns the record in question;
//! the maps are thread-local.

use std::cell::RefCell;
use std::collections::HashMap;

use super::direct;
use crate::runtime::context;
use crate::runtime::property::{self, Header, Route, SendPtr};
use crate::runtime::worker::Worker;

/// A moved property, on its origin's thread.
struct Origin {
    /// The origin cell.
    h: *mut Header,
    /// Client threads that were given a route (and may keep one).
    clients: Vec<usize>,
    /// Cells left behind by hand-overs: trustee, cell (forwarding records).
    stale: Vec<(usize, SendPtr<*mut Header>)>,
    /// Relayed requests whose result has not been sent back yet.
    relays: u32,
    /// The last trust is gone: retire once `relays` is zero.
    releasing: bool,
    /// Retirements asked for and not yet acknowledged.
    awaiting: Option<usize>,
    /// The records a sweep frees once `awaiting` reaches zero (`None`:
    /// the round under way, if any, is the last one).
    sweeping: Option<Vec<(usize, SendPtr<*mut Header>)>>,
}

/// Records left behind by hand-overs that start a sweep.
pub(super) const SWEEP_AT: usize = 2;

thread_local! {
    /// Per origin cell address (of this thread).
    static ORIGINS: RefCell<HashMap<usize, Origin>> = RefCell::new(HashMap::new());
    /// Per forwarding record left by a hand-over on this thread: the
    /// address of its origin.
    static STALE: RefCell<HashMap<usize, usize>> = RefCell::new(HashMap::new());
}

/// The origin `h` (of this thread) moved for the first time.
pub(super) fn created(h: *mut Header) {
    ORIGINS.with(|m| {
        m.borrow_mut().entry(h.addr()).or_insert(Origin {
            h,
            clients: Vec::new(),
            stale: Vec::new(),
            relays: 0,
            releasing: false,
            awaiting: None,
            sweeping: None,
        });
    });
}

/// A hand-over from the cell `cell` on trustee `t` completed: that cell is
/// a forwarding record now, kept until a sweep or the origin `h` retires.
pub(super) fn left_behind(w: &Worker, h: *mut Header, t: usize, cell: *mut Header) {
    ORIGINS.with(|m| {
        if let Some(o) = m.borrow_mut().get_mut(&h.addr()) {
            o.stale.push((t, SendPtr(cell)));
        }
    });
    sweep(w, h.addr());
}

/// Starts a sweep of the records `origin` left behind, if it is due and
/// no round runs.
fn sweep(w: &Worker, origin: usize) {
    start_round(w, origin, true, |o| !o.releasing && o.stale.len() >= SWEEP_AT);
}

/// Starts a round of route retirement for `origin` if none runs and `due`
/// says it is due: a sweep of the records left so far (`sweep`), or the
/// last round.
fn start_round(w: &Worker, origin: usize, sweep: bool, due: impl Fn(&Origin) -> bool) {
    let clients = ORIGINS.with(|m| {
        let mut m = m.borrow_mut();
        let o = m.get_mut(&origin)?;
        if o.awaiting.is_some() || !due(o) {
            return None;
        }
        if sweep {
            o.sweeping = Some(std::mem::take(&mut o.stale));
        }
        o.awaiting = Some(o.clients.len());
        Some(std::mem::take(&mut o.clients))
    });
    if let Some(clients) = clients {
        ask_back(w, origin, &clients);
    }
}

/// Asks each of `clients` for its route to `origin` back; ends the round
/// at once if there is none.
fn ask_back(w: &Worker, origin: usize, clients: &[usize]) {
    let me = w.index;
    for &c in clients {
        if !w.shared.is_local(c) {
            // A thread of another process (see `far`), asked on the lane
            // that carried every hint this thread sent it.
            super::far::ask_back(w, c, origin);
            continue;
        }
        w.send(c, move || {
            let w = context::current().expect("gossamer: runtime message outside a worker");
            direct::retire(w, me, origin);
        });
    }
    if clients.is_empty() {
        round_done(w, origin);
    }
}

/// On the holder: the cell `cell` became a forwarding record of the
/// property whose origin is at `origin`.
pub(super) fn record_left(cell: *mut Header, origin: usize) {
    STALE.with(|m| m.borrow_mut().insert(cell.addr(), origin));
}

/// What the record `h` of this thread is: `Some((origin, true))` for an
/// origin, `Some((origin, false))` for a cell a hand-over left behind.
pub(super) fn key_of(h: *mut Header) -> Option<(usize, bool)> {
    if ORIGINS.with(|m| m.borrow().contains_key(&h.addr())) {
        return Some((h.addr(), true));
    }
    STALE.with(|m| m.borrow().get(&h.addr()).map(|&o| (o, false)))
}

/// The origin at `origin` (of this thread) if it is still a moved origin,
/// not being released, that forwards to `cell` on trustee `t` under the
/// trust id `id`: then it is the one whose holder asks for a move (ids
/// are never reused), and the caller may move it.
pub(super) fn holding(origin: usize, t: usize, cell: *mut Header, id: u64) -> Option<*mut Header> {
    let h = ORIGINS.with(|m| m.borrow().get(&origin).filter(|o| !o.releasing).map(|o| o.h))?;
    // SAFETY: listed, so live (an origin leaves the list before it is
    // freed), on this thread.
    match unsafe { property::route(h) } {
        // SAFETY: as above; moved.
        Route::Forward(t2, c2) if (t2, c2) == (t, cell) && unsafe { property::forward_of(h) }.2 == id => Some(h),
        _ => None,
    }
}

/// The origin `h` relays one more request.
pub(super) fn relay_started(h: *mut Header) {
    ORIGINS.with(|m| {
        if let Some(o) = m.borrow_mut().get_mut(&h.addr()) {
            o.relays += 1;
        }
    });
}

/// The origin `h` gives `client` a route with the result it sends back.
pub(super) fn routed(h: *mut Header, client: usize) {
    ORIGINS.with(|m| {
        if let Some(o) = m.borrow_mut().get_mut(&h.addr()) {
            if !o.clients.contains(&client) {
                o.clients.push(client);
            }
        }
    });
}

/// The origin `h` sent back the result of a relayed request (after it,
/// on the same lane, any retirement it asks for).
pub(super) fn relay_ended(w: &Worker, h: *mut Header) {
    ORIGINS.with(|m| {
        if let Some(o) = m.borrow_mut().get_mut(&h.addr()) {
            o.relays -= 1;
        }
    });
    retire(w, h.addr());
}

/// The origin `h` lost its last trust and its fence round completed:
/// asks every client thread that has a route to drop it once its requests
/// are done, then releases the records (see `finish`).
///
/// # Safety
/// `h` must be a live, doomed, moved origin of this thread, released here
/// only.
pub(crate) unsafe fn release(w: &Worker, h: *mut Header) {
    let known = ORIGINS.with(|m| match m.borrow_mut().get_mut(&h.addr()) {
        Some(o) => {
            o.releasing = true;
            true
        }
        None => false,
    });
    if !known {
        // SAFETY: per the contract.
        return unsafe { property::release_record(w, h) };
    }
    retire(w, h.addr());
}

/// Starts the retirement of `origin` if it is due.
fn retire(w: &Worker, origin: usize) {
    start_round(w, origin, false, |o| o.releasing && o.relays == 0);
}

/// On the origin's thread: whether the origin at `origin` waits for
/// client threads to give their routes back.
pub(super) fn awaits(origin: usize) -> bool {
    ORIGINS.with(|m| m.borrow().get(&origin).is_some_and(|o| o.awaiting.is_some_and(|n| n > 0)))
}

/// On the origin's thread: a client thread dropped its route to `origin`,
/// every request it sent by it done.
pub(super) fn retired(w: &Worker, origin: usize) {
    let last = ORIGINS.with(|m| {
        let mut m = m.borrow_mut();
        let Some(o) = m.get_mut(&origin) else { return false };
        let left = o.awaiting.as_mut().expect("gossamer: a route retired unasked");
        *left -= 1;
        *left == 0
    });
    if last {
        round_done(w, origin);
    }
}

/// Every client asked answered: frees the records of a sweep (then starts
/// what is due next), or, for the last round, everything.
fn round_done(w: &Worker, origin: usize) {
    let swept = ORIGINS.with(|m| {
        let mut m = m.borrow_mut();
        let o = m.get_mut(&origin)?;
        o.awaiting = None;
        o.sweeping.take()
    });
    let Some(records) = swept else { return finish(w, origin) };
    free_records(w, records);
    // The last trust went meanwhile, or more records were left.
    retire(w, origin);
    sweep(w, origin);
}

/// Frees forwarding records left by hand-overs, each on its trustee.
fn free_records(w: &Worker, records: Vec<(usize, SendPtr<*mut Header>)>) {
    for (t, cell) in records {
        w.send(t, move || {
            let cell = cell;
            let w = context::current().expect("gossamer: runtime message outside a worker");
            if w.cleaning.get() {
                return;
            }
            STALE.with(|m| m.borrow_mut().remove(&cell.0.addr()));
            // SAFETY: a record left by a hand-over, registered on this
            // thread; nothing names it any more: no client keeps a route
            // to it (all retired, their requests done), and the origin and
            // the newer records name only newer cells.
            unsafe { property::forget(w, cell.0) };
        });
    }
}

/// Frees the records of `origin`: the cells left behind, then the origin
/// itself (which lets the holder's cell go, see `property::release_record`).
fn finish(w: &Worker, origin: usize) {
    if w.cleaning.get() {
        // Shutdown frees every registered cell itself.
        return;
    }
    let Some(o) = ORIGINS.with(|m| m.borrow_mut().remove(&origin)) else { return };
    free_records(w, o.stale);
    // SAFETY: the origin, doomed and released once, here.
    unsafe { property::release_record(w, o.h) };
}
