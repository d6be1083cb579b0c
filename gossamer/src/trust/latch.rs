//! `Latch<T>`: mutual exclusion among the fibers of one thread, and
//! `launch`, which runs a closure that may block in a fresh fiber on the
//! trustee, holding the property's latch (§2.4.3).
//!
//! A latch uses no atomic instruction: it is `!Sync`, so only the fibers
//! of the thread that owns it can reach it. A fiber that finds it held
//! suspends and is handed the latch, in FIFO order, when it is released.
//!
//! A launched closure borrows the latch across suspensions, so while one
//! holds or awaits it the property is *lent*: every other closure sent to
//! the trust (`apply`, `apply_then`, …) is refused with a panic, and so can
//! never reach the value mutably (`get_mut`, or replacing the latch) beside
//! that borrow. The launched fiber holds a trust of its own, so the
//! property outlives it whatever the caller does with its trusts. A
//! property that moved (`migrate_to`) is launched on where its value is
//! (`trust::migrate::launch`), and stays there while lent.
//!
//! A latch is not reentrant. A fiber that takes a latch it holds, or
//! launches (and so waits) on the property whose latch it holds, would wait
//! for itself: both panic at once, naming the mistake. A cycle through
//! other fibers (two launches, each holding the latch the other awaits) is
//! not refused; it shows in [`Runtime::stuck`](crate::Runtime::stuck).
//!
//! A launch on a trustee in another process (`launch_with`,
//! `launch_with_then`) starts a fiber there (as `spawn_with` does) that
//! launches the code on the trust, now local to it; the code is a `fn`,
//! which crosses as its offset in the binary, the rule of all code that
//! crosses processes. The generic `launch` and `launch_then` are for
//! trustees in this process.

use std::cell::{Cell, UnsafeCell};
use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;

use super::{Delegable, Transferable, Trust, Waiter};
use crate::fiber;
use crate::runtime::context;
use crate::runtime::profile::WaitOn;
use crate::runtime::stuck::Waiting;
use crate::runtime::worker::{Worker, NO_FIBER};

/// A fiber-level mutex for data owned by one thread. See the module docs.
pub struct Latch<T> {
    locked: Cell<bool>,
    /// The fiber holding the latch, while `locked` ([`NO_FIBER`] when it
    /// was taken outside the runtime's fibers).
    holder: Cell<u32>,
    waiters: UnsafeCell<VecDeque<u32>>,
    value: UnsafeCell<T>,
}

// SAFETY: a latch may move to another thread as a whole (it is not `Sync`,
// so it is never shared between threads).
unsafe impl<T: Send> Send for Latch<T> {}

impl<T> Latch<T> {
    /// A new, unlocked latch.
    pub fn new(value: T) -> Self {
        Latch {
            locked: Cell::new(false),
            holder: Cell::new(NO_FIBER),
            waiters: UnsafeCell::new(VecDeque::new()),
            value: UnsafeCell::new(value),
        }
    }

    /// True while some fiber holds the latch.
    pub fn is_locked(&self) -> bool {
        self.locked.get()
    }

