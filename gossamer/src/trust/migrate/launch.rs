//! A launch on a property that moved (`launch` on a `Trust<Latch<T>>`
//! after `migrate_to`): its start travels as a request does, from the
//! origin to the cell that holds the value, and the launched fiber runs
//! there.
//!
//! A launch starts on the origin's thread (`trust::latch`). When the value
//! has moved, the start is routed from there like any request the origin's
//! own thread sends (held while the value is handed over, relayed by a
//! record if it meets one), so it reaches the value exactly once and in
//! order with the requests before it. A caller whose thread sends the
//! property's requests straight to the holder by a route (`direct`) sends
//! the start to the origin only once those have completed
//! (`direct::after_routed`, `direct::wait_routed`): a start that went
//! ahead of them would lend the value first, and they would be refused.
//! On the holder it marks the cell *lent* at once, before any later
//! request runs there, and starts the fiber that takes the latch. A lent
//! cell refuses closures and hand-overs alike (a hand-over is an ordinary
//! request to the holder), so the value stays in that cell, and the cell
//! alive (the origin holds an id in it; the fiber holds a trust to the
//! origin), until the fiber is done.
//! Launches that find the cell lent already wait for the latch there, in
//! order, as on a property that never moved.
//!
//! A move asked for while a launch is out fails, as it does on a property
//! that never moved while a launch holds its latch: the origin counts the
//! launches it routed until each has ended ([`out`]), and `start_move`
//! refuses to hand the value over meanwhile. (A hand-over that reached a
//! lent holder anyway would be refused there and leave the value in
//! place; the count makes the caller of `migrate_to` hear of it.)
//!
//! The origin hears of a launch's end before its caller hears the result,
//! so a move the caller asks for next never meets the count of the launch
//! it has seen end ([`answer`]): the result goes by way of the origin, in
//! one message with the end, unless the caller is on the holder's own
//! thread, where the end goes first on the road to the origin that the
//! caller's next requests take too.

use std::cell::RefCell;
use std::collections::HashMap;
use std::thread;

use super::{relay, route, run_here, Reply, Request, Then};
use crate::channel::record::{take_value, Responder};
use crate::channel::slot::Word;
use crate::runtime::context;
use crate::runtime::property::{self, Header, Lent, PropertyCell, Route, SendPtr};
use crate::runtime::worker::{Call, Completion, Worker};
use crate::trust::latch::{deliver, run_launched, Latch, ReplyTo};
use crate::trust::Trust;

thread_local! {
    /// Per origin cell of this thread (its address): the launches it sent
    /// to where the value is that have not ended yet.
    static OUT: RefCell<HashMap<usize, u32>> = RefCell::new(HashMap::new());
}

/// True while a launch that the origin at `origin` (of this thread) sent
/// on has not ended: the property must not move.
pub(crate) fn out(origin: usize) -> bool {
    OUT.with(|o| o.borrow().contains_key(&origin))
}

fn started(origin: usize) {
    OUT.with(|o| *o.borrow_mut().entry(origin).or_insert(0) += 1);
}

fn ended(origin: usize) {
    OUT.with(|o| {
        let mut o = o.borrow_mut();
        let n = o.get_mut(&origin).expect("gossamer: a launch ended that was never counted");
        *n -= 1;
        if *n == 0 {
            o.remove(&origin);
        }
    });
}

/// Tells the origin's thread `t` that a launch it counted for the origin
/// at `origin` has ended.
fn end(w: &Worker, t: usize, origin: usize) {
    if t == w.index {
        ended(origin);
    } else {
        w.send(t, move || ended(origin));
    }
}

/// Where a launched closure's result goes, and how it is finished there.
type Finish<U> = unsafe fn(&Worker, *const (), thread::Result<U>);

/// On the holder, once a launch on a moved property is done: tells the
/// origin (trustee `t`, cell at `origin`) that it ended, then the caller
/// its result, in an order that lets no later request of the caller's
/// reach the origin before the end does. A caller on this thread sends its
/// next requests to the origin on the same road as the end, behind it;
/// any other caller gets its result from the origin, right after the
/// origin has counted the end (a result sent straight to a third thread
/// could come back to the origin as a `migrate_to` ahead of the end, which
/// would then be refused as if the launch still held the latch).
fn answer<U: Send + 'static>(reply: ReplyTo, r: thread::Result<U>, finish: Finish<U>, t: usize, origin: usize) {
    let w = context::current().expect("gossamer: a launched fiber outside its worker");
    if reply.worker() == w.index {
        end(w, t, origin);
        deliver(reply, r, finish);
    } else {
        w.send(t, move || {
            ended(origin);
            deliver(reply, r, finish);
        });
    }
}

