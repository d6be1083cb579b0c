//! `Trust<T>`: the handle through which fibers on any thread delegate
//! closures to a property owned by one trustee thread.

mod adaptive;
pub(crate) mod delegable;
mod extend;
pub(crate) mod future;
mod latch;
pub(crate) mod migrate;
#[cfg(all(test, not(loom)))]
mod miri_tests;
mod pool;
mod pull;
pub(crate) mod remote_ops;
mod strict_copy;
pub(crate) mod trustee;
mod wire;

use std::any::Any;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use self::strict_copy as strict;
use crate::channel::record::{take_value, Responder};
use crate::channel::slot::Word;
use crate::error::Panicked;
use crate::fiber;
use crate::runtime::context;
use crate::runtime::profile;
pub(crate) use crate::runtime::property;
pub(crate) use crate::runtime::property::SendPtr;
use crate::runtime::shared::Shared;
use crate::runtime::worker::{Call, Completion, Worker};

pub use adaptive::{entrust_adaptive, Adaptive, Mode, Policy, Thresholds};
pub use delegable::{Delegable, Transferable};
pub use future::{block_on, ApplyFuture};
pub use latch::{Latch, LatchGuard};
pub use migrate::follow::{FollowParams, MigrationPolicy};
#[allow(deprecated)]
pub use pool::ThreadPool;
use property::PropertyCell;
pub use remote_ops::{entrust_on, spawn_with};
pub use trustee::{entrust, local_trustee, trustee, TrusteeRef};

/// A reference-counted handle to a property entrusted to a trustee thread.
///
/// Like `Arc<Mutex<T>>`, but instead of locking, every access is a closure
/// that runs on the trustee: [`apply`](Trust::apply) waits for the result
/// (suspending only the calling fiber), [`apply_then`](Trust::apply_then)
/// continues at once and runs a callback with the result later. The
/// property is dropped, on its trustee, after the last trust to it.
///
/// ```
/// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
/// let ct = gossamer::local_trustee().entrust(17);
/// ct.apply(|c| *c += 1);
/// assert_eq!(ct.apply(|c| *c), 18);
/// # });
/// ```
pub struct Trust<T> {
    cell: NonNull<PropertyCell<T>>,
    trustee: u32,
    runtime: u64,
    id: u64,
    _owns: PhantomData<T>,
}

// SAFETY: a trust only sends closures to the trustee thread, which alone
// touches the property; the property itself moves between threads (at
// entrust and drop), hence `T: Send`.
unsafe impl<T: Send> Send for Trust<T> {}
// SAFETY: `&Trust` allows nothing beyond sending closures, as above.
unsafe impl<T: Send> Sync for Trust<T> {}

static OUTSIDE_IDS: AtomicU64 = AtomicU64::new(0);

/// A trust id for a thread outside any runtime: the top bit set (ids made
/// by workers have it clear, see `Worker::new_id`), above a count shared by
/// all such threads. It never wraps: past 2^63 ids (three centuries at a
/// billion a second) every further one is refused.
fn outside_id() -> u64 {
    let c = OUTSIDE_IDS.fetch_add(1, Ordering::Relaxed);
    assert!(c < 1 << 63, "gossamer: the threads outside the runtime have issued all 2^63 trust ids");
    (1 << 63) | c
}

/// Where the calling thread stands relative to a trust's runtime.
enum Ctx {
    Worker(&'static Worker),
    Outside(Arc<Shared>),
}

/// A fiber waiting for one result. The result is written through a raw
/// pointer by the completion while the fiber is suspended, hence the cell.
pub(crate) struct Waiter<U> {
    fiber: u32,
    result: UnsafeCell<Option<thread::Result<U>>>,
}

impl<U> Waiter<U> {
    pub(crate) fn new(fiber: u32) -> Self {
        Waiter { fiber, result: UnsafeCell::new(None) }
    }

    /// The address the completion writes to.
    pub(crate) fn as_data(&self) -> *const () {
        (self as *const Waiter<U>).cast()
    }

    /// Stores the result and wakes the waiting fiber.
    ///
    /// # Safety
    /// `data` must come from `as_data` of a waiter whose fiber is suspended
    /// in `wait` on worker `w`, and be completed once.
    pub(crate) unsafe fn complete(w: &Worker, data: *const (), r: thread::Result<U>) {
        let wait = data.cast::<Waiter<U>>();
        // SAFETY: per the contract the waiter is live and nobody else
        // accesses its result while its fiber is suspended.
        unsafe {
            *(*wait).result.get() = Some(r);
            w.make_ready((*wait).fiber);
        }
    }

    /// As [`wait`](Self::wait), for a result that may have come from
    /// another process too large for its response: it is pulled first.
    pub(crate) fn wait_transfer(&self) -> U
    where
        U: serde::de::DeserializeOwned + 'static,
    {
        loop {
            // SAFETY: the completion writes only while we are suspended.
            if let Some(r) = unsafe { (*self.result.get()).take() } {
                match pull::resolve(r) {
                    Ok(u) => return u,
                    Err(p) => resume_unwind(p),
                }
            }
            fiber::suspend();
        }
    }

