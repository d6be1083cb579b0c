//! Requests from other processes to a moved property: the origin relays
//! them as it relays every request (see the module documentation of
//! `trust::migrate`), answers the client's batch with a
//! [`Relayed`](super::Relayed) token at once, and once the holder has run
//! the request sends the result to the client's thread as a runtime
//! message of its own ([`deliver`]), serialized. There it meets the token
//! as a local relayed result does (`relayed_result`), in whichever order
//! the two arrive.
//!
//! With the result goes where the value is (a hint, as within the
//! process): the client's thread then keeps a route (`direct`) and sends
//! its next requests (`apply_with` and its forms: [`call_routed`],
//! [`then_routed`]) straight
//! to the cell that holds the value, in the property's process, under the
//! same rules as a thread of that process: a route changes only while none
//! of the thread's requests by it is outstanding, a stale route reaches a
//! record that relays and tells where the value went, and the origin asks
//! for every route back (a runtime message, [`ask_back`]) before it frees
//! the records the routes may name; the thread answers once its requests
//! by the route are done ([`acknowledge`]).
//!
//! Order: the client's requests reach the origin in its lane's order, and
//! the origin relays them in that order through its one lane to the
//! holder; a hand-over holds them back behind those already relayed.
//! Results come back to the origin in the order they ran, and the origin's
//! messages to the client keep that order, so `then` callbacks run in
//! issue order as well. A route changes only once every request sent
//! before has completed, so routed requests keep that order too.
//!
//! What arrives here from another process is checked before it is used: a
//! hint is taken only if it names cells of the process of the thread that
//! sent it (which is the property's), and a route given back or asked for
//! only for an origin of the thread that receives it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::thread;

use super::{direct, origin, relay, relayed_result, Closure, Hint, Reply, Request};
use crate::channel::record::{tail_bytes, take_env, value_words, Responder, Shim};
use crate::channel::remote::{
    drop_original, into_byte_vec, try_deserialize, try_deserialize_tail, try_with_serialized, with_serialized, Tail,
};
use crate::channel::slot::Word;
use crate::runtime::context;
use crate::runtime::property::{Header, PropertyCell, SendPtr};
use crate::runtime::shared::Placement;
use crate::runtime::worker::{Completion, Worker};
use crate::trust::remote_ops::complete_ignore;
use crate::trust::{pull, Transferable};

/// On the origin: relays `f(value, v)`, `v` still serialized as `bytes`,
/// for a client in another process; the answer to put in its batch.
///
/// # Safety
/// As for `relay`: `prop` is a live, moved origin (or record) on its
/// trustee thread, which serves the client's batch now.
pub(crate) unsafe fn relay_with<T, V, U>(
    prop: *mut u8,
    f: fn(&mut T, V) -> U,
    bytes: Result<Tail<'_>, String>,
) -> thread::Result<U>
where
    T: Send + 'static,
    V: Transferable,
    U: Transferable,
{
    // An argument that does not decode is the caller's panic: nothing runs.
    let v: V = match bytes.and_then(try_deserialize_tail) {
        Ok(v) => v,
        Err(m) => return Err(Box::new(m)),
    };
    // SAFETY: per the contract.
    unsafe { relay::<T, _>(prop.cast::<Header>(), Closure::new(move |t: &mut T| f(t, v))) }
}

/// The words of a hint as it travels: flags (1: a hint, 2: the origin
/// gives it), the origin's address, the trustee and cell of the value, the
/// trustee and cell of the record that tells.
type HintWords = [u64; 6];

fn hint_words(h: Option<Hint>) -> HintWords {
    match h {
        None => [0; 6],
        Some(h) => [
            1 | if h.create { 2 } else { 0 },
            h.origin as u64,
            h.at.0 as u64,
            h.at.1 .0.addr() as u64,
            h.from.0 as u64,
            h.from.1 .0.addr() as u64,
        ],
    }
}

