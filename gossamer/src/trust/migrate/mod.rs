//! Moving a property to another trustee while the program runs
//! ([`Trust::migrate_to`](crate::Trust::migrate_to)): the move itself, and
//! the forwarding of requests that reach the property where it was.
//!
//! # Protocol
//!
//! A trust names its property by the cell it was entrusted in and that
//! cell's trustee (its *origin*), and never changes: every clone of it, on
//! any thread, sends every request to the origin. What changes is what the
//! origin does with them.
//!
//! * **The move** is a request like any other, routed as below to the
//!   trustee that holds the value, which runs it between two closures: it
//!   moves the value out of its cell into a new cell, marks the old cell a
//!   *forwarding record* (new trustee, new cell, and a trust id of its own
//!   in the new cell's id set; see `runtime::property`), and sends the new
//!   cell's registration to the new trustee. Requests that ran before it
//!   ran on the old trustee; none runs there after it.
//! * **A request that reaches a forwarding record** is not run: its
//!   closure is handed back to the issuing thread inside the response (a
//!   [`Redirect`], carried where a panic would be), and the issuing
//!   thread's completion sends it on to the new cell, with the same result
//!   handler (the waiting fiber, or the `then` callback). A record that
//!   belongs to the issuing thread itself is followed at once, without a
//!   message. After several moves a request follows the chain hop by hop.
//! * **Per-client order.** A thread's requests to one trustee travel in
//!   one FIFO lane and are answered in order, and the thread runs the
//!   completions of one lane in order. All requests of all trusts to a
//!   property start at the same origin, so two requests from one fiber
//!   reach every record of the chain in issue order, and the redirects
//!   send them on in that order again, into the next FIFO lane. No request
//!   ever takes a shorter road than one issued before it.
//! * **Exactly once.** A request runs only where the value is, and a
//!   record answers a request it does not run with a redirect, never with
//!   a result: each request runs once, wherever the value is when it
//!   arrives.
//! * **Lifetimes.** The old cell keeps the refcount rules of every cell:
//!   the trusts that name it hold their ids there, and it is released
//!   after a fence round once its set is empty. Released, it frees its
//!   memory and toggles its own id off in the new cell. A request sent on
//!   by a redirect is queued before the issuing thread answers the fence
//!   round of the old cell (its completion runs before that thread serves
//!   any later message of the old trustee), so it is in its lane to the new
//!   trustee before the new cell can be doomed; the value is dropped once,
//!   by the trustee that holds it when the last record and trust are gone.
//!
//! The common path pays nothing: a trustee already tests one word of the
//! cell (`blocked`) before each closure, and a forwarding record is one
//! more bit of that word. Only the requests of moved properties take the
//! slow path, and they pay a round trip (and a few allocations) per record
//! on another thread: a trust made before `k` moves pays up to `k` of them.
//! A trust does not learn the new place by itself, because a trust may be
//! shared by fibers with requests still on the old road, whose order a
//! shorter road would break. [`Trust::rebased`](crate::Trust::rebased)
//! makes one that starts at the cell that holds the value now: it is
//! answered after every earlier request of the calling fiber, so a fiber
//! that switches to it keeps its order.
//!
//! Within one process only: a property moves only between trustees of its
//! process, and a request that comes from another process, or a launched
//! closure (`launch` on a `Trust<Latch<T>>`), reaching a moved property is
//! refused with an error that says so.

use std::any::Any;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::thread;

use super::{property_shim, Transferable, Waiter};
use crate::channel::record::{take_value, Responder};
use crate::channel::slot::Word;
use crate::runtime::context;
use crate::runtime::property::{self, Header, PropertyCell, SendPtr};
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

impl<U: Transferable> Reply<U> {
    fn finish(self, w: &Worker, r: thread::Result<U>) {
        match self {
            // SAFETY: `Wake` holds a waiter whose fiber is suspended until
            // this result, which completes it once.
            Reply::Wake(data) => unsafe { Waiter::<U>::complete(w, data, r) },
            Reply::Then(g) => g(w, r),
        }
    }
}

/// A forwarding record's answer to a request it did not run: how to send
/// the request on, from the issuing thread.
pub(crate) struct Redirect<U> {
    resend: Resend<U>,
}

/// Sends a redirected request on, from the issuing thread.
type Resend<U> = Box<dyn FnOnce(&Worker, Reply<U>) + Send>;

