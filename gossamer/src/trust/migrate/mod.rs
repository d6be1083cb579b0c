//! Moving a property to another trustee while the program runs
//! ([`Trust::migrate_to`](crate::Trust::migrate_to)): the move itself, and
//! the relaying of requests to wherever the value is.
//!
//! # Protocol
//!
//! A trust names its property by the cell it was entrusted in and that
//! cell's trustee (its *origin*), and never changes. A client thread sends
//! its requests to the origin until the origin tells it where the value
//! is; from then on it sends them to that cell directly (a *route*), and
//! it changes its route only when none of its requests to the property is
//! outstanding.
//!
//! * **Relaying.** Once the value has moved, the origin cell is a
//!   forwarding record: it names the trustee and cell that hold the value
//!   (see `runtime::property`). The origin trustee sends every request that
//!   reaches it on to that cell as a request of its own, and answers the
//!   client at once with a token ([`Relayed`], carried where a panic would
//!   be); the holder's answer comes back to the origin, which sends the
//!   result to the client's thread in a message with the token, and with
//!   where the value is (a *hint*). The client hands the result to the
//!   waiting fiber or the `then` callback, whichever of the token and the
//!   result arrives last. The origin's own thread (its fibers, outside
//!   submissions it runs) sends through the same record, and needs no
//!   route: it already reaches the holder in one step. When the value is
//!   in a cell of the origin's own thread (it came back), the origin runs
//!   the request at once.
//! * **Routes** (`direct`). A hint from the origin gives the client thread
//!   a route entry for the property: its requests from then on are
//!   counted (issued, not yet completed) and go the way the entry says,
//!   first still through the origin. A route changes to the latest hint
//!   only when a request is issued with the count at zero, after at least
//!   one counted request completed (so every request sent before the entry
//!   existed has run too). A request completes only after it ran, so
//!   nothing the thread sent earlier is still on its way and none can be
//!   overtaken: each request runs after all of the thread's earlier ones,
//!   stricter than per fiber. A route may be stale: the value moved on.
//!   Then the cell it names is a forwarding record too (a hand-over leaves
//!   one behind), which relays, in arrival order, to the next cell, and
//!   sends its own hint back, so the client catches up at its next quiet
//!   moment. Records relay to records too (when the next cell has moved on
//!   in its turn); a record's hint then reaches the thread of the record
//!   before it, and changes only a route that leads to the record that
//!   sent it (`direct::note`). Without the count, a request bounced from a stale cell could
//!   run behind later ones of the same thread sent by a newer route; with
//!   it, a thread's requests follow one path at a time, every hop of which
//!   is a FIFO lane. (Sequence numbers checked by the holder would work
//!   too, but every holder would then keep per-client state and hold
//!   requests back itself; the count stays on the client's thread.) A thread without a route, or for a
//!   property that never moved, pays one thread-local test (`direct::active`).
//! * **Per-client order.** A client's requests follow one path at a time
//!   (above), through FIFO lanes only: they run in issue order.
//! * **A move** is a request to the origin. The first one runs there
//!   between two closures: the value goes into a new cell on the target,
//!   and the origin becomes a record. A later one is a *hand-over*: the
//!   origin stops relaying (requests wait in the record, in order) and
//!   sends the holder a hand-over request behind everything it relayed to
//!   it; the holder runs it after them (and after whatever clients sent it
//!   directly before it), moves the value into a new cell on the target,
//!   and its own cell becomes a forwarding record to the new one; the
//!   origin then relays to the new cell, the waiting requests first.
//! * **Exactly once.** A request runs only where the value is; a record
//!   never runs one, and relays each once.
//! * **Lifetimes** (`origin`). The origin keeps the refcount rules of every
//!   cell: the trusts hold their ids there, and it is released after a
//!   fence round once its set is empty (a hand-over holds an id of its own
//!   meanwhile). Client routes and the records left behind are named
//!   outside those rules, so the release first *retires* them: once no
//!   relayed request is out, the origin asks every thread it gave a hint
//!   to for its route back (behind every hint it sent there); the thread
//!   drops its entry once its counted requests have completed (none is
//!   left on any path) and says so. Then the origin frees the records left
//!   behind and its own memory, and toggles off the id it holds in the
//!   holder's cell (sent behind every request it relayed there), which is
//!   then dropped, once, after its own fence round. As the origin's memory
//!   is freed last, an entry keyed by its address never outlives it.
//!   While the property lives, the same round frees the records left
//!   behind once a few have gathered (a *sweep*, see `origin`): the
//!   clients give their routes back and send through the origin until it
//!   hands them new ones, so a property that keeps moving keeps a bounded
//!   number of cells.
//!
//! The common path pays nothing: a trustee already tests one word of the
//! cell (`blocked`) before each closure, and a record is one more bit of
//! that word. Only the requests of moved properties take the slow path.
//!
//! A property may also move by itself, to where its requests come from
//! (`follow`, [`MigrationPolicy::Follow`](crate::MigrationPolicy)): another
//! bit of the same word makes its holder count each request, and a move it
//! asks for is an ordinary one, started on the origin's thread.
//!
//! Within one process only: a property moves only between trustees of its
//! process. Requests from other processes (`apply_with` and its forms)
//! follow it as well: the origin relays them like any other, and sends
//! each result back to the client's thread in a message of its own, with
//! the hint (`far`). Such a client keeps routes too, keyed by the
//! property's process as well as its origin's address (`direct::Key`):
//! they name cells of the property's process, which its requests reach
//! there as any request from another process does, and the protocol's
//! messages (hints, asking for a route back, giving it back) cross as
//! runtime messages, each on the lane between the two threads, so they
//! keep the order the rules above need. A launch (`launch` on a
//! `Trust<Latch<T>>`) follows it too: its start is routed from the origin
//! like a request, and the launched fiber runs where the value is
//! (`launch`). A thread that keeps a route sends the start (to the origin,
//! whatever its route) only once the requests its route carries have
//! completed, and holds the requests it issues meanwhile behind it
//! (`direct::after_routed`): the start then reaches the value after them,
//! as it would on a property that never moved.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::thread;