    /// Suspends the calling fiber until the result arrives, then returns it
    /// or resumes the panic.
    pub(crate) fn wait(&self) -> U {
        loop {
            // SAFETY: the completion writes only while we are suspended.
            if let Some(r) = unsafe { (*self.result.get()).take() } {
                match r {
                    Ok(u) => return u,
                    Err(p) => resume_unwind(p),
                }
            }
            fiber::suspend();
        }
    }
}

unsafe fn complete_wake<U: Transferable>(w: &Worker, lane: usize, data: *const (), rec: *const Word) {
    // SAFETY: the response holds a `U`.
    let r = unsafe { w.take_result::<U>(lane, rec) };
    if migrate::is_relayed(&r) {
        // The property moved: the result follows (see `migrate`).
        return relayed_wake(w, r, data);
    }
    // SAFETY: `data` is the `Waiter<U>` on the stack of a fiber suspended
    // until this completion.
    unsafe { Waiter::<U>::complete(w, data, r) }
}

/// Waits for the result of a request that a moved property's first cell
/// relays (its answer `r`), for a waiting fiber.
#[cold]
#[inline(never)]
fn relayed_wake<U: Transferable>(w: &Worker, r: thread::Result<U>, data: *const ()) {
    migrate::await_relayed(w, r, migrate::Reply::Wake(data))
}

/// How a `then` callback takes its result.
pub(crate) trait ThenKind<U, G> {
    /// Runs `g` with `r`; returns a panic that nobody else will see.
    fn run(g: G, r: thread::Result<U>) -> Option<(&'static str, Box<dyn Any + Send>)>;
}

/// `apply_then`: the callback gets the value; a delegated panic is reported.
pub(crate) struct PlainThen;
/// `try_apply_then`: the callback gets a `Result`.
pub(crate) struct TryThen;

impl<U, G: FnOnce(U)> ThenKind<U, G> for PlainThen {
    fn run(g: G, r: thread::Result<U>) -> Option<(&'static str, Box<dyn Any + Send>)> {
        match r {
            Ok(u) => catch_unwind(AssertUnwindSafe(|| g(u))).err().map(|p| ("then-callback", p)),
            Err(p) => {
                // The callback is user code: its drop too runs inside
                // `catch_unwind`.
                if let Err(q) = catch_unwind(AssertUnwindSafe(|| drop(g))) {
                    tracing::error!(
                        "unhandled panic in dropping a then-callback: {}",
                        crate::error::panic_message(&*q)
                    );
                    crate::error::drop_payload(q);
                }
                Some(("closure delegated with apply_then", p))
            }
        }
    }
}

impl<U, G: FnOnce(Result<U, Panicked>)> ThenKind<U, G> for TryThen {
    fn run(g: G, r: thread::Result<U>) -> Option<(&'static str, Box<dyn Any + Send>)> {
        catch_unwind(AssertUnwindSafe(|| g(r.map_err(Panicked::new)))).err().map(|p| ("then-callback", p))
    }
}

unsafe fn complete_then<U: Transferable, G: 'static, K: ThenKind<U, G> + 'static>(
    w: &Worker,
    lane: usize,
    _data: *const (),
    rec: *const Word,
) {
    // SAFETY: `then_impl` stored a `G` for this request, in order, and the
    // response holds a `U`.
    let (g, r) = unsafe { (w.take_then::<G>(lane), w.take_result::<U>(lane, rec)) };
    if migrate::is_relayed(&r) {
        // The property moved: the result follows (see `migrate`).
        return relayed_then::<U, G, K>(w, r, g);
    }
    if pull::is_large(&r) {
        // Too large for the response: a fiber pulls it, then calls back.
        w.spawn_boxed(Box::new(move || {
            let r = pull::resolve(r);
            if let Some((what, p)) = K::run(g, r) {
                if let Some(w) = context::current() {
                    w.report_panic(what, p);
                }
            }
        }));
        return;
    }
    if let Some((what, p)) = K::run(g, r) {
        w.report_panic(what, p);
    }
}

/// Waits for the result of a request that a moved property's first cell
/// relays (its answer `r`), for a callback.
#[cold]
#[inline(never)]
fn relayed_then<U: Transferable, G: 'static, K: ThenKind<U, G> + 'static>(w: &Worker, r: thread::Result<U>, g: G) {
    let then: migrate::Then<U> = Box::new(move |w, r| {
        if let Some((what, p)) = K::run(g, r) {
            w.report_panic(what, p);
        }
    });
    migrate::await_relayed(w, r, migrate::Reply::Then(then))
}

/// Runs `f` on the property at `cell` by the local shortcut, at once or
/// deferred (see `then_impl`), then `then` with its result; a closure that
/// may not reach the value now (see `property::check_reachable`) is
/// refused: `then` gets the refusal as the closure's panic.
fn run_local_then<T, F, U, G, K>(w: &Worker, cell: NonNull<PropertyCell<T>>, f: F, then: G)
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Transferable,
    G: 'static,
    K: ThenKind<U, G> + 'static,
{
    // SAFETY: on the trustee, and the property lives: a request names it.
    if unsafe { property::moved(cell.as_ptr().cast()) } {
        // The property moved: follow it, at this request's turn.
        let then: migrate::Then<U> = Box::new(move |w, r| {
            if let Some((what, p)) = K::run(then, r) {
                w.report_panic(what, p);
            }
        });
        let t = w.index;
        return migrate::route(w, t, cell.as_ptr(), migrate::Closure::new(f), migrate::Reply::Then(then), true);
    }
    // SAFETY: on the trustee, and the property lives: a request names it
    // (see `property`).
    let r = match unsafe { property::check_reachable(cell.as_ptr().cast()) } {
        Ok(()) => {
            let _g = w.enter_delegated();
            // SAFETY: on the trustee, no other closure running (deferred
            // otherwise) and no launched closure holding the value.
            catch_unwind(AssertUnwindSafe(|| f(unsafe { &mut *(*cell.as_ptr()).value.get() })))
        }
        Err(why) => Err(Box::new(why) as Box<dyn Any + Send>),
    };
    if let Some((what, p)) = K::run(then, r) {
        w.report_panic(what, p);
    }
}

/// The answer to a closure on the property at `prop` that may not reach
/// the value in this cell: a moved property's first cell relays it (see
/// `migrate`); others refuse it with `why`.
///
/// # Safety
/// `prop` must be a live `PropertyCell<T>` of this trustee.
#[cold]
#[inline(never)]
unsafe fn refusal<T, F, U>(prop: *mut u8, f: F, why: &'static str) -> thread::Result<U>
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Transferable,
{
    // SAFETY: per the contract.
    if unsafe { property::moved(prop.cast()) } {
        // SAFETY: as above; served in a client's batch.
        return unsafe { migrate::relay::<T, _>(prop.cast(), migrate::Closure::new(f)) };
    }
    Err(Box::new(why))
}

/// Runs closure `F` on the property `T` at `prop` (on the trustee).
pub(crate) unsafe fn property_shim<T, F, U>(prop: *mut u8, env: *mut u8, out: &mut Responder<'_>)
where
    T: Send + 'static,
    F: FnOnce(&mut T) -> U + Send + 'static,
    U: Transferable,
{
    // SAFETY: the request was encoded with this shim for an `F`, and `prop`
    // is a live `PropertyCell<T>` whose trustee is this thread: the closure
    // gets exclusive access.
    let f: F = unsafe { take_value(env as *const Word) };
    let cell = prop.cast::<PropertyCell<T>>();
    // SAFETY: as above.
    if let Err(why) = unsafe { property::check_reachable(prop.cast()) } {
        // SAFETY: as above.
        return out.put_any::<U>(unsafe { refusal::<T, F, U>(prop, f, why) });
    }
    let observed = if profile::active() { profile::counters::service_start(prop as usize) } else { None };
    // SAFETY: a live, reachable property of this trustee (checked above),
    // which runs one closure at a time: exclusive access.
    out.put_any(catch_unwind(AssertUnwindSafe(|| f(unsafe { &mut *(*cell).value.get() }))));
    if let Some(start) = observed {
        profile::counters::served(prop as usize, std::any::type_name::<T>(), start);
    }
}

/// Runs the `fn` named by the request with an argument `V` that came
/// serialized from another process (see `apply_with`).
pub(crate) unsafe fn with_shim<T: Send + 'static, V: Transferable, U: Transferable>(
    prop: *mut u8,
    env: *mut u8,
    out: &mut Responder<'_>,
) {
    // SAFETY: encoded by `apply_with` for these types: the offset of a
    // `fn(&mut T, V) -> U` of this binary, then the tail with `V`
    // serialized.
    let f: fn(&mut T, V) -> U = unsafe { crate::channel::remote::fn_at(take_value::<i64>(env as *const Word)) };
    // SAFETY: as above; the tail follows the offset word.
    let bytes = unsafe {
        let tail = (env as *const Word).add(crate::channel::record::value_words::<i64>());
        crate::channel::record::tail_bytes(tail, out)
    };
    let cell = prop.cast::<PropertyCell<T>>();
    // SAFETY: as above.
    if let Err(why) = unsafe { property::check_reachable(prop.cast()) } {
        // SAFETY: as above.
        if unsafe { property::moved(prop.cast()) } {
            // SAFETY: as above; served in a client's batch.
            return out.put_remote(unsafe { migrate::far::relay_with::<T, V, U>(prop, f, bytes) });
        }
        return out.put_remote::<U>(Err(Box::new(why)));
    }
    let observed = if profile::active() { profile::counters::service_start(prop as usize) } else { None };
    // An argument that does not decode is the caller's panic, not the
    // trustee's: it keeps serving.
    let r = catch_unwind(AssertUnwindSafe(|| {
        let tail = bytes.unwrap_or_else(|m| panic!("{m}"));
        let v: V = crate::channel::remote::try_deserialize_tail(tail).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: `prop` is a live `PropertyCell<T>` of this trustee, which
        // runs one closure at a time: exclusive access.
        f(unsafe { &mut *(*cell).value.get() }, v)
    }));
    out.put_remote(r);
    if let Some(start) = observed {
        profile::counters::served(prop as usize, std::any::type_name::<T>(), start);
    }
}

impl<T: Send + 'static> Trust<T> {
    pub(crate) fn from_parts(cell: *mut PropertyCell<T>, trustee: usize, runtime: u64, id: u64) -> Self {
        Trust {
            cell: NonNull::new(cell).expect("null property"),
            trustee: trustee as u32,
            runtime,
            id,
            _owns: PhantomData,
        }
    }

    fn ctx(&self) -> Ctx {
        if let Some(w) = context::current() {
            assert!(w.shared.id == self.runtime, "gossamer: this Trust belongs to another runtime");
            return Ctx::Worker(w);
        }
        match Shared::find(self.runtime) {
            Some(s) => Ctx::Outside(s),
            None => panic!("gossamer: the runtime that owns this Trust has shut down"),
        }
    }

    /// The trustee the property was entrusted to, which this trust names.
    /// After [`migrate_to`](Trust::migrate_to) that trustee relays requests
    /// to the one that holds the property now, until it has told the
    /// issuing thread where that is (then the thread sends there itself).
    pub fn trustee(&self) -> TrusteeRef {
        TrusteeRef::new(self.trustee as usize, self.runtime)
    }

    /// What names the property in the whole program: its runtime, its
    /// trustee thread and its address in the trustee's process. Equal for
    /// every trust to one property, wherever the trust is.
    pub(crate) fn identity(&self) -> (u64, u32, usize) {
        (self.runtime, self.trustee, self.cell.as_ptr().addr())
    }

    /// True when the calling thread is the property's trustee, so closures
    /// run directly (the local-trustee shortcut).
    pub fn is_local(&self) -> bool {
        context::current().is_some_and(|w| w.shared.id == self.runtime && w.index == self.trustee as usize)
    }

    /// Moves the property to trustee `to` while the program runs, and
    /// waits until it is there; a no-op if it is there already.
    ///
    /// Every request, issued before, during or after the move, from any
    /// trust to the property on any thread, runs exactly once, on whichever
    /// trustee holds the value when it arrives, and the requests of each
    /// fiber (`apply_then` ones still queued included) run in the order it
    /// issued them. Every trust stays valid: a thread's requests first go
    /// to the trustee the property was entrusted to, which relays them to
    /// the one that holds the value and tells the thread where that is;
    /// from then on the thread sends straight there, changing its route
    /// only while none of its requests to the property is outstanding (see
    /// the `trust::migrate` module for the protocol). The property is
    /// dropped once, by the trustee that holds it when the last trust is
    /// gone.
    ///
    /// ```
    /// let rt = gossamer::Runtime::builder().workers(2).build()?;
    /// rt.block_on(|| {
    ///     let counter = gossamer::trustee(0).entrust(0u64);
    ///     counter.apply_then(|c| *c += 1, |_| {});
    ///     counter.migrate_to(gossamer::trustee(1));
    ///     // Runs on thread 1 now; the request issued before the move ran first.
    ///     assert_eq!(counter.apply(|c| { *c += 1; *c }), 2);
    /// });
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    ///
    /// # Panics
    /// Outside a fiber of the trust's runtime, or in delegated context
    /// (like [`apply`](Trust::apply)); if `to` is a trustee of another
    /// runtime or another process; if a launched closure holds or awaits
    /// the property's latch (a `Trust<Latch<T>>` being launched on).
    ///
    /// Requests that come from another process (`apply_with` and its forms,
    /// from a trust sent there) follow the property too, always through the
    /// trustee it was entrusted to. So do launches on a `Trust<Latch<T>>`:
    /// the launched fiber runs on the trustee that holds the value, which
    /// keeps it while the fiber holds or awaits the latch.
    pub fn migrate_to(&self, to: TrusteeRef) {
        let w = self.worker_here("migrate_to");
        assert!(to.runtime() == self.runtime, "gossamer: migrate_to: the trustee belongs to another runtime");
        migrate::migrate(w, self.trustee as usize, self.cell.as_ptr(), to.index())
    }

    /// The worker of the calling fiber, for the calls that must run in a
    /// fiber of this trust's process.
    fn worker_here(&self, call: &str) -> &'static Worker {
        let w = context::current().filter(|w| w.shared.id == self.runtime).unwrap_or_else(|| {
            panic!("gossamer: {call} must be called from a fiber of the trust's runtime (block_on or spawn)")
        });
        assert!(
            w.shared.is_local(self.trustee as usize),
            "gossamer: {call}: this trust's property is in another process; call it from a fiber of that process"
        );
        w
    }