/// True when `r` is a forwarding record's answer.
#[inline]
pub(crate) fn is_redirect<U: 'static>(r: &thread::Result<U>) -> bool {
    matches!(r, Err(p) if p.is::<Redirect<U>>())
}

/// Hands `r` to `reply`, or, for a redirect, sends the request on.
pub(crate) fn deliver<U: Transferable>(w: &Worker, r: thread::Result<U>, reply: Reply<U>) {
    match r {
        Err(p) if p.is::<Redirect<U>>() => match p.downcast::<Redirect<U>>() {
            Ok(rd) => (rd.resend)(w, reply),
            Err(_) => unreachable!("checked just now"),
        },
        r => reply.finish(w, r),
    }
}

/// A request that can be routed to wherever the property's value is.
pub(crate) trait Request<T: 'static>: Send + Sized + 'static {
    type Out: Transferable;
    /// Queues the request for `cell` on trustee `t` (not this thread).
    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<T>, c: Completion);
    /// Runs the request on `cell`, whose value is here and reachable.
    fn run(self, w: &Worker, cell: *mut PropertyCell<T>) -> thread::Result<Self::Out>;
}

/// A closure (`apply` and its forms).
///
/// Requests routed here stay in the process of the property's first cell
/// (a property moves only within its process, and only this process's
/// threads follow redirects): they are queued as `Call::Copied`, which
/// checks exactly that.
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

/// A move to trustee `to`.
pub(crate) struct MoveTo(pub(crate) usize);

impl<T: Send + 'static> Request<T> for MoveTo {
    type Out = ();

    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<T>, c: Completion) {
        w.enqueue(t, move_shim::<T>, cell.cast(), self.0, c, Call::Copied);
    }

    fn run(self, w: &Worker, cell: *mut PropertyCell<T>) -> thread::Result<()> {
        // SAFETY: per the trait.
        catch_unwind(AssertUnwindSafe(|| unsafe { move_here(w, cell, self.0) }))
    }
}

/// A new trust id `.0` in the set of the cell that holds the value; the
/// answer names that cell and its trustee (`Trust::rebased`).
pub(crate) struct Rebase(pub(crate) u64);

impl<T: Send + 'static> Request<T> for Rebase {
    type Out = (usize, usize);

    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<T>, c: Completion) {
        w.enqueue(t, rebase_shim::<T>, cell.cast(), self.0, c, Call::Copied);
    }

    fn run(self, w: &Worker, cell: *mut PropertyCell<T>) -> thread::Result<(usize, usize)> {
        // SAFETY: per the trait: a live cell of this thread, which has a
        // trust (the caller's reaches it through the records), so adding
        // an id never dooms it.
        unsafe { property::toggle(w, cell.cast(), self.0) };
        Ok((w.index, cell.expose_provenance()))
    }
}

/// Follows the forwarding records this thread holds, from `cell` on `t`.
fn resolve<T: 'static>(w: &Worker, mut t: usize, mut cell: *mut PropertyCell<T>) -> (usize, *mut PropertyCell<T>) {
    while t == w.index {
        // SAFETY: a cell of this thread, kept alive by the request that
        // names it (see the module documentation).
        match unsafe { property::forward(cell.cast()) } {
            Some((t2, c2)) => (t, cell) = (t2, c2.cast()),
            None => break,
        }
    }
    (t, cell)
}

/// Runs `req` on `cell`, a cell of this thread, now.
fn run_here<T: 'static, R: Request<T>>(w: &Worker, cell: *mut PropertyCell<T>, req: R) -> thread::Result<R::Out> {
    // SAFETY: on the cell's trustee; the cell lives (see `resolve`).
    match unsafe { property::check_reachable(cell.cast()) } {
        Ok(()) => req.run(w, cell),
        Err(why) => Err(Box::new(why)),
    }
}