    /// Takes the latch if it is free.
    pub fn try_lock(&self) -> Option<LatchGuard<'_, T>> {
        if self.locked.get() {
            None
        } else {
            self.locked.set(true);
            self.holder.set(context::current().map_or(NO_FIBER, |w| w.current_fiber()));
            Some(LatchGuard { latch: self })
        }
    }

    /// Takes the latch, suspending the calling fiber while another holds it.
    ///
    /// # Panics
    /// If the latch is held and the caller may not suspend (delegated
    /// context, or not a fiber of the runtime), or if the calling fiber
    /// holds it already: a latch is not reentrant, and waiting for itself
    /// would never end.
    pub fn lock(&self) -> LatchGuard<'_, T> {
        if let Some(g) = self.try_lock() {
            return g;
        }
        let w = context::current().expect("gossamer: Latch::lock would block outside the runtime");
        w.check_may_block();
        if self.held_by(w.current_fiber()) {
            panic!(
                "gossamer: this fiber already holds this Latch<{}> and takes it again: it would wait for itself \
                 forever (a latch is not reentrant; use the guard it already has)",
                std::any::type_name::<T>()
            );
        }
        // SAFETY: the waiter queue is only touched by this thread's fibers,
        // one at a time, and no reference to it outlives these calls.
        unsafe { (*self.waiters.get()).push_back(w.current_fiber()) };
        let _waiting = Waiting::begin(w, WaitOn::Lock, std::any::type_name::<T>(), self as *const Self as usize);
        // The releasing fiber hands the latch over and wakes us once.
        fiber::suspend();
        debug_assert!(self.locked.get());
        LatchGuard { latch: self }
    }

    /// The value, through exclusive access to the latch. (Inside a
    /// property, no closure gets that access while a launched closure
    /// holds the latch: see the module documentation.)
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The value, consuming the latch.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }

    /// True if `fiber` holds the latch.
    fn held_by(&self, fiber: u32) -> bool {
        self.locked.get() && fiber != NO_FIBER && self.holder.get() == fiber
    }

    fn unlock(&self) {
        // SAFETY: as in `lock`.
        let next = unsafe { (*self.waiters.get()).pop_front() };
        match next {
            Some(f) => {
                self.holder.set(f);
                context::current().expect("gossamer: latch released outside its runtime").make_ready(f)
            }
            None => self.locked.set(false),
        }
    }
}

impl<T: Default> Default for Latch<T> {
    fn default() -> Self {
        Latch::new(T::default())
    }
}

/// Holds a [`Latch`]; releases it (handing it to the next waiter) on drop.
pub struct LatchGuard<'a, T> {
    latch: &'a Latch<T>,
}

impl<T> Deref for LatchGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves exclusive access among this thread's fibers.
        unsafe { &*self.latch.value.get() }
    }
}