pub(crate) mod direct;
pub(crate) mod far;
pub(crate) mod follow;
mod follow_control;
pub(crate) mod launch;
#[cfg(all(test, loom))]
mod loom_chain;
#[cfg(all(test, loom))]
mod loom_detour;
#[cfg(all(test, loom))]
mod loom_launch;
#[cfg(all(test, loom))]
mod loom_model;
pub(crate) mod origin;
#[cfg(all(test, not(loom)))]
mod tests;
pub(crate) mod transit;

use super::{property_shim, Transferable, Waiter};
use crate::channel::record::{take_value, Responder};
use crate::channel::slot::Word;
use crate::runtime::context;
use crate::runtime::property::{self, Header, PropertyCell, Route, SendPtr};
use crate::runtime::worker::{Call, Completion, Worker};

/// A callback for the result of a request sent on.
pub(crate) type Then<U> = Box<dyn FnOnce(&Worker, thread::Result<U>)>;

/// Where the result of a request goes on the issuing thread.
pub(crate) enum Reply<U> {
    /// To a fiber suspended in `Waiter::wait` (the waiter's address).
    Wake(*const ()),
    /// To a callback.
    Then(Then<U>),
}

impl<U: Send + 'static> Reply<U> {
    fn finish(self, w: &Worker, r: thread::Result<U>) {
        match self {
            // SAFETY: `Wake` holds a waiter whose fiber is suspended until
            // this result, which completes it once.
            Reply::Wake(data) => unsafe { Waiter::<U>::complete(w, data, r) },
            Reply::Then(g) => g(w, r),
        }
    }
}

/// The origin's answer to a request it relays: the result follows in a
/// message that carries the same token (to another process too, see
/// `far`).
pub(crate) use crate::channel::record::Relayed;

/// True when `r` is the origin's answer to a relayed request.
#[inline]
pub(crate) fn is_relayed<U>(r: &thread::Result<U>) -> bool {
    matches!(r, Err(p) if p.is::<Relayed>())
}

thread_local! {
    /// Per token of a relayed request: its `Reply` if the answer came
    /// first, its result if the result came first.
    static RELAYS: RefCell<HashMap<u64, Box<dyn Any>>> = RefCell::new(HashMap::new());
}

