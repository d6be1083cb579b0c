//! Strict mode's copies: the values the `_with` forms, `spawn_with` and
//! `entrust_on` give a trustee in another *simulated* process (see
//! `runtime::strict`) go through the bytes a real process boundary would
//! carry, so a value that cannot cross fails here as it would there.

use std::panic::resume_unwind;

use crate::channel::remote;
use crate::runtime::worker::Worker;
use crate::runtime::JoinHandle;
use crate::trust::Transferable;

/// The value another process would get for `v`: serialized here, the
/// original dropped here, a copy rebuilt by serde. A panic of the original's
/// `Drop`, a value that cannot be serialized, or bytes that do not rebuild
/// one fail as they would across processes.
pub(crate) fn copy_across<V: Transferable>(v: V) -> V {
    let copy = remote::with_serialized(&v, |bytes| remote::try_deserialize::<V>(bytes));
    if let Some(p) = remote::drop_original(v) {
        drop(copy);
        resume_unwind(p);
    }
    copy.unwrap_or_else(|m| panic!("{m}"))
}

/// On the trustee: the argument rebuilt from the bytes the caller sent, as
/// the process boundary rebuilds it there (bytes that do not rebuild one
/// are the caller's panic).
pub(crate) fn rebuild<V: Transferable>(bytes: &[u8]) -> V {
    remote::deserialize(bytes)
}

/// `spawn_with` to another simulated process: the argument is serialized
/// here and the original dropped here; the fiber rebuilds it, and its
/// result goes through the same round trip. As across processes, an
/// argument that does not rebuild, or a result that cannot be serialized,
/// fails the join with why, not the caller.
pub(crate) fn spawn_copied<A: Transferable, R: Transferable>(
    w: &Worker,
    thread: usize,
    f: fn(A) -> R,
    arg: A,
) -> JoinHandle<R> {
    let bytes = remote::with_serialized(&arg, <[u8]>::to_vec);
    drop(arg);
    crate::runtime::spawn_at_worker(w, thread, move || {
        let arg = rebuild::<A>(&bytes);
        copy_across(f(arg))
    })
}

/// Checks that code given as a `fn` could be named in another process (it
/// is code of this binary), as the process boundary does before sending.
pub(crate) fn check_code(addr: usize) {
    let _ = remote::fn_offset(addr);
}