/// Sends `req` to the property at `cell` on trustee `t`, following the
/// forwarding records on its way, and hands its result to `reply` on this
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
    let (t, cell) = resolve(w, t, cell);
    if t == w.index {
        if now || !w.must_defer() {
            let r = run_here(w, cell, req);
            return deliver(w, r, reply);
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

/// Runs `req` for the property at `cell` on trustee `t` and waits for its
/// result, from a fiber that may block.
pub(crate) fn call<T: 'static, R: Request<T>>(
    w: &'static Worker,
    t: usize,
    cell: *mut PropertyCell<T>,
    req: R,
) -> R::Out {
    w.check_may_block();
    let (t, cell) = resolve(w, t, cell);
    if t == w.index {
        // Earlier requests of this thread come first.
        w.run_deferred();
        let (t, cell) = resolve(w, t, cell);
        if t == w.index {
            let r = run_here(w, cell, req);
            w.run_deferred();
            return r.unwrap_or_else(|p| resume_unwind(p));
        }
        return call(w, t, cell, req);
    }
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
    deliver(w, r, reply)
}

/// The answer of a forwarding record (`h`, which has moved) to `req`.
///
/// # Safety
/// `h` must be a live header on its trustee thread.
pub(crate) unsafe fn redirect<T: 'static, R: Request<T>>(h: *const Header, req: R) -> Option<Box<dyn Any + Send>> {
    // SAFETY: per the contract.
    let (t, cell) = unsafe { property::forward(h) }?;
    let cell = SendPtr(cell.cast::<PropertyCell<T>>());
    Some(Box::new(Redirect::<R::Out> {
        resend: Box::new(move |w, reply| {
            let cell = cell;
            route(w, t, cell.0, req, reply, false)
        }),
    }))
}

/// Moves the value of `cell` (here, reachable) to a new cell on `to`.
///
/// # Safety
/// `cell` must be a live cell of this thread whose value is reachable, no
/// closure on it running.
unsafe fn move_here<T: Send + 'static>(w: &Worker, cell: *mut PropertyCell<T>, to: usize) {
    if to == w.index {
        return;
    }
    assert!(to < w.shared.n, "gossamer: migrate_to: no trustee {to} (the runtime has {})", w.shared.n);
    assert!(
        w.shared.is_local(to),
        "gossamer: migrate_to: trustee {to} is in another process; a property moves only between trustees of its \
         own process"
    );
    // SAFETY: per the contract; the value is taken once: the cell is
    // marked moved right after, so nothing reaches or drops it there again.
    let value = unsafe { ManuallyDrop::take(&mut *(*cell).value.get()) };
    let id = w.new_id();
    let new = PropertyCell::new_boxed(value, id);
    // SAFETY: as above.
    unsafe { property::mark_moved(cell.cast(), to, new.cast(), id) };
    let h = SendPtr(new.cast::<Header>());
    w.send(to, move || {
        let h = h;
        let w = context::current().expect("gossamer: runtime message outside a worker");
        // SAFETY: a fresh cell, registered once, on its trustee.
        unsafe { property::register(w, h.0) }
    });
}

/// Serves a `Rebase` on the trustee.
unsafe fn rebase_shim<T: Send + 'static>(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `Rebase::enqueue` with a `u64`.
    let id: u64 = unsafe { take_value(env as *const Word) };
    // SAFETY: `prop` is a live cell of this trustee (a request names it).
    if let Err(why) = unsafe { property::check_reachable(prop.cast()) } {
        // SAFETY: as above.
        let p = unsafe { redirect::<T, Rebase>(prop.cast(), Rebase(id)) }.unwrap_or_else(|| Box::new(why));
        return out.put_any::<(usize, usize)>(Err(p));
    }
    let w = context::current().expect("gossamer: a request served outside a worker");
    out.put_any(Rebase(id).run(w, prop.cast::<PropertyCell<T>>()));
}

/// Runs a move (`MoveTo`) on the trustee.
unsafe fn move_shim<T: Send + 'static>(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `MoveTo::enqueue` with a `usize`.
    let to: usize = unsafe { take_value(env as *const Word) };
    let cell = prop.cast::<PropertyCell<T>>();
    // SAFETY: `prop` is a live cell of this trustee (a request names it).
    if let Err(why) = unsafe { property::check_reachable(prop.cast()) } {
        // SAFETY: as above.
        let p = unsafe { redirect::<T, MoveTo>(prop.cast(), MoveTo(to)) }.unwrap_or_else(|| Box::new(why));
        return out.put_any::<()>(Err(p));
    }
    let w = context::current().expect("gossamer: a request served outside a worker");
    // SAFETY: reachable (checked above), on its trustee, between closures.
    out.put_any::<()>(catch_unwind(AssertUnwindSafe(|| unsafe { move_here(w, cell, to) })));
}