    /// # Safety
    /// Only on the trustee thread, outside any other access to the value.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    unsafe fn value_mut(&self) -> &mut T {
        // SAFETY: per the caller.
        unsafe { &mut *(*self.cell.as_ptr()).value.get() }
    }

    /// Runs `f` on the trustee, exclusively, and waits for its result
    /// (§2.4.1). Only the calling fiber is suspended: the thread runs other
    /// fibers and serves its own requests meanwhile.
    ///
    /// ```
    /// let rt = gossamer::Runtime::builder().workers(2).build()?;
    /// rt.block_on(|| {
    ///     let names = gossamer::trustee(1).entrust(Vec::<u32>::new());
    ///     let len = names.apply(|v| {
    ///         v.push(7); // runs on thread 1, with `&mut` to the property
    ///         v.len()
    ///     });
    ///     assert_eq!(len, 1);
    /// });
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    ///
    /// A panic in `f` is caught on the trustee and resumed here, like
    /// joining a thread; the trustee keeps serving and the property stays
    /// as `f` left it (no poisoning).
    ///
    /// `f` may capture plain values (see [`Delegable`]), so it runs only on
    /// a trustee in this process. For a trustee that may be in another
    /// process, write [`apply_with`](Trust::apply_with), whose code is a
    /// `fn`: `trust.apply_with(|v, ()| .., ())`.
    ///
    /// # Panics
    /// In delegated context (inside a delegated closure or a then-callback),
    /// where nothing may block: use [`apply_then`](Trust::apply_then), or
    /// [`launch`](Trust::launch) for the outer call. On a `Trust<Latch<T>>`
    /// while a launched closure holds or awaits its latch (the property is
    /// lent: reach it with `launch`). If the trustee is in another process,
    /// before anything is sent (use `apply_with`).
    #[inline]
    pub fn apply<F, U>(&self, f: F) -> U
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        self.apply_unchecked(f)
    }

    #[inline]
    pub(crate) fn apply_unchecked<F, U>(&self, f: F) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        self.apply_as(f, Call::User("apply"))
    }

    #[inline]
    fn apply_as<F, U>(&self, f: F, call: Call) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        match self.ctx() {
            Ctx::Worker(w) => {
                w.check_may_block();
                if w.index == self.trustee as usize {
                    // A fiber that only ever hits its own trustee would
                    // never suspend: now and then, let the others run.
                    w.local_turn();
                    if profile::active() {
                        profile::counters::request(w, self.cell.as_ptr() as usize, std::any::type_name::<T>(), w.index);
                    }
                    // Earlier requests of this thread come first.
                    w.run_deferred();
                    // SAFETY: on the trustee.
                    if let Err(why) = unsafe { property::check_reachable(self.cell.as_ptr().cast()) } {
                        // SAFETY: as above.
                        if unsafe { property::moved(self.cell.as_ptr().cast()) } {
                            return migrate::call(w, w.index, self.cell.as_ptr(), migrate::Closure::new(f));
                        }
                        panic!("{why}");
                    }
                    let g = w.enter_delegated();
                    // SAFETY: we are the trustee, not inside a closure
                    // (checked above: closures never nest on a worker), and
                    // no launched closure holds the value: access is
                    // exclusive.
                    let u = f(unsafe { self.value_mut() });
                    drop(g);
                    w.run_deferred();
                    return u;
                }
                if migrate::direct::active() && self.routed(w) {
                    // Moved, and this thread knows where to: see `migrate`.
                    return migrate::direct::call(w, self.trustee as usize, self.cell.as_ptr(), f);
                }
                if profile::active() {
                    return self.apply_observed(w, f, call);
                }
                let wait = Waiter::new(w.current_fiber());
                let c = Completion { run: complete_wake::<U>, data: wait.as_data() };
                w.enqueue(self.trustee as usize, property_shim::<T, F, U>, self.cell.as_ptr().cast(), f, c, call);
                wait.wait_transfer()
            }
            Ctx::Outside(s) => self.apply_outside(&s, f),
        }
    }

    /// True when this thread keeps a route to this trust's moved property
    /// (see `migrate::direct`) and may use it: the trustee is in this
    /// process, as a closure's request needs.
    #[cold]
    #[inline(never)]
    fn routed(&self, w: &Worker) -> bool {
        self.keeps_route(w) && !w.shared.crosses(Some(w.index), self.trustee as usize)
    }

    /// True when this thread keeps a route to this trust's moved property,
    /// of this process or another (see `migrate::direct`).
    #[cold]
    #[inline(never)]
    fn keeps_route(&self, w: &Worker) -> bool {
        migrate::direct::routes(migrate::direct::key(w, self.trustee as usize, self.cell.as_ptr().addr()))
    }

    /// `then_impl` by this thread's route to the moved property.
    #[cold]
    #[inline(never)]
    fn then_routed<F, U, G, K>(&self, w: &Worker, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable,
        G: 'static,
        K: ThenKind<U, G> + 'static,
    {
        let then: migrate::Then<U> = Box::new(move |w, r| {
            if let Some((what, p)) = K::run(then, r) {
                w.report_panic(what, p);
            }
        });
        let sent = migrate::direct::send(
            w,
            self.trustee as usize,
            self.cell.as_ptr(),
            migrate::Closure::new(f),
            migrate::Reply::Then(then),
        );
        assert!(sent.is_ok(), "gossamer: a route vanished under its caller");
    }

    /// `apply_unchecked` to another thread while profiles or wait tracking
    /// are on somewhere in the process: the same, counted and timed.
    #[cold]
    #[inline(never)]
    fn apply_observed<F, U>(&self, w: &'static Worker, f: F, call: Call) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        let t = self.trustee as usize;
        let key = self.cell.as_ptr() as usize;
        let ty = std::any::type_name::<T>();
        let start = w.shared.observe.wants(key, t).then(std::time::Instant::now);
        if start.is_some() {
            profile::counters::request(w, key, ty, t);
        }
        let wait = Waiter::new(w.current_fiber());
        let c = Completion { run: complete_wake::<U>, data: wait.as_data() };
        w.enqueue(t, property_shim::<T, F, U>, self.cell.as_ptr().cast(), f, c, call);
        let waiting = crate::runtime::stuck::Waiting::begin_at(w, profile::WaitOn::Apply(t), ty, key, start);
        let u = wait.wait_transfer();
        drop(waiting);
        if let Some(start) = start {
            profile::counters::round_trip(w, key, ty, t, start);
        }
        u
    }

    /// The id under which profiles and stuck dumps name this trust's
    /// property (shared by all its clones).
    pub fn profile_id(&self) -> profile::TrustId {
        profile::TrustId(self.cell.as_ptr() as usize as u64)
    }

    /// From a thread outside the runtime: hand the closure over through the
    /// trustee's injection queue and block this OS thread for the answer.
    #[cold]
    fn apply_outside<F, U>(&self, s: &Shared, f: F) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        assert!(
            !s.crosses(None, self.trustee as usize),
            "gossamer: a thread outside the runtime cannot delegate to a trustee in another process; spawn a fiber"
        );
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let cell = SendPtr(self.cell);
        s.inject(
            self.trustee as usize,
            Box::new(move || {
                let cell = cell;
                // SAFETY: injected tasks run on the trustee thread.
                if unsafe { property::moved(cell.0.as_ptr().cast()) } {
                    // The property moved: this trustee sends it on.
                    let w = context::current().expect("gossamer: injected task outside a worker");
                    let then: migrate::Then<U> = Box::new(move |_, r| {
                        let _ = tx.send(r);
                    });
                    let t = w.index;
                    return migrate::route(
                        w,
                        t,
                        cell.0.as_ptr(),
                        migrate::Closure::new(f),
                        migrate::Reply::Then(then),
                        false,
                    );
                }
                // SAFETY: injected tasks run on the trustee thread in
                // delegated context: exclusive access to the value, unless
                // a launched closure holds it (checked first).
                let r = match unsafe { property::check_reachable(cell.0.as_ptr().cast()) } {
                    // SAFETY: reachable (checked just now): exclusive access.
                    Ok(()) => catch_unwind(AssertUnwindSafe(|| f(unsafe { &mut *(*cell.0.as_ptr()).value.get() }))),
                    Err(why) => Err(Box::new(why) as Box<dyn Any + Send>),
                };
                let _ = tx.send(r);
            }),
        );
        match rx.recv() {
            Ok(Ok(u)) => u,
            Ok(Err(p)) => resume_unwind(p),
            Err(_) => panic!("gossamer: the runtime shut down before the trustee answered"),
        }
    }

    /// Runs `f` on the trustee without waiting (§2.4.2): `then` runs later
    /// on this thread with the result. Allowed in delegated context.
    ///
    /// ```
    /// use std::cell::Cell;
    /// use std::rc::Rc;
    ///
    /// let rt = gossamer::Runtime::builder().workers(2).build()?;
    /// rt.block_on(|| {
    ///     let counter = gossamer::trustee(1).entrust(0u64);
    ///     let seen = Rc::new(Cell::new(0)); // callbacks run on this thread
    ///     for _ in 0..10 {
    ///         let s = seen.clone();
    ///         counter.apply_then(|c| { *c += 1; *c }, move |n| s.set(s.get().max(n)));
    ///     }
    ///     // Requests from one fiber run in order: this one comes last.
    ///     assert_eq!(counter.apply(|c| *c), 10);
    ///     assert_eq!(seen.get(), 10);
    /// });
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    ///
    /// On the trustee's own thread `f` runs at once, unless a closure runs
    /// there now (this call comes from delegated context): then `f` and
    /// `then` are queued and run right after that closure, in the order
    /// issued, so that `f` never gets a second `&mut` beside a live borrow
    /// — not even when the running closure reached its own property
    /// (through a `static`, or a trust the value holds to itself).
    ///
    /// If `f` panics, `then` does not run; the panic is logged (`tracing`,
    /// error level) and counted in [`Runtime::stats`](crate::Runtime::stats).
    /// Use [`try_apply_then`](Trust::try_apply_then) to handle it yourself.
    ///
    /// # Panics
    /// As [`apply`](Trust::apply), if the trustee is in another process:
    /// there, use [`apply_with_then`](Trust::apply_with_then).
    #[inline]
    pub fn apply_then<F, U, G>(&self, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(U) + 'static,
    {
        self.then_impl::<F, U, G, PlainThen>(f, then, Call::User("apply_then"))
    }

    /// Like [`apply_then`](Trust::apply_then), but `then` always runs, with
    /// `Err` if `f` panicked on the trustee.
    pub fn try_apply_then<F, U, G>(&self, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(Result<U, Panicked>) + 'static,
    {
        self.then_impl::<F, U, G, TryThen>(f, then, Call::User("try_apply_then"))
    }

    #[inline]
    fn then_impl<F, U, G, K>(&self, f: F, then: G, call: Call)
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: 'static,
        K: ThenKind<U, G> + 'static,
    {
        match self.ctx() {
            Ctx::Worker(w) => {
                let t = self.trustee as usize;
                if profile::active() {
                    profile::counters::request(w, self.cell.as_ptr() as usize, std::any::type_name::<T>(), t);
                }
                if w.index == t {
                    let cell = SendPtr(self.cell);
                    if w.must_defer() {
                        // A closure runs on this worker now, maybe on this
                        // very property (reached through a static, or a
                        // trust the value holds to itself): never a second
                        // `&mut` beside its borrow. This request runs after
                        // it, in issue order with this thread's others.
                        w.defer(Box::new(move || {
                            let cell = cell;
                            run_local_then::<T, F, U, G, K>(w, cell.0, f, then)
                        }));
                        return;
                    }
                    run_local_then::<T, F, U, G, K>(w, cell.0, f, then);
                    w.run_deferred();
                    return;
                }
                if migrate::direct::active() && self.routed(w) {
                    // Moved, and this thread knows where to: see `migrate`.
                    return self.then_routed::<F, U, G, K>(w, f, then);
                }
                let c = Completion { run: complete_then::<U, G, K>, data: std::ptr::null() };
                // Queued first: a request refused at the process boundary
                // leaves no callback behind.
                w.enqueue(t, property_shim::<T, F, U>, self.cell.as_ptr().cast(), f, c, call);
                w.store_then(t, then);
            }
            Ctx::Outside(s) => {
                // No scheduler here: wait for the result, then call back.
                let r = catch_unwind(AssertUnwindSafe(|| self.apply_outside(&s, f)));
                if let Some((what, p)) = K::run(then, r) {
                    s.report_panic(None, what, p);
                }
            }
        }
    }

    /// Like [`apply`](Trust::apply), with an extra argument `w` passed to
    /// the closure by value (§2.4.3.3), and the form to use wherever the
    /// trustee may be in another process.
    ///
    /// * **The code is a `fn`**: a closure that captures nothing (it
    ///   coerces to `fn(&mut T, V) -> U`; one that captures is a compile
    ///   error, E0308). Data goes in `w`: strings, vectors, boxes, trusts,
    ///   borrowed data (cloned); `()` when there is none. Only code given as
    ///   a `fn` may cross processes: it travels as its offset in the binary,
    ///   while a generic closure (as [`apply`](Trust::apply) takes) is
    ///   refused there, because on stable Rust nothing proves what it
    ///   captured means the same in another process (see
    ///   [`Delegable`]).
    /// * **The argument moves within a process and is copied into
    ///   another**: there it is serialized, the original is dropped here
    ///   right after (before this call waits), and the trustee gets a copy
    ///   rebuilt by serde. A type whose `Drop` has effects beyond its own
    ///   memory (a file, a counter, a connection) thus sees one drop in each
    ///   process, as for a clone: send plain data, and keep such resources
    ///   in a property, sending a [`Trust`] to it (a trust crosses as a true
    ///   move: the copy owns a clone in transit, the original's drop
    ///   releases its own).
    ///
    /// ```
    /// # gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
    /// use std::collections::HashMap;
    /// let table = gossamer::local_trustee().entrust(HashMap::new());
    /// let (k, v) = ("greeting".to_string(), "hello".to_string());
    /// table.apply_with(|t, (k, v)| t.insert(k, v), (k, v));
    /// assert_eq!(table.apply_with(|t, ()| t.len(), ()), 1);
    /// # });
    /// ```
    #[inline]
    pub fn apply_with<V, U>(&self, f: fn(&mut T, V) -> U, w: V) -> U
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        match context::current() {
            Some(cw) if cw.shared.id == self.runtime && !cw.shared.is_local(self.trustee as usize) => {
                cw.check_may_block();
                let (key, ty) = (self.cell.as_ptr() as usize, std::any::type_name::<T>());
                if profile::active() {
                    profile::counters::request(cw, key, ty, self.trustee as usize);
                }
                if migrate::direct::active() && self.keeps_route(cw) {
                    // Moved, and this thread knows where to: see `migrate::far`.
                    let (u, dropped) = migrate::far::call_routed(cw, self.trustee as usize, self.cell.as_ptr(), f, w);
                    if let Some(p) = dropped {
                        drop(u);
                        resume_unwind(p);
                    }
                    return u;
                }
                let wait = Waiter::new(cw.current_fiber());
                let c = Completion { run: complete_wake::<U>, data: wait.as_data() };
                let ((), original) = crate::channel::transfer::toward(self.trustee as usize, || {
                    crate::channel::remote::with_tail(w, |tail| {
                        cw.enqueue_remote_fn(
                            self.trustee as usize,
                            with_shim::<T, V, U>,
                            self.cell.as_ptr().cast(),
                            f as usize,
                            Some(tail),
                            c,
                        )
                    })
                });
                // Sent as a copy (unless its bytes moved into the request):
                // the original ends here (see above); a panic of its `Drop`
                // is the caller's, once the answer is in.
                let dropped = original.and_then(crate::channel::remote::drop_original);
                let waiting =
                    crate::runtime::stuck::Waiting::begin(cw, profile::WaitOn::Apply(self.trustee as usize), ty, key);
                let u = wait.wait_transfer();
                drop(waiting);
                if let Some(p) = dropped {
                    drop(u);
                    resume_unwind(p);
                }
                u
            }
            Some(cw)
                if cw.shared.id == self.runtime
                    && cw.shared.simulated_foreign(Some(cw.index), self.trustee as usize) =>
            {
                // Strict mode: the rules of another process, this
                // process's memory (see `runtime::strict`).
                // The argument is rebuilt on the trustee, the result here,
                // and a panic of the original's `Drop` is resumed once the
                // answer is in, as across processes.
                strict::check_code(f as usize);
                let bytes = crate::channel::remote::with_serialized(&w, <[u8]>::to_vec);
                let dropped = crate::channel::remote::drop_original(w);
                let u = self.apply_as(move |t| strict::copy_across(f(t, strict::rebuild::<V>(&bytes))), Call::Copied);
                if let Some(p) = dropped {
                    drop(u);
                    resume_unwind(p);
                }
                u
            }
            _ => self.apply_unchecked(move |t| f(t, w)),
        }
    }

    /// The non-blocking form of [`apply_with`](Trust::apply_with), under
    /// the same rules (code as a `fn`, the argument copied into another
    /// process).
    #[inline]
    pub fn apply_with_then<V, U, G>(&self, f: fn(&mut T, V) -> U, w: V, then: G)
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(U) + 'static,
    {
        self.with_then_impl::<V, U, G, PlainThen>(f, w, then)
    }

    /// Like [`apply_with_then`](Trust::apply_with_then), but `then` always
    /// runs, with `Err` if `f` panicked on the trustee.
    #[inline]
    pub fn try_apply_with_then<V, U, G>(&self, f: fn(&mut T, V) -> U, w: V, then: G)
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(Result<U, Panicked>) + 'static,
    {
        self.with_then_impl::<V, U, G, TryThen>(f, w, then)
    }

    #[inline]
    fn with_then_impl<V, U, G, K>(&self, f: fn(&mut T, V) -> U, w: V, then: G)
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: 'static,
        K: ThenKind<U, G> + 'static,
    {
        match context::current() {
            Some(cw) if cw.shared.id == self.runtime && !cw.shared.is_local(self.trustee as usize) => {
                let t = self.trustee as usize;
                if profile::active() {
                    profile::counters::request(cw, self.cell.as_ptr() as usize, std::any::type_name::<T>(), t);
                }
                if migrate::direct::active() && self.keeps_route(cw) {
                    // Moved, and this thread knows where to: see `migrate::far`.
                    let then: migrate::Then<U> = Box::new(move |w, r| {
                        if let Some((what, p)) = K::run(then, r) {
                            w.report_panic(what, p);
                        }
                    });
                    return migrate::far::then_routed(cw, t, self.cell.as_ptr(), f, w, then);
                }
                let c = Completion { run: complete_then::<U, G, K>, data: std::ptr::null() };
                let ((), original) = crate::channel::transfer::toward(t, || {
                    crate::channel::remote::with_tail(w, |tail| {
                        cw.enqueue_remote_fn(
                            t,
                            with_shim::<T, V, U>,
                            self.cell.as_ptr().cast(),
                            f as usize,
                            Some(tail),
                            c,
                        )
                    })
                });
                cw.store_then(t, then);
                // Sent as a copy (unless its bytes moved into the request):
                // the original ends here (see `apply_with`), once the
                // request and its callback are both in place.
                drop(original);
            }
            Some(cw)
                if cw.shared.id == self.runtime
                    && cw.shared.simulated_foreign(Some(cw.index), self.trustee as usize) =>
            {
                // Strict mode: the rules of another process, this
                // process's memory (see `runtime::strict`).
                // The argument is rebuilt on the trustee, as across
                // processes; the original ends once the request is queued.
                strict::check_code(f as usize);
                let bytes = crate::channel::remote::with_serialized(&w, <[u8]>::to_vec);
                self.then_impl::<_, U, G, K>(
                    move |t| strict::copy_across(f(t, strict::rebuild::<V>(&bytes))),
                    then,
                    Call::Copied,
                );
                drop(w);
            }
            _ => self.then_impl::<_, U, G, K>(move |t| f(t, w), then, Call::User("apply_with_then")),
        }
    }

    /// Runs `f` on the trustee and returns a future for its result, from
    /// any thread: a task of any executor (tokio's multi-thread runtime, for
    /// one), a plain thread, or a fiber. Nothing blocks: the request is
    /// handed to the trustee at once (before the first poll), and the
    /// trustee's answer wakes the task. Issue as many as you like before
    /// awaiting them; from one thread they run in the order issued.
    ///
    /// From outside the runtime the request goes through the trustee's
    /// submission queue (one compare-and-swap to issue it, no lock); on a
    /// worker thread it goes like [`try_apply_then`](Trust::try_apply_then),
    /// so it is allowed in delegated context too. In a fiber, wait for it
    /// with [`gossamer::block_on`](crate::block_on).
    ///
    /// A panic in `f` is resumed where the future is polled. Dropping the
    /// future is always safe: see [`ApplyFuture`] for what happens to a
    /// request whose future is gone.
    ///
    /// ```
    /// # fn main() {
    /// let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
    /// let counter = rt.entrust(0u64);
    /// let tokio_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    /// let total = tokio_rt.block_on(async move {
    ///     let tasks: Vec<_> = (0..100)
    ///         .map(|_| {
    ///             let c = counter.clone();
    ///             tokio::spawn(async move { c.apply_async(|v| *v += 1).await })
    ///         })
    ///         .collect();
    ///     for t in tasks {
    ///         t.await.unwrap();
    ///     }
    ///     counter.apply_async(|v| *v).await
    /// });
    /// assert_eq!(total, 100);
    /// # }
    /// ```
    ///
    /// # Panics
    /// From outside the runtime, if it has shut down, or if the trustee is
    /// in another process (delegate from a fiber there, or use
    /// [`Handle::spawn`](crate::Handle::spawn)); in a fiber, if the trustee
    /// is in another process (use
    /// [`apply_with_async`](Trust::apply_with_async), whose code is a `fn`).
    pub fn apply_async<F, U>(&self, f: F) -> ApplyFuture<U>
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with_async`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        match context::current() {
            Some(w) if w.shared.id == self.runtime => {
                let done = Arc::new(future::Done::new());
                let d = done.clone();
                self.try_apply_then(f, move |r: Result<U, Panicked>| d.complete(Some(r.map_err(Panicked::into_panic))));
                ApplyFuture::from_done(done)
            }
            // Outside the runtime (a worker of another runtime counts).
            _ => self.submit_outside(f),
        }
    }

    /// Like [`apply_async`](Trust::apply_async), with an argument passed to
    /// the closure by value, as in [`apply_with`](Trust::apply_with): heap
    /// or variable-size data the closure may not capture.
    ///
    /// ```
    /// # fn main() {
    /// use std::collections::HashMap;
    /// let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
    /// let table = rt.entrust(HashMap::<String, u64>::new());
    /// let n = gossamer::block_on(table.apply_with_async(
    ///     |t, key: String| {
    ///         *t.entry(key).or_insert(0) += 1;
    ///         t.len()
    ///     },
    ///     "greeting".to_string(),
    /// ));
    /// assert_eq!(n, 1);
    /// # }
    /// ```
    ///
    /// # Panics
    /// As [`apply_async`](Trust::apply_async).
    pub fn apply_with_async<V, U>(&self, f: fn(&mut T, V) -> U, w: V) -> ApplyFuture<U>
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        match context::current() {
            Some(cw) if cw.shared.id == self.runtime => {
                let done = Arc::new(future::Done::new());
                let d = done.clone();
                self.try_apply_with_then(f, w, move |r: Result<U, Panicked>| {
                    d.complete(Some(r.map_err(Panicked::into_panic)))
                });
                ApplyFuture::from_done(done)
            }
            _ => self.submit_outside(move |t: &mut T| f(t, w)),
        }
    }

    /// From a thread outside the runtime: queue the request with its
    /// trustee (see `trust::future`).
    fn submit_outside<F, U>(&self, f: F) -> ApplyFuture<U>
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Transferable,
    {
        let t = self.trustee as usize;
        Shared::with_outside(self.runtime, |s| {
            assert!(
                !s.crosses(None, t),
                "gossamer: a thread outside the runtime cannot delegate to a trustee in another process; spawn a \
                 fiber (Handle::spawn) and delegate from there"
            );
            future::submit(s, t, self.cell.as_ptr(), f)
        })
        .unwrap_or_else(|| panic!("gossamer: the runtime that owns this Trust has shut down"))
    }

    /// Toggles `id` in the property's id set, from wherever we are.
    fn toggle(&self, id: u64) {
        toggle_anywhere(self.cell.as_ptr() as *mut property::Header, self.trustee as usize, self.runtime, id);
    }
}