/// On the issuing thread: the origin's answer `r` (a [`Relayed`]) to a
/// request whose result goes to `reply`.
pub(crate) fn await_relayed<U: Send + 'static>(w: &Worker, r: thread::Result<U>, reply: Reply<U>) {
    let token = match r {
        Err(p) => match p.downcast::<Relayed>() {
            Ok(t) => t.0,
            Err(p) => return reply.finish(w, Err(p)),
        },
        Ok(u) => return reply.finish(w, Ok(u)),
    };
    let early = RELAYS.with(|m| m.borrow_mut().remove(&token));
    match early {
        Some(result) => match result.downcast::<thread::Result<U>>() {
            Ok(result) => reply.finish(w, *result),
            Err(_) => unreachable!("gossamer: a relayed result of another type"),
        },
        None => RELAYS.with(|m| {
            m.borrow_mut().insert(token, Box::new(reply));
        }),
    }
}

/// Where a relaying record saw the value when it sent a result back (see
/// `direct::note`).
#[derive(Clone, Copy)]
pub(super) struct Hint {
    /// The property's origin address.
    pub(super) origin: usize,
    /// The trustee and cell the record forwards to.
    pub(super) at: (usize, SendPtr<*mut Header>),
    /// The record that tells it: its trustee and cell.
    pub(super) from: (usize, SendPtr<*mut Header>),
    /// The origin itself tells it (and will ask for the route back).
    pub(super) create: bool,
}

/// On the issuing thread: the result of the relayed request `token`.
fn relayed_result<U: Send + 'static>(w: &Worker, token: u64, r: thread::Result<U>, hint: Option<Hint>) {
    if let Some(hint) = hint {
        direct::note(w, hint);
    }
    let waiting = RELAYS.with(|m| m.borrow_mut().remove(&token));
    match waiting {
        Some(reply) => match reply.downcast::<Reply<U>>() {
            Ok(reply) => reply.finish(w, r),
            Err(_) => unreachable!("gossamer: a relayed reply of another type"),
        },
        None => RELAYS.with(|m| {
            m.borrow_mut().insert(token, Box::new(r));
        }),
    }
}

/// A request that can be routed to wherever the property's value is.
pub(crate) trait Request<T: 'static>: Send + Sized + 'static {
    type Out: Transferable;
    /// True for the start of a launch, which may reach a value lent to
    /// other launches (it waits for the latch, in turn).
    const WAITS_FOR_LATCH: bool = false;
    /// Queues the request for `cell` on trustee `t` (not this thread).
    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<T>, c: Completion);
    /// Runs the request on `cell`, whose value is here and reachable.
    fn run(self, w: &Worker, cell: *mut PropertyCell<T>) -> thread::Result<Self::Out>;
}

/// A closure (`apply` and its forms).
///
/// Requests routed here stay in the process of the property (a property
/// moves only within its process, and only its origin relays): they are
/// queued as `Call::Copied`, which checks exactly that.
pub(crate) struct Closure<F, U>(pub(crate) F, PhantomData<fn() -> U>);

impl<F, U> Closure<F, U> {
    pub(crate) fn new(f: F) -> Self {
        Closure(f, PhantomData)
    }
}

impl<T, F, U> Request<T> for Closure<F, U>
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Transferable,
{
    type Out = U;

    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<T>, c: Completion) {
        w.enqueue(t, property_shim::<T, F, U>, cell.cast(), self.0, c, Call::Copied);
    }

    fn run(self, w: &Worker, cell: *mut PropertyCell<T>) -> thread::Result<U> {
        let _g = w.enter_delegated();
        // SAFETY: per the trait, the value is here, on this thread, and
        // reachable; no closure runs beside this one (the callers run it at
        // its turn, or deferred).
        catch_unwind(AssertUnwindSafe(|| (self.0)(unsafe { &mut *(*cell).value.get() })))
    }
}

/// The hand-over of the value to trustee `.0`, for the property whose
/// origin is at `.1` (see the module documentation); answers the new
/// cell's address and the id the origin holds there (the origin registers
/// it there).
struct HandOver(usize, usize);