impl<T> DerefMut for LatchGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`.
        unsafe { &mut *self.latch.value.get() }
    }
}

impl<T> Drop for LatchGuard<'_, T> {
    fn drop(&mut self) {
        self.latch.unlock();
    }
}

/// On the trustee's thread in another process: `launch_with` of the `fn`
/// whose offset crossed, on the trust that came with the request.
fn far_launch_with<T, V, U>((trust, code, v): (Trust<Latch<T>>, i64, V)) -> U
where
    T: Send + 'static,
    V: Transferable,
    U: Transferable,
{
    // SAFETY: `code` is the offset `launch_with` took of a
    // `fn(&mut T, V) -> U` of this binary (`far_launch_with` is private, so
    // no other sender names it).
    let f: fn(&mut T, V) -> U = unsafe { crate::channel::remote::fn_at(code) };
    trust.launch_with(f, v)
}

/// The result of a launch in another process, or its panic resumed here.
fn far_result<U>(r: Result<U, crate::JoinError>) -> U {
    match r {
        Ok(u) => u,
        Err(p) => std::panic::resume_unwind(p.into_panic()),
    }
}

thread_local! {
    /// The fibers of this thread that hold a property's latch through a
    /// launch, with the property (its first cell's address, the same
    /// wherever the value moved).
    static LAUNCHED: std::cell::RefCell<Vec<(u32, usize)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// True if `fiber` of this thread holds the latch of the property at
/// `key` through a launch.
fn holds_by_launch(fiber: u32, key: usize) -> bool {
    LAUNCHED.with(|l| l.borrow().contains(&(fiber, key)))
}

/// The launched fiber's work, on the thread that holds the value: takes
/// the latch of the property `key` (its first cell), runs `f` and hands
/// the result to `answer`; `lent` is released once `f` is done.
pub(crate) fn run_launched<T, F, U, A>(lent: super::property::Lent, key: usize, latch: &Latch<T>, f: F, answer: A)
where
    F: FnOnce(&mut T) -> U,
    U: Send + 'static,
    A: FnOnce(thread::Result<U>),
{
    /// Forgets the fiber's hold when `f` ends, also by a panic.
    struct Held(u32, usize);
    impl Drop for Held {
        fn drop(&mut self) {
            let me = (self.0, self.1);
            LAUNCHED.with(|l| {
                let mut l = l.borrow_mut();
                if let Some(i) = l.iter().position(|e| *e == me) {
                    l.swap_remove(i);
                }
            });
        }
    }
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut g = latch.lock();
        let fiber = context::current().map_or(NO_FIBER, |w| w.current_fiber());
        LAUNCHED.with(|l| l.borrow_mut().push((fiber, key)));
        let _held = Held(fiber, key);
        f(&mut g)
    }));
    drop(lent);
    match r {
        // Shutdown abandoned this fiber and is unwinding its stack: the
        // caller may be gone (abandoned as well), so let the unwind finish
        // instead of answering.
        Err(p) if context::current().is_some_and(|w| w.shared.stopped()) => std::panic::resume_unwind(p),
        r => answer(r),
    }
}

/// Where a launched closure's result goes: a fiber or a callback on the
/// issuing worker.
#[derive(Clone, Copy)]
pub(crate) struct ReplyTo {
    worker: usize,
    target: *const (),
}

impl ReplyTo {
    /// The caller's thread.
    pub(crate) fn worker(&self) -> usize {
        self.worker
    }
}

// SAFETY: `target` is only dereferenced back on `worker`, its own thread.
unsafe impl Send for ReplyTo {}

pub(crate) fn deliver<R: Send + 'static>(reply: ReplyTo, r: R, finish: unsafe fn(&Worker, *const (), R)) {
    let w = context::current().expect("launched fiber outside its runtime");
    if reply.worker == w.index {
        // SAFETY: `finish` matches the target stored in `reply`.
        unsafe { finish(w, reply.target, r) };
    } else {
        w.send(reply.worker, move || {
            let reply = reply;
            let w = context::current().expect("launch reply outside its runtime");
            // SAFETY: as above.
            unsafe { finish(w, reply.target, r) };
        });
    }
}

unsafe fn finish_wait<U>(w: &Worker, target: *const (), r: thread::Result<U>) {
    // SAFETY: `target` is the `Waiter<U>` of a fiber suspended in `launch`.
    unsafe { Waiter::complete(w, target, r) }
}

unsafe fn finish_then<U, G: FnOnce(U)>(w: &Worker, target: *const (), r: thread::Result<U>) {
    // SAFETY: `target` is the boxed callback leaked by `launch_then`.
    let g = unsafe { Box::from_raw(target.cast::<G>().cast_mut()) };
    if let Some((what, p)) = <super::PlainThen as super::ThenKind<U, G>>::run(*g, r) {
        w.report_panic(what, p);
    }
}

impl<T: Send + 'static> Trust<Latch<T>> {
    /// Starts a fiber on the trustee's thread that takes the latch and runs
    /// `f` (§2.4.3). Unlike [`apply`](Trust::apply), `f` may block: call
    /// `apply` on other trusts, take other latches, join fibers. The caller
    /// waits for the result as with `apply`.
    ///
    /// ```
    /// use gossamer::Latch;
    ///
    /// let rt = gossamer::Runtime::builder().workers(2).build()?;
    /// rt.block_on(|| {
    ///     let log = gossamer::trustee(1).entrust(Latch::new(Vec::<u64>::new()));
    ///     let len = log.launch(|log| {
    ///         // Blocking inside (a join), which `apply` would refuse.
    ///         let answer = gossamer::spawn(|| 6 * 7).join().unwrap();
    ///         log.push(answer);
    ///         log.len()
    ///     });
    ///     assert_eq!(len, 1);
    /// });
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    ///
    /// As for `apply`, `f` may capture plain values, so it runs only on a
    /// trustee in this process: where the trustee may be in another
    /// process, write [`launch_with`](Trust::launch_with), whose code is a
    /// `fn` (`latch.launch_with(|v, ()| .., ())`). A generic closure for a
    /// trustee in another process panics here, before anything is sent.
    pub fn launch<F, U>(&self, f: F) -> U
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        let w = context::current().expect("gossamer: launch must be called from a fiber of the runtime");
        assert!(w.shared.id == self.runtime, "gossamer: this Trust belongs to another runtime");
        w.check_may_block();
        if w.shared.crosses(Some(w.index), self.trustee as usize) {
            crate::channel::remote::refuse_closure::<F>("launch", self.trustee as usize);
        }
        self.refuse_launch_into_itself(w, "launch");
        let wait = Waiter::<U>::new(w.current_fiber());
        let reply = ReplyTo { worker: w.index, target: wait.as_data() };
        self.start(w, f, reply, finish_wait::<U>);
        let _waiting = self.waiting(w);
        wait.wait()
    }

    /// Like [`launch`](Trust::launch), with an argument passed by value, for
    /// data the closure may not capture (trusts to use inside, heap data),
    /// and the form that works wherever the trustee is: as for
    /// [`apply_with`](Trust::apply_with), the code is a `fn` (a closure that
    /// captures nothing), and the argument moves within a process and is
    /// copied into another (serialized; the original is dropped here once
    /// sent).
    pub fn launch_with<V, U>(&self, f: fn(&mut T, V) -> U, v: V) -> U
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
    {
        let w = context::current().expect("gossamer: launch must be called from a fiber of the runtime");
        assert!(w.shared.id == self.runtime, "gossamer: this Trust belongs to another runtime");
        w.check_may_block();
        if w.shared.crosses(Some(w.index), self.trustee as usize) {
            let code = crate::channel::remote::fn_offset(f as usize);
            // The start goes to the origin: after what this thread sent
            // straight to where the value moved (see `start`).
            super::migrate::direct::wait_routed(w, self.trustee as usize, self.cell.as_ptr().addr());
            let handle = super::remote_ops::spawn_with(
                self.trustee as usize,
                far_launch_with::<T, V, U>,
                (self.clone(), code, v),
            );
            let _waiting = self.waiting(w);
            return far_result(handle.join());
        }
        self.refuse_launch_into_itself(w, "launch_with");
        let wait = Waiter::<U>::new(w.current_fiber());
        let reply = ReplyTo { worker: w.index, target: wait.as_data() };
        self.start(w, move |t| f(t, v), reply, finish_wait::<U>);
        let _waiting = self.waiting(w);
        wait.wait()
    }

    /// The non-blocking form of [`launch`](Trust::launch): `then` runs on
    /// this thread with the result. Allowed in delegated context. Like
    /// `launch`, for a trustee in this process only.
    pub fn launch_then<F, U, G>(&self, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U,
        F: Delegable, // delegated closures capture plain values only: pass references, heap data and trusts through `apply_with`
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(U) + 'static,
    {
        let w = context::current().expect("gossamer: launch_then must be called from the runtime");
        assert!(w.shared.id == self.runtime, "gossamer: this Trust belongs to another runtime");
        if w.shared.crosses(Some(w.index), self.trustee as usize) {
            crate::channel::remote::refuse_closure::<F>("launch_then", self.trustee as usize);
        }
        let target: *const () = Box::into_raw(Box::new(then)).cast_const().cast();
        self.start(w, f, ReplyTo { worker: w.index, target }, finish_then::<U, G>);
    }

    /// The non-blocking form of [`launch_with`](Trust::launch_with), under
    /// its rules (code as a `fn`, the argument copied into another process):
    /// `then` runs on this thread with the result. Allowed in delegated
    /// context.
    pub fn launch_with_then<V, U, G>(&self, f: fn(&mut T, V) -> U, v: V, then: G)
    where
        V: Transferable, // serialized across processes: must own its data, no reference or pointer
        U: Transferable, // serialized across processes: must own its data, no reference or pointer
        G: FnOnce(U) + 'static,
    {
        let w = context::current().expect("gossamer: launch_with_then must be called from the runtime");
        assert!(w.shared.id == self.runtime, "gossamer: this Trust belongs to another runtime");
        if w.shared.crosses(Some(w.index), self.trustee as usize) {
            // The request leaves now (or once what this thread sent
            // straight to where the value moved has run, see `start`); a
            // fiber of this thread waits for the result and runs `then`
            // with it, as the reply would here.
            let code = crate::channel::remote::fn_offset(f as usize);
            let (t, trust) = (self.trustee as usize, self.clone());
            let send = move |w: &Worker| {
                let handle = super::remote_ops::spawn_with(t, far_launch_with::<T, V, U>, (trust, code, v));
                w.spawn_boxed(Box::new(move || match handle.join() {
                    Ok(u) => then(u),
                    Err(p) => {
                        if let Some(w) = context::current() {
                            w.report_panic("launched closure", p.into_panic());
                        }
                    }
                }));
            };
            super::migrate::direct::after_routed(w, t, self.cell.as_ptr().addr(), send);
            return;
        }
        let target: *const () = Box::into_raw(Box::new(then)).cast_const().cast();
        self.start(w, move |t| f(t, v), ReplyTo { worker: w.index, target }, finish_then::<U, G>);
    }

    /// Panics if the calling fiber holds this property's latch through a
    /// launch (it is a launched closure of this property): the new launch
    /// would wait for the latch it holds, forever.
    fn refuse_launch_into_itself(&self, w: &Worker, what: &str) {
        if holds_by_launch(w.current_fiber(), self.cell.as_ptr() as usize) {
            panic!(
                "gossamer: {what} on a Trust<Latch<{}>> from a fiber that holds its latch (a closure launched on the \
                 same property): the new launch would wait for that latch and the holder for the launch, forever. \
                 Work on the value you already hold, or use launch_then, which does not wait",
                std::any::type_name::<T>()
            );
        }
    }

    /// Records (if tracking) that the running fiber waits for a launch here.
    fn waiting(&self, w: &Worker) -> Option<Waiting> {
        let ty = std::any::type_name::<Latch<T>>();
        Waiting::begin(w, WaitOn::Launch(self.trustee as usize), ty, self.cell.as_ptr() as usize)
    }

    fn start<F, U>(&self, w: &Worker, f: F, reply: ReplyTo, finish: unsafe fn(&Worker, *const (), thread::Result<U>))
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Send + 'static,
    {
        debug_assert!(w.shared.is_local(self.trustee as usize), "far launches go through launch_far");
        // The launched fiber holds a trust of its own: the property lives
        // until it ends, whatever becomes of the caller's trusts (a
        // `launch_then` caller may drop its trust at once). Its clone's
        // toggle travels ahead of the start message, on the same road.
        let keep = self.clone();
        let job = move || {
            let keep = keep;
            let h = keep.cell.as_ptr().cast::<super::property::Header>();
            // SAFETY: on the trustee thread; `keep` keeps the cell alive.
            if unsafe { super::property::moved(h) } {
                // The value moved away (`migrate_to`): the launch starts
                // where it is, sent there as a request is.
                let w = context::current().expect("launch outside its runtime");
                return super::migrate::launch::start_moved(w, keep, f, reply, finish);
            }
            // SAFETY: this fiber runs on the trustee thread, the only thread
            // that touches the latch, and `keep` keeps the property alive.
            // While the fiber holds or awaits the latch the property is
            // lent: closures sent with `apply` and the like are refused
            // instead of reaching the value beside this borrow.
            let lent = unsafe { super::property::Lent::new(h) };
            // SAFETY: as above.
            let latch: &Latch<T> = unsafe { &*(*keep.cell.as_ptr()).value.get() };
            run_launched(lent, keep.cell.as_ptr() as usize, latch, f, move |r| deliver(reply, r, finish));
        };
        let spawn = move || {
            let w = context::current().expect("launch outside its runtime");
            w.spawn_boxed(Box::new(job));
        };
        // A thread that sends this property's requests straight to where
        // its value moved sends the start (through the origin) only once
        // those requests have run, so that it reaches the value after them.
        let t = self.trustee as usize;
        super::migrate::direct::after_routed(w, t, self.cell.as_ptr().addr(), move |w| w.send(t, spawn));
    }
}