/// The hint in `words`, sent by thread `sender` of another process, if it
/// is one that thread may give: every cell it names is of the sender's
/// process, the telling record is the sender's, and no address is null.
/// `p`: where the threads of the program are (`p.rank` is this process).
/// The cells' addresses are only ever sent back to that process, never
/// read here.
fn hint_from(p: &Placement, sender: usize, words: HintWords) -> Option<Hint> {
    if words[0] & 1 == 0 {
        return None;
    }
    let rank_of = |t: u64| usize::try_from(t).ok().and_then(|t| p.rank_of(t));
    let sender_rank = p.rank_of(sender);
    let ok = words[0] <= 3
        && sender_rank.is_some()
        && sender_rank != Some(p.rank)
        && rank_of(words[2]) == sender_rank
        && words[4] == sender as u64
        && words[1] != 0
        && words[3] != 0
        && words[5] != 0;
    if !ok {
        tracing::warn!("gossamer: thread {sender} sent a malformed route hint {words:?}; ignored");
        return None;
    }
    let cell = |a: u64| SendPtr(std::ptr::with_exposed_provenance_mut::<Header>(a as usize));
    Some(Hint {
        origin: words[1] as usize,
        at: (words[2] as usize, cell(words[3])),
        from: (words[4] as usize, cell(words[5])),
        create: words[0] & 2 != 0,
    })
}

/// On the origin (or a record): sends the result `r` of the request
/// relayed under `token` to `client`, a thread of another process, with
/// where the value is (`hint`).
pub(super) fn deliver<U: Transferable>(
    w: &Worker,
    client: usize,
    token: u64,
    r: thread::Result<U>,
    hint: Option<Hint>,
) {
    // A panic travels as its message, as in every answer across processes.
    let r: Result<U, String> = r.map_err(|p| crate::error::panic_message(&*p));
    let mut env = [0u64; 7];
    env[0] = token;
    env[1..].copy_from_slice(&hint_words(hint));
    let send = |bytes: &[u8]| {
        w.encode_remote(
            client,
            deliver_shim::<U>,
            ptr::null_mut(),
            env,
            Some(bytes),
            Completion { run: complete_ignore, data: ptr::null() },
        )
    };
    // A result that cannot travel still reaches the waiting client, as why.
    if let Err(m) = try_with_serialized(&r, send) {
        with_serialized(&Err::<U, String>(m), send);
    }
}

/// On the client's thread: the result of the request relayed under the
/// token in the environment, and where the value is.
unsafe fn deliver_shim<U: Transferable>(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `deliver`: the token and the hint, then the
    // serialized result; both read only inside the record.
    let got = unsafe {
        take_env::<[u64; 7]>(env as *const Word, out).map(|words| {
            let tail = (env as *const Word).add(value_words::<[u64; 7]>());
            (words, tail_bytes(tail, out).and_then(try_deserialize_tail::<Result<U, String>>).and_then(|r| r))
        })
    };
    let (words, r) = match got {
        Ok(g) => g,
        Err(m) => return out.put_any::<()>(Err(Box::new(m))),
    };
    let r = r.map_err(|m| Box::new(m) as Box<dyn std::any::Any + Send>);
    let w = context::current().expect("gossamer: a request served outside a worker");
    let mut hint = [0u64; 6];
    hint.copy_from_slice(&words[1..]);
    let sender = w.batch_client().expect("gossamer: a relayed result outside its sender's batch");
    let hint = hint_from(&w.shared.placement, sender, hint);
    relayed_result(w, words[0], r, hint);
    out.put_any::<()>(Ok(()));
}

/// Sends thread `to`, of another process, the route message `shim` about
/// the property whose origin is at `origin` (in the origin's process).
fn send_route_message(w: &Worker, to: usize, shim: Shim, origin: usize) {
    let c = Completion { run: complete_ignore, data: ptr::null() };
    w.encode_remote(to, shim, ptr::null_mut(), origin as u64, None, c);
}

/// Runs `f` on the sending thread and the origin address of a message of
/// [`send_route_message`]; answers what it returns.
///
/// # Safety
/// `env` is the environment of such a message, inside its record.
unsafe fn on_route_message(
    env: *mut u8,
    out: &mut Responder<'_>,
    f: impl FnOnce(&Worker, usize, usize) -> Result<(), String>,
) {
    // SAFETY: per the contract: a `u64`, read inside the record.
    let r = unsafe { take_env::<u64>(env as *const Word, out) }.and_then(|origin| {
        let w = context::current().expect("gossamer: a request served outside a worker");
        let sender = w.batch_client().expect("gossamer: a route message outside its sender's batch");
        f(w, sender, origin as usize)
    });
    out.put_any::<()>(r.map_err(|m| Box::new(m) as Box<dyn std::any::Any + Send>));
}