impl<T: Send + 'static> Request<T> for HandOver {
    type Out = (usize, u64);

    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<T>, c: Completion) {
        w.enqueue(t, hand_over_shim::<T>, cell.cast(), (self.0, self.1), c, Call::Copied);
    }

    fn run(self, w: &Worker, cell: *mut PropertyCell<T>) -> thread::Result<(usize, u64)> {
        // SAFETY: per the trait; the origin sends nothing to this cell after
        // the hand-over, and what clients still send here is forwarded.
        let (new, id) = unsafe { move_value(w, cell, self.0) };
        let h = cell.cast::<Header>();
        // SAFETY: as above: its value moved out; it forwards from now on,
        // holding no id in the new cell (the origin frees it, see `origin`).
        drop(unsafe { property::set_forward(h, self.0, new, 0) });
        origin::record_left(h, self.1);
        Ok((new.expose_provenance(), id))
    }
}

/// Serves a hand-over on the holder.
unsafe fn hand_over_shim<T: Send + 'static>(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `HandOver::enqueue` with two `usize`s.
    let (to, origin): (usize, usize) = unsafe { take_value(env as *const Word) };
    let w = context::current().expect("gossamer: a request served outside a worker");
    let r = run_here(w, prop.cast::<PropertyCell<T>>(), HandOver(to, origin));
    out.put_any::<(usize, u64)>(r);
}

/// Where a request goes from this thread.
enum Resolved<T> {
    /// To the cell at `.1` on trustee `.0`.
    At(usize, *mut PropertyCell<T>),
    /// Nowhere yet: the record at `.0`, on this thread, hands over.
    Held(*mut PropertyCell<T>),
}

/// Follows the records this thread holds, from `cell` on `t`.
fn resolve<T: 'static>(w: &Worker, mut t: usize, mut cell: *mut PropertyCell<T>) -> Resolved<T> {
    while t == w.index {
        // SAFETY: a cell of this thread, kept alive by the request that
        // names it (see the module documentation).
        match unsafe { property::route(cell.cast()) } {
            Route::Forward(t2, c2) => (t, cell) = (t2, c2.cast()),
            Route::Draining => return Resolved::Held(cell),
            Route::Here => break,
        }
    }
    Resolved::At(t, cell)
}

/// Runs `req` on `cell`, a cell of this thread that holds the value.
fn run_here<T: 'static, R: Request<T>>(w: &Worker, cell: *mut PropertyCell<T>, req: R) -> thread::Result<R::Out> {
    // SAFETY: on the cell's trustee; the cell lives (see `resolve`).
    match unsafe { property::check_reachable(cell.cast()) } {
        Ok(()) => req.run(w, cell),
        Err(why) if R::WAITS_FOR_LATCH && why == property::LENT => req.run(w, cell),
        Err(why) => Err(Box::new(why)),
    }
}

/// Sends `req` to the property at `cell` on trustee `t`, through the
/// records this thread holds, and hands its result to `reply` on this
/// thread. `now`: the caller runs at this request's turn (no closure of
/// this thread is running), so a value found here is reached at once;
/// otherwise such a request waits in the deferred queue.
pub(crate) fn route<T: 'static, R: Request<T>>(
    w: &Worker,
    t: usize,
    cell: *mut PropertyCell<T>,
    req: R,
    reply: Reply<R::Out>,
    now: bool,
) {
    let (t, cell) = match resolve(w, t, cell) {
        Resolved::At(t, cell) => (t, cell),
        Resolved::Held(rec) => {
            let rec = SendPtr(rec);
            let retry = Box::new(move || {
                let rec = rec;
                let w = context::current().expect("gossamer: held request outside its worker");
                route(w, w.index, rec.0, req, reply, false);
            });
            // SAFETY: a record of this thread that hands over now.
            return unsafe { property::hold(rec.0.cast(), retry) };
        }
    };
    if t == w.index {
        if now || !w.must_defer() {
            let r = run_here(w, cell, req);
            return reply.finish(w, r);
        }
        let cell = SendPtr(cell);
        w.defer(Box::new(move || {
            let cell = cell;
            let w = context::current().expect("gossamer: deferred request outside its worker");
            // Moved meanwhile? Follow it.
            route(w, w.index, cell.0, req, reply, true);
        }));
        return;
    }
    match reply {
        Reply::Wake(data) => req.enqueue(w, t, cell, Completion { run: complete_route::<R::Out>, data }),
        Reply::Then(g) => {
            req.enqueue(w, t, cell, Completion { run: complete_route::<R::Out>, data: std::ptr::null() });
            w.store_then(t, g);
        }
    }
}

