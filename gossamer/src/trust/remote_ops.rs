//! Fibers and properties placed on any thread of any process: `spawn_with`
//! and `entrust_on`. Within this process they take the local paths; to
//! another process they travel as requests whose code is named by offset and
//! whose data is serialized.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use super::strict_copy as strict;
use crate::channel::record::{tail_bytes, take_value, value_words, Responder};
use crate::channel::remote::{try_deserialize_tail, try_with_serialized, with_serialized};
use crate::channel::slot::Word;
use crate::channel::transfer::toward;
use crate::runtime::context;
use crate::runtime::worker::{Completion, Worker};
use crate::runtime::JoinHandle;
use crate::trust::property::{self, PropertyCell};
use crate::trust::{Transferable, Trust, TrusteeRef, Waiter};

fn worker() -> &'static Worker {
    context::current().expect("gossamer: this call must be made on a thread of the runtime")
}

unsafe fn complete_wake<U: Transferable>(w: &Worker, lane: usize, data: *const (), rec: *const Word) {
    // SAFETY: `data` is the waiter of a fiber suspended until this response.
    unsafe { Waiter::<U>::complete(w, data, w.take_result::<U>(lane, rec)) }
}

pub(crate) unsafe fn complete_ignore(w: &Worker, lane: usize, _data: *const (), rec: *const Word) {
    // SAFETY: these requests answer `()`.
    if let Err(p) = unsafe { w.take_result::<()>(lane, rec) } {
        w.report_panic("remote runtime message", p);
    }
}

/// Starts `f(arg)` as a fiber on thread `thread` of any process of the
/// program, and returns a handle to its result.
///
/// ```
/// fn program() {
///     // Thread 1 may be in this process or another: the code is a `fn`,
///     // the data an argument.
///     let words = vec!["delegation".to_string(), "not locks".to_string()];
///     let fiber = gossamer::spawn_with(1, |w: Vec<String>| w.join(", "), words);
///     assert_eq!(fiber.join().unwrap(), "delegation, not locks");
/// }
///
/// // One process here; the same program runs over several processes
/// // when the binary is started with `--gossamer-processes 2`.
/// gossamer::main(program, 2);
/// ```
///
/// * **The code is a `fn`**: a closure that captures nothing (it coerces
///   to `fn(A) -> R`; one that captures is a compile error). Only code given
///   as a `fn` crosses processes: it travels as its offset in the binary,
///   while a generic closure's captures cannot be proven to mean the same
///   in another process (see [`Delegable`](crate::Delegable)).
/// * **Data goes in `arg`**, trusts included: moved within a process,
///   copied into another — serialized here, the original dropped here right
///   after, and a copy rebuilt there. A type whose `Drop` has effects beyond
///   its own memory sees one drop in each process, as for a clone: send
///   plain data, and keep such resources in a property, sending a
///   [`Trust`] (which crosses as a true move). The result comes back the
///   same way.
///
/// # Panics
/// Outside the runtime's threads, or if there is no such thread.
pub fn spawn_with<A, R>(thread: usize, f: fn(A) -> R, arg: A) -> JoinHandle<R>
where
    A: Transferable, // serialized across processes: must own its data, no reference or pointer
    R: Transferable, // serialized across processes: must own its data, no reference or pointer
{
    let w = worker();
    assert!(thread < w.shared.n, "gossamer: no thread {thread} (the program has {})", w.shared.n);
    if w.shared.simulated_foreign(Some(w.index), thread) {
        // Strict mode: the rules of another process, this process's memory
        // (see `runtime::strict`).
        strict::check_code(f as usize);
        return strict::spawn_copied(w, thread, f, arg);
    }
    if w.shared.is_local(thread) {
        return crate::spawn_on(thread, move || f(arg));
    }
    let (handle, state) = crate::runtime::join::remote_pair::<R>();
    let ((), original) = toward(thread, || {
        crate::channel::remote::with_tail(arg, |tail| {
            w.enqueue_remote_fn(
                thread,
                spawn_shim::<A, R>,
                state.cast_mut().cast(),
                f as usize,
                Some(tail),
                Completion { run: complete_ignore, data: ptr::null() },
            )
        })
    });
    // Sent as a copy (unless its bytes moved into the request): the
    // original ends here (see above).
    drop(original);
    handle
}

