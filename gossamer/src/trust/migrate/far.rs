//! Requests from other processes to a moved property: the origin relays
//! them as it relays every request (see the module documentation of
//! `trust::migrate`), answers the client's batch with a
//! [`Relayed`](super::Relayed) token at once, and once the holder has run
//! the request sends the result to the client's thread as a runtime
//! message of its own ([`deliver`]), serialized. There it meets the token
//! as a local relayed result does (`relayed_result`), in whichever order
//! the two arrive.
//!
//! Order: the client's requests reach the origin in its lane's order, and
//! the origin relays them in that order through its one lane to the
//! holder; a hand-over holds them back behind those already relayed.
//! Results come back to the origin in the order they ran, and the origin's
//! messages to the client keep that order, so `then` callbacks run in
//! issue order as well.

use std::ptr;
use std::thread;

use super::{relay, relayed_result, Closure};
use crate::channel::record::{tail_bytes, take_env, value_words, Responder};
use crate::channel::remote::{try_deserialize, try_with_serialized, with_serialized};
use crate::channel::slot::Word;
use crate::runtime::context;
use crate::runtime::property::Header;
use crate::runtime::worker::{Completion, Worker};
use crate::trust::remote_ops::complete_ignore;
use crate::trust::Transferable;

/// On the origin: relays `f(value, v)`, `v` still serialized as `bytes`,
/// for a client in another process; the answer to put in its batch.
///
/// # Safety
/// As for `relay`: `prop` is a live, moved origin (or record) on its
/// trustee thread, which serves the client's batch now.
pub(crate) unsafe fn relay_with<T, V, U>(
    prop: *mut u8,
    f: fn(&mut T, V) -> U,
    bytes: Result<&[u8], String>,
) -> thread::Result<U>
where
    T: Send + 'static,
    V: Transferable,
    U: Transferable,
{
    // An argument that does not decode is the caller's panic: nothing runs.
    let v: V = match bytes.and_then(try_deserialize) {
        Ok(v) => v,
        Err(m) => return Err(Box::new(m)),
    };
    // SAFETY: per the contract.
    unsafe { relay::<T, _>(prop.cast::<Header>(), Closure::new(move |t: &mut T| f(t, v))) }
}

/// On the origin: sends the result `r` of the request relayed under
/// `token` to `client`, a thread of another process.
pub(super) fn deliver<U: Transferable>(w: &Worker, client: usize, token: u64, r: thread::Result<U>) {
    // A panic travels as its message, as in every answer across processes.
    let r: Result<U, String> = r.map_err(|p| crate::error::panic_message(&*p));
    let send = |bytes: &[u8]| {
        w.encode_remote(
            client,
            deliver_shim::<U>,
            ptr::null_mut(),
            token,
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
/// token in the environment.
unsafe fn deliver_shim<U: Transferable>(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `deliver`: the token, then the serialized result;
    // both read only inside the record.
    let got = unsafe {
        take_env::<u64>(env as *const Word, out).map(|token| {
            let tail = (env as *const Word).add(value_words::<u64>());
            (token, tail_bytes(tail, out).and_then(try_deserialize::<Result<U, String>>).and_then(|r| r))
        })
    };
    let (token, r) = match got {
        Ok(g) => g,
        Err(m) => return out.put_any::<()>(Err(Box::new(m))),
    };
    let r = r.map_err(|m| Box::new(m) as Box<dyn std::any::Any + Send>);
    let w = context::current().expect("gossamer: a request served outside a worker");
    relayed_result(w, token, r, None);
    out.put_any::<()>(Ok(()));
}