/// Runs `req` for the property at `cell` on trustee `t` (a cell of this
/// thread) and waits for its result, from a fiber that may block.
pub(crate) fn call<T: 'static, R: Request<T>>(
    w: &'static Worker,
    t: usize,
    cell: *mut PropertyCell<T>,
    req: R,
) -> R::Out {
    w.check_may_block();
    // Earlier requests of this thread come first.
    w.run_deferred();
    if let Resolved::At(t2, c2) = resolve(w, t, cell) {
        if t2 == w.index {
            let r = run_here(w, c2, req);
            w.run_deferred();
            return r.unwrap_or_else(|p| resume_unwind(p));
        }
    }
    // Held here, or on another thread: `route` does not complete it inline.
    let wait = Waiter::<R::Out>::new(w.current_fiber());
    route(w, t, cell, req, Reply::Wake(wait.as_data()), false);
    wait.wait()
}

/// The completion of a request sent on by `route`.
unsafe fn complete_route<U: Transferable>(w: &Worker, lane: usize, data: *const (), rec: *const Word) {
    // SAFETY: `route` queued a request whose result is a `U`, and stored a
    // `Then<U>` for it exactly when `data` is null.
    let (r, reply) = unsafe {
        let r = w.take_result::<U>(lane, rec);
        let reply = if data.is_null() { Reply::Then(w.take_then::<Then<U>>(lane)) } else { Reply::Wake(data) };
        (r, reply)
    };
    if is_relayed(&r) {
        // A request to a first cell (from `call`) that relays it.
        return await_relayed(w, r, reply);
    }
    reply.finish(w, r)
}

/// What the origin record `h` (moved) answers to `req` from the client
/// it serves now: the result, if the value is in another cell of this
/// thread (run at once: this trustee runs one closure at a time), else a
/// [`Relayed`] token, the request relayed (see the module documentation).
///
/// # Safety
/// `h` must be a live, moved header on its trustee thread, which serves a
/// client's batch now, with no closure on the property running.
pub(crate) unsafe fn relay<T: 'static, R: Request<T>>(h: *mut Header, req: R) -> thread::Result<R::Out> {
    let w = context::current().expect("gossamer: a request served outside a worker");
    // SAFETY: per the contract.
    if let Route::Forward(t, cell) = unsafe { property::route(h) } {
        if t == w.index {
            return run_here(w, cell.cast(), req);
        }
    }
    let client = w.batch_client().expect("gossamer: a moved property relayed a request outside a client's batch");
    // A client in another process gets the result in a runtime message of
    // its own (see `far`).
    let far = !w.shared.is_local(client);
    let token = w.new_id();
    #[cfg(all(test, not(loom)))]
    tests::RELAYED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    w.count_relayed();
    let key = origin::key_of(h);
    if let Some((_, true)) = key {
        origin::relay_started(h);
    }
    let rec = SendPtr(h);
    let back: Then<R::Out> = Box::new(move |w, r| {
        let rec = rec;
        let hint = hint_for(w, rec.0, key, client);
        if far {
            far::deliver(w, client, token, r, hint);
        } else {
            w.send(client, move || {
                let w = context::current().expect("gossamer: runtime message outside a worker");
                relayed_result(w, token, r, hint);
            });
        }
        if let Some((_, true)) = key {
            origin::relay_ended(w, rec.0);
        }
    });
    let me = w.index;
    route(w, me, h.cast::<PropertyCell<T>>(), req, Reply::Then(back), false);
    Err(Box::new(Relayed(token)))
}