/// On the origin's thread: asks `client`, a thread of another process, for
/// its route to the property whose origin is at `origin` back (see
/// `origin`).
pub(super) fn ask_back(w: &Worker, client: usize, origin: usize) {
    send_route_message(w, client, ask_back_shim, origin);
}

/// On a client's thread: the origin's thread that sends this asks for the
/// route back.
unsafe fn ask_back_shim(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: sent by `ask_back`.
    unsafe {
        on_route_message(env, out, |w, from, origin| {
            direct::retire(w, from, origin);
            Ok(())
        })
    }
}

/// On a client's thread: tells the origin's thread `to`, of another
/// process, that this thread dropped its route to the property whose
/// origin is at `origin` there.
pub(super) fn acknowledge(w: &Worker, to: usize, origin: usize) {
    send_route_message(w, to, acknowledge_shim, origin);
}

/// On the origin's thread: a client's thread of another process gave its
/// route back.
unsafe fn acknowledge_shim(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: sent by `acknowledge`.
    unsafe {
        on_route_message(env, out, |w, from, origin| {
            if !origin::awaits(origin) {
                return Err(format!("thread {from} gave back a route to {origin:#x}, which was not asked for"));
            }
            origin::retired(w, origin);
            Ok(())
        })
    }
}

/// `f(value, v)` for a property of another process, with `v` serialized:
/// the request a thread sends by its route there.
pub(crate) struct With<T, V, U> {
    f: fn(&mut T, V) -> U,
    bytes: Vec<u8>,
}

impl<T, V, U> Request<T> for With<T, V, U>
where
    T: Send + 'static,
    V: Transferable,
    U: Transferable,
{
    type Out = U;

    fn enqueue(self, w: &Worker, t: usize, cell: *mut PropertyCell<T>, c: Completion) {
        w.enqueue_remote_fn(
            t,
            crate::trust::with_shim::<T, V, U>,
            cell.cast(),
            self.f as usize,
            Some(Tail::Owned(self.bytes)),
            c,
        );
    }

    fn run(self, w: &Worker, cell: *mut PropertyCell<T>) -> thread::Result<U> {
        // Routes name cells of the property's process, never of the
        // client's; should one be here, the request still runs as sent.
        let v: V = try_deserialize(&self.bytes).map_err(|m| Box::new(m) as Box<dyn std::any::Any + Send>)?;
        let _g = w.enter_delegated();
        // SAFETY: per the trait, the value is here and reachable, and no
        // other closure runs on it.
        catch_unwind(AssertUnwindSafe(|| (self.f)(unsafe { &mut *(*cell).value.get() }, v)))
    }
}

/// The bytes `v` travels as, and the original if they are a copy (its
/// drop is the caller's: see `Trust::apply_with`).
fn to_bytes<V: Transferable>(v: V) -> (Vec<u8>, Option<V>) {
    match into_byte_vec(v) {
        Ok(bytes) => (bytes, None),
        Err(v) => (with_serialized(&v, <[u8]>::to_vec), Some(v)),
    }
}

/// `apply_with` from a thread that keeps a route to the moved property of
/// another process whose origin is `origin` on trustee `t`: sends it by
/// the route and waits for the result. With it, the panic of the
/// argument's original, if its drop panicked, for the caller to resume.
pub(crate) fn call_routed<T, V, U>(
    w: &'static Worker,
    t: usize,
    origin: *mut PropertyCell<T>,
    f: fn(&mut T, V) -> U,
    v: V,
) -> (U, Option<Box<dyn std::any::Any + Send>>)
where
    T: Send + 'static,
    V: Transferable,
    U: Transferable,
{
    let (bytes, original) = to_bytes(v);
    let wait = crate::trust::Waiter::<U>::new(w.current_fiber());
    let sent = direct::send(w, t, origin, With { f, bytes }, Reply::Wake(wait.as_data()));
    assert!(sent.is_ok(), "gossamer: a route vanished under its caller");
    // Sent as a copy: the original ends here, as for a request without a
    // route; a panic of its `Drop` is the caller's, once the answer is in.
    let dropped = original.and_then(drop_original);
    (wait.wait_transfer(), dropped)
}