/// On the target thread: starts the fiber; when it ends, sends the result
/// back to the spawning thread.
unsafe fn spawn_shim<A: Transferable, R: Transferable>(state: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    let origin = out.remote().expect("remote spawn from a local client").client;
    // SAFETY: encoded by `spawn_with` for these types: the offset of a
    // `fn(A) -> R` of this binary, then the serialized argument.
    let (f, arg): (fn(A) -> R, Result<A, String>) = unsafe {
        let f = crate::channel::remote::fn_at(take_value::<i64>(env as *const Word));
        let tail = (env as *const Word).add(value_words::<i64>());
        (f, tail_bytes(tail, out).and_then(try_deserialize_tail))
    };
    let state = crate::trust::SendPtr(state);
    let body = move || {
        let state = state;
        // An argument that does not decode fails the join, not this thread.
        let r: Result<R, String> =
            arg.and_then(|arg| catch_unwind(AssertUnwindSafe(|| f(arg))).map_err(|p| crate::error::panic_message(&*p)));
        let w = worker();
        let send = |bytes: &[u8]| {
            w.encode_remote(
                origin,
                join_shim::<R>,
                state.0,
                (),
                Some(bytes),
                Completion { run: complete_ignore, data: ptr::null() },
            )
        };
        // A result that cannot travel still completes the join, with why.
        if let Err(m) = toward(origin, || try_with_serialized(&r, send)) {
            with_serialized(&Err::<R, String>(m), send);
        }
        // Sent as a copy: the original ends here; a panic of its `Drop`
        // comes after the join was answered, so it is reported.
        if let Some(p) = crate::channel::remote::drop_original(r) {
            w.report_panic("drop of a result sent to another process", p);
        }
    };
    worker().spawn_boxed(Box::new(body));
    out.put_any::<()>(Ok(()));
}

/// Back on the spawning thread: completes the join handle.
unsafe fn join_shim<R: Transferable>(state: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `spawn_shim`: an empty environment, then the result.
    let r: Result<R, String> =
        unsafe { tail_bytes(env as *const Word, out) }.and_then(try_deserialize_tail).and_then(|r| r);
    let r = r.map_err(|m| Box::new(m) as Box<dyn std::any::Any + Send>);
    // SAFETY: `state` is the state `remote_pair` leaked for this fiber.
    unsafe { crate::runtime::join::finish_remote::<R>(state.cast_const().cast(), r) };
    out.put_any::<()>(Ok(()));
}

/// Entrusts `value` to thread `thread` of any process of the program and
/// returns the first trust to it.
///
/// ```
/// fn program() {
///     let last = gossamer::threads() - 1; // in the last process
///     let names = gossamer::entrust_on(last, vec!["first".to_string()]);
///     // Any process may delegate to it, with code given as a `fn`.
///     let n = names.apply_with(|v, s: String| { v.push(s); v.len() }, "second".to_string());
///     assert_eq!(n, 2);
/// }
///
/// gossamer::main(program, 2); // `--gossamer-processes 2`: two processes
/// ```
/// Within this process it is
/// [`TrusteeRef::entrust`]: the value moves. To another process the value
/// is copied: serialized here, the original dropped here right after, and
/// the property is a copy rebuilt there by serde (dropped there, after its
/// last trust). A type whose `Drop` has effects beyond its own memory (a
/// file, a counter, a connection) thus sees one drop in each process, as
/// for a clone: entrust plain data to another process, or make such a
/// resource there (`spawn_with(thread, |()| local_trustee().entrust(..),
/// ())`). This call waits for the trustee's answer, so it may not be made
/// in delegated context.
///
/// # Panics
/// Outside the runtime's threads, or if there is no such thread.
pub fn entrust_on<T: Transferable>(thread: usize, value: T) -> Trust<T> {
    let w = worker();
    assert!(thread < w.shared.n, "gossamer: no thread {thread} (the program has {})", w.shared.n);
    if w.shared.simulated_foreign(Some(w.index), thread) {
        // Strict mode: copied, and waited for, as into another process.
        w.check_may_block();
        return TrusteeRef::new(thread, w.shared.id).entrust_copied(strict::copy_across(value));
    }
    if w.shared.is_local(thread) {
        return TrusteeRef::new(thread, w.shared.id).entrust(value);
    }
    w.check_may_block();
    let id = w.new_id();
    let wait = Waiter::<u64>::new(w.current_fiber());
    let c = Completion { run: complete_wake::<u64>, data: wait.as_data() };
    let sent = (id, value);
    toward(thread, || {
        with_serialized(&sent, |bytes| w.encode_remote(thread, entrust_shim::<T>, ptr::null_mut(), (), Some(bytes), c))
    });
    // Sent as a copy: the original ends here (see above), before the wait;
    // a panic of its `Drop` is the caller's, once the trustee has answered
    // (the answer completes `wait`, on this fiber's stack).
    let dropped = crate::channel::remote::drop_original(sent);
    let addr = wait.wait();
    let trust =
        Trust::from_parts(ptr::with_exposed_provenance_mut::<PropertyCell<T>>(addr as usize), thread, w.shared.id, id);
    if let Some(p) = dropped {
        drop(trust);
        std::panic::resume_unwind(p);
    }
    trust
}

/// On the trustee: makes the property and answers its address.
unsafe fn entrust_shim<T: Transferable>(_prop: *mut u8, env: *mut u8, out: &mut Responder<'_>) {
    // SAFETY: encoded by `entrust_on`: no closure bytes, then the id and
    // the value, serialized.
    let decoded: Result<(u64, T), String> =
        unsafe { tail_bytes(env as *const Word, out) }.and_then(try_deserialize_tail);
    let (id, value) = match decoded {
        Ok(v) => v,
        Err(m) => return out.put_any::<u64>(Err(Box::new(m))),
    };
    let cell = PropertyCell::new_boxed(value, id);
    // SAFETY: a fresh header, registered once, on its trustee.
    unsafe { property::register(worker(), cell.cast()) };
    out.put_any::<u64>(Ok(cell.expose_provenance() as u64));
}