/// Where the record `rec` (of this thread) sees the value now, for
/// `client`, with the result of a request it relayed (`key`: the record's
/// origin and whether it is the origin itself, which then counts `client`
/// among the threads it gave a route).
fn hint_for(w: &Worker, rec: *mut Header, key: Option<(usize, bool)>, client: usize) -> Option<Hint> {
    let (origin, is_origin) = key?;
    // SAFETY: the record lives until every relayed request it sent on is
    // answered (see `origin`), on its trustee.
    match unsafe { property::route(rec) } {
        Route::Forward(t, cell) => {
            if is_origin {
                origin::routed(rec, client);
            }
            Some(Hint { origin, at: (t, SendPtr(cell)), from: (w.index, SendPtr(rec)), create: is_origin })
        }
        _ => None,
    }
}

// ----- moves -----------------------------------------------------------

/// Moves the property whose origin is `origin` on trustee `a` to trustee
/// `to`, and waits until it is there, from a fiber.
pub(crate) fn migrate<T: Send + 'static>(w: &'static Worker, a: usize, origin: *mut PropertyCell<T>, to: usize) {
    w.check_may_block();
    assert!(to < w.shared.n, "gossamer: migrate_to: no trustee {to} (the runtime has {})", w.shared.n);
    assert!(
        w.shared.is_local(to),
        "gossamer: migrate_to: trustee {to} is in another process; a property moves only between trustees of its \
         own process"
    );
    if w.index == a {
        w.run_deferred();
        // SAFETY: the origin is a cell of this thread, kept by the caller's
        // trust; no closure runs (checked above).
        unsafe { start_move(w, origin, to) }.unwrap_or_else(|why| panic!("{why}"));
    } else {
        let wait = Waiter::<()>::new(w.current_fiber());
        let c = Completion { run: complete_move, data: wait.as_data() };
        w.enqueue(a, move_shim::<T>, origin.cast(), to, c, Call::Copied);
        wait.wait();
    }
    // Done when a request sent now runs: it waits while the value is
    // handed over.
    call(w, a, origin, Closure::new(|_: &mut T| ()));
}

unsafe fn complete_move(w: &Worker, lane: usize, data: *const (), rec: *const Word) {
    // SAFETY: `migrate` queued a move, which answers `()`, for the waiter
    // at `data`.
    unsafe { Waiter::<()>::complete(w, data, w.take_result::<()>(lane, rec)) }
}

/// Serves a move on the origin's trustee.
unsafe fn move_shim<T: Send + 'static>(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `migrate` with a `usize`.
    let to: usize = unsafe { take_value(env as *const Word) };
    let w = context::current().expect("gossamer: a request served outside a worker");
    // SAFETY: `prop` is a live origin cell of this trustee (a request names
    // it), served between closures.
    let r = match unsafe { start_move(w, prop.cast::<PropertyCell<T>>(), to) } {
        Ok(()) => Ok(()),
        Err(why) => Err(Box::new(why) as Box<dyn Any + Send>),
    };
    out.put_any::<()>(r);
}