/// `apply_with_then` (and its forms) by this thread's route, as
/// [`call_routed`]; `then` gets the result on this thread.
pub(crate) fn then_routed<T, V, U>(
    w: &Worker,
    t: usize,
    origin: *mut PropertyCell<T>,
    f: fn(&mut T, V) -> U,
    v: V,
    then: super::Then<U>,
) where
    T: Send + 'static,
    V: Transferable,
    U: Transferable,
{
    let (bytes, original) = to_bytes(v);
    // A result too large for its response is pulled first, by a fiber.
    let then: super::Then<U> = Box::new(move |w, r| {
        if !pull::is_large(&r) {
            return then(w, r);
        }
        w.spawn_boxed(Box::new(move || {
            let r = pull::resolve(r);
            let w = context::current().expect("gossamer: a fiber outside its worker");
            then(w, r)
        }));
    });
    let sent = direct::send(w, t, origin, With { f, bytes }, Reply::Then(then));
    assert!(sent.is_ok(), "gossamer: a route vanished under its caller");
    drop(original);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Two processes of 2 threads each, on one host; this one is rank 1.
    fn placement() -> Placement {
        Placement {
            rank: 1,
            ranks: vec![0..2, 2..4],
            hosts: std::iter::once(0..4).collect(),
            host_names: vec!["h".into()],
            key: [1, 2],
        }
    }

    fn cell(a: usize) -> SendPtr<*mut Header> {
        SendPtr(std::ptr::without_provenance_mut(a))
    }

    #[test]
    fn a_hint_of_the_senders_process_arrives_as_sent() {
        for create in [false, true] {
            let h = Hint { origin: 0x1000, at: (1, cell(0x2000)), from: (0, cell(0x3000)), create };
            let got = hint_from(&placement(), 0, hint_words(Some(h))).expect("a valid hint");
            assert_eq!(got.origin, 0x1000);
            assert_eq!((got.at.0, got.at.1 .0.addr()), (1, 0x2000));
            assert_eq!((got.from.0, got.from.1 .0.addr()), (0, 0x3000));
            assert_eq!(got.create, create);
        }
        assert!(hint_from(&placement(), 0, hint_words(None)).is_none());
    }

    #[test]
    fn hints_naming_cells_elsewhere_are_refused() {
        let h = |at: usize, from: usize| Hint { origin: 8, at: (at, cell(16)), from: (from, cell(24)), create: true };
        // The value on a thread of this process, or of no process.
        assert!(hint_from(&placement(), 0, hint_words(Some(h(2, 0)))).is_none());
        assert!(hint_from(&placement(), 0, hint_words(Some(h(9, 0)))).is_none());
        // A record that is not the sender's.
        assert!(hint_from(&placement(), 0, hint_words(Some(h(1, 1)))).is_none());
        // A sender of this process.
        assert!(hint_from(&placement(), 2, hint_words(Some(h(3, 2)))).is_none());
        // Null addresses, unknown flags.
        let mut w = hint_words(Some(h(1, 0)));
        w[3] = 0;
        assert!(hint_from(&placement(), 0, w).is_none());
        let mut w = hint_words(Some(h(1, 0)));
        w[0] |= 4;
        assert!(hint_from(&placement(), 0, w).is_none());
    }

    #[cfg(not(miri))]
    proptest! {
        /// Any words at all: never a panic, and a hint taken names only
        /// cells of the sender's process, with the sender as the record.
        #[test]
        fn any_words_give_a_valid_hint_or_none(words in proptest::array::uniform6(any::<u64>()), sender in 0usize..6) {
            if let Some(h) = hint_from(&placement(), sender, words) {
                prop_assert!(sender < 2);
                prop_assert!(h.at.0 < 2);
                prop_assert_eq!(h.from.0, sender);
                prop_assert!(h.origin != 0 && !h.at.1 .0.is_null() && !h.from.1 .0.is_null());
            }
        }
    }
}