impl<T: Send + 'static> Clone for Trust<T> {
    /// Clones the trust (not the property): an asynchronous toggle of a new
    /// id, so it works anywhere, delegated context included.
    fn clone(&self) -> Self {
        let id = match context::current() {
            Some(w) if w.shared.id == self.runtime => w.new_id(),
            _ => outside_id(),
        };
        self.toggle(id);
        Trust { cell: self.cell, trustee: self.trustee, runtime: self.runtime, id, _owns: PhantomData }
    }
}

impl<T> Drop for Trust<T> {
    fn drop(&mut self) {
        toggle_anywhere(self.cell.as_ptr() as *mut property::Header, self.trustee as usize, self.runtime, self.id);
    }
}

/// Toggles `id` in the id set of the property at `h` (trustee `t`): at
/// once on the trustee, as a message from another worker, through the
/// injection queue from outside the runtime, or not at all once the runtime
/// is gone (it dropped its properties).
///
/// A trust may be cloned and dropped on any thread, inside or outside any
/// runtime, whatever process its trustee is in: this never panics (it runs
/// in `Drop`, perhaps while a thread unwinds). From a thread outside the
/// runtime, a toggle for a trustee in another process goes through a
/// worker of this process — injected into the first local worker, which
/// forwards it over the fabric as its own message — since only a worker
/// has slots to another process. The first local worker is always the
/// same one, so toggles from plain threads keep their order.
fn toggle_anywhere(h: *mut property::Header, t: usize, runtime: u64, id: u64) {
    let cell = SendPtr(h);
    if let Some(w) = context::current() {
        if w.shared.id == runtime {
            if w.index == t {
                // SAFETY: on the trustee thread.
                unsafe { property::toggle(w, cell.0, id) };
            } else {
                w.send_plain(t, move || {
                    let cell = cell;
                    if let Some(w) = context::current() {
                        // SAFETY: runs on the trustee thread.
                        unsafe { property::toggle(w, cell.0, id) }
                    }
                });
            }
            return;
        }
    }
    let on_trustee = move || {
        let cell = cell;
        if let Some(w) = context::current() {
            // SAFETY: runs on the trustee thread (injected there, or sent
            // there as a message).
            unsafe { property::toggle(w, cell.0, id) }
        }
    };
    Shared::with_outside(runtime, |s| {
        if s.is_local(t) {
            s.inject(t, Box::new(on_trustee));
        } else {
            // Forwarded by a local worker, which runs it in delegated
            // context: `send_plain` queues without blocking.
            s.inject(
                s.local.start,
                Box::new(move || {
                    if let Some(w) = context::current() {
                        w.send_plain(t, on_trustee);
                    }
                }),
            );
        }
    });
}

impl<T> std::fmt::Debug for Trust<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust").field("trustee", &self.trustee).field("id", &self.id).finish()
    }
}