/// Starts moving the property at `origin` (a cell of this thread) to
/// `to`: at once if the value is here, by a hand-over if it is elsewhere,
/// after the current hand-over if one runs (see the module
/// documentation). `Err` if the value may not be moved now.
///
/// # Safety
/// `origin` must be a live origin cell of this thread, no closure on the
/// property running.
unsafe fn start_move<T: Send + 'static>(
    w: &Worker,
    origin: *mut PropertyCell<T>,
    to: usize,
) -> Result<(), &'static str> {
    // Before anything moves (a call of `migrate_to` or the Follow policy):
    // the runtime's duties for moved properties.
    crate::runtime::migrate_hooks::HOOKS.get_or_init(|| crate::runtime::migrate_hooks::Hooks {
        release_origin: self::origin::release,
        drop_left: transit::drop_left,
    });
    let h = origin.cast::<Header>();
    // SAFETY: per the contract.
    match unsafe { property::route(h) } {
        Route::Draining => {
            let origin = SendPtr(origin);
            let later = Box::new(move || {
                let origin = origin;
                let w = context::current().expect("gossamer: held request outside its worker");
                // SAFETY: the origin lives (the hand-over's id), between closures.
                if let Err(why) = unsafe { start_move(w, origin.0, to) } {
                    tracing::error!("gossamer: a queued migrate_to failed: {why}");
                }
            });
            // SAFETY: a record of this thread that hands over now.
            unsafe { property::hold(h, later) };
            Ok(())
        }
        Route::Here => {
            // SAFETY: as above.
            unsafe { property::check_reachable(h) }?;
            if to != w.index {
                // SAFETY: reachable, here, between closures.
                let (cell, id) = unsafe { move_value(w, origin, to) };
                register_on(w, to, cell);
                origin::created(h);
                // SAFETY: its value moved out just now; nothing was held.
                drop(unsafe { property::set_forward(h, to, cell, id) });
            }
            Ok(())
        }
        Route::Forward(x, _) if x == to => Ok(()),
        // A launch holds or awaits the latch where the value is.
        Route::Forward(..) if launch::out(h.addr()) => Err(property::LENT),
        Route::Forward(x, holder) => {
            // SAFETY: a moved origin of this thread.
            let before = unsafe { property::forward_of(h) };
            // SAFETY: as above.
            unsafe { property::set_draining(h) };
            // The hand-over keeps the origin alive until it ends.
            let pin = w.new_id();
            // SAFETY: as above.
            unsafe { property::toggle(w, h, pin) };
            let origin = SendPtr(origin);
            let done: Then<(usize, u64)> = Box::new(move |w, r| {
                let origin = origin;
                let h = origin.0.cast::<Header>();
                let held = match r {
                    Ok((addr, id)) => {
                        let cell = std::ptr::with_exposed_provenance_mut::<Header>(addr);
                        register_on(w, to, cell);
                        origin::left_behind(w, h, x, holder);
                        // SAFETY: the origin lives (the pin); on its trustee;
                        // the new cell was made by `move_value` for `T`.
                        unsafe { property::set_forward(h, to, cell, id) }
                    }
                    Err(p) => {
                        // The holder could not hand over (shutdown, or a
                        // launch holds the latch there): the value stays
                        // where it was.
                        crate::error::drop_payload(p);
                        // SAFETY: as above.
                        unsafe { property::set_forward(h, before.0, before.1, before.2) }
                    }
                };
                for retry in held {
                    retry();
                }
                // SAFETY: as above.
                unsafe { property::toggle(w, h, pin) };
            });
            let key = h.addr();
            route(w, x, holder.cast::<PropertyCell<T>>(), HandOver(to, key), Reply::Then(done), false);
            Ok(())
        }
    }
}

/// Moves the value of `cell` (here, reachable) into a new cell; returns it
/// and the trust id it holds for the origin; `to` is the trustee the new
/// cell is for. `cell` is left without a
/// value: the caller marks or frees it. The origin registers the new cell
/// (`register_on`), so that the registration comes before anything else
/// it sends there.
///
/// # Safety
/// `cell` must be a live cell of this thread whose value is reachable, no
/// closure on it running.
unsafe fn move_value<T: Send + 'static>(w: &Worker, cell: *mut PropertyCell<T>, to: usize) -> (*mut Header, u64) {
    // SAFETY: per the contract; taken once (the caller makes sure nothing
    // reaches or drops it there again).
    let value = unsafe { ManuallyDrop::take(&mut *(*cell).value.get()) };
    let id = w.new_id();
    let new = PropertyCell::new_boxed(value, id).cast::<Header>();
    // SAFETY: per the contract; `new` is not published yet.
    unsafe { follow::carry(w, cell.cast(), new, to) };
    transit::departed(w.shared.id, new);
    (new, id)
}

/// Registers the fresh cell `new` with trustee `to`, from the origin's
/// thread: ahead of every request the origin relays there.
fn register_on(w: &Worker, to: usize, new: *mut Header) {
    let new = SendPtr(new);
    w.send(to, move || {
        let new = new;
        let w = context::current().expect("gossamer: runtime message outside a worker");
        // SAFETY: a fresh cell, registered once, on its trustee.
        unsafe { property::register(w, new.0) };
        transit::arrived(new.0);
    });
}