/// The start of a launch of `F` on a moved property: the request routed
/// to the cell that holds the value.
pub(crate) struct Start<T: Send + 'static, F, U> {
    /// Keeps the property alive while the launch is on its way and runs.
    keep: Trust<Latch<T>>,
    f: F,
    reply: ReplyTo,
    finish: Finish<U>,
}

impl<T, F, U> Request<Latch<T>> for Start<T, F, U>
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Send + 'static,
{
    type Out = ();
    const WAITS_FOR_LATCH: bool = true;

    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<Latch<T>>, c: Completion) {
        w.enqueue(t, start_shim::<T, F, U>, cell.cast(), self, c, Call::Copied);
    }

    fn run(self, w: &Worker, cell: *mut PropertyCell<Latch<T>>) -> thread::Result<()> {
        let h = cell.cast::<Header>();
        // SAFETY: `run` is called on the cell's trustee with the value here
        // (see `Request`); the cell stays alive while it is lent: the
        // origin holds an id in it and `keep` holds the origin, and a lent
        // cell is never handed over, so its value stays in it.
        let lent = unsafe { Lent::new(h) };
        let cell = SendPtr(cell);
        let Start { keep, f, reply, finish } = self;
        w.spawn_boxed(Box::new(move || {
            let (cell, keep) = (cell, keep);
            // SAFETY: as above; this fiber runs on the cell's trustee, the
            // only thread that touches the latch.
            let latch: &Latch<T> = unsafe { &*(*cell.0).value.get() };
            let (origin_t, origin) = (keep.trustee as usize, keep.cell.as_ptr() as usize);
            // Answered before `keep` goes: the origin is still there to
            // hear of the end.
            run_launched(lent, origin, latch, f, move |r| answer(reply, r, finish, origin_t, origin));
        }));
        Ok(())
    }
}

/// Serves the start of a launch on the cell at `prop`.
unsafe fn start_shim<T, F, U>(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>)
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Send + 'static,
{
    // SAFETY: encoded by `Start::enqueue` for these types, for a live
    // `PropertyCell<Latch<T>>` of this trustee.
    let req: Start<T, F, U> = unsafe { take_value(env as *const Word) };
    let w = context::current().expect("gossamer: a request served outside a worker");
    let h = prop.cast::<Header>();
    // SAFETY: as above.
    if unsafe { property::moved(h) } {
        // SAFETY: as above; a moved cell serving a client's batch.
        return out.put_any::<()>(unsafe { relay::<Latch<T>, _>(h, req) });
    }
    out.put_any::<()>(run_here(w, prop.cast::<PropertyCell<Latch<T>>>(), req));
}

/// On the origin's thread, from the launch's first fiber: the value of
/// the property `keep` names has moved; starts the launch where it is.
/// A start that cannot run (the runtime shuts down) answers the launch
/// with that error.
pub(crate) fn start_moved<T, F, U>(w: &Worker, keep: Trust<Latch<T>>, f: F, reply: ReplyTo, finish: Finish<U>)
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Send + 'static,
{
    let (t, cell) = (keep.trustee as usize, keep.cell.as_ptr());
    let h = cell.cast::<Header>();
    // SAFETY: `h` is the origin, a live cell (`keep`) of this thread.
    if unsafe { property::route(h) } == Route::Draining {
        // The value is being handed over: count and send the launch once it
        // has arrived, never in the middle of a hand-over.
        let later = Box::new(move || {
            let w = context::current().expect("gossamer: held request outside its worker");
            start_moved(w, keep, f, reply, finish)
        });
        // SAFETY: a record of this thread that hands over now.
        return unsafe { property::hold(h, later) };
    }
    started(cell as usize);
    let failed: Then<()> = Box::new(move |w, r| {
        if let Err(why) = r {
            end(w, t, cell as usize);
            deliver(reply, Err(why), finish);
        }
    });
    let start = Start { keep, f, reply, finish };
    route(w, t, cell, start, Reply::Then(failed), false);
}
