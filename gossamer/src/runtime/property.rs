//! The heap cell that holds an entrusted property, its trust-id set, and
//! the rules that decide when the property may be reached and dropped.
//! It belongs to the runtime because the worker loop owns these cells: it
//! registers them, fences doomed ones and drops what is left at shutdown;
//! `Trust<T>` (in `trust/`) builds on it.
//!
//! Reference counting follows §2.5.4 of the thesis: every trust has a unique
//! id, and both clone and drop *toggle* their id in the property's id set
//! (symmetric difference). Toggles commute, so they may be sent
//! asynchronously, from any thread and from delegated context, in any order.
//! All of this runs on the trustee thread.
//!
//! **A property lives until every request that names it has run or been
//! refused.** An empty set alone does not prove that: toggles and requests
//! travel different roads (each worker's lane, the injection queue, the
//! submission queue of threads outside the runtime), so the last trust's
//! drop, sent from one thread, may overtake a request (or a clone's toggle)
//! that another thread queued *before* handing the trust over. So a
//! property whose set becomes empty is only *doomed*, and a fence round
//! follows: the trustee asks every other worker of the program for a reply
//! through that worker's own lane to it, which arrives after everything
//! that worker queued earlier, and waits for one round of its outside
//! queues to be taken and run. Whatever named the property before its set
//! emptied has then arrived; a clone's toggle among it gives the property a
//! trust again (and a later emptying starts a new round). Only a doomed
//! property whose round completed with the set still empty is dropped, by
//! the worker loop (`Worker::release_doomed`), never inside a closure.
//!
//! **A value is reached by one holder at a time.** Closures run to
//! completion and never nest on one worker (see `Worker::defer`), and a
//! launched closure holds the property's latch across suspensions: while it
//! holds or waits for it, the property is *lent* (`blocked` counts those
//! fibers), and every other closure sent to the property is refused with a
//! panic instead of getting a second `&mut` to the latch.
//!
//! **A moved property keeps its first cell as a forwarding record.**
//! `Trust::migrate_to` (see `trust::migrate`) moves the value into a cell
//! on the target trustee and marks the first cell `MOVED`: its value is
//! gone, and it records where the value is (trustee and cell) and a trust
//! id of its own in that cell's set. The first cell keeps its id set and
//! its lifetime rules unchanged (every trust names it); when it is
//! released, it frees only its memory and toggles its own id off in the
//! cell that holds the value, which is then the one whose value is
//! dropped. While a later move hands the value from one holder to the
//! next, the first cell is also `DRAINING`: requests wait there (`held`)
//! instead of being forwarded.
//!
//! **A property may follow its requests** (`trust::migrate::follow`): the
//! cell that holds its value then has the `FOLLOW` bit and a follow state
//! ([`Follow`]), told of each closure before it runs; both move with the
//! value.
//!
//! **At shutdown** the trustee drops every value still entrusted to it,
//! then frees the cells: a value's `Drop` that reaches a property whose
//! value is already gone finds it marked `DROPPED` and its closure is
//! refused, never run.

use std::cell::{Cell, UnsafeCell};
use std::mem::ManuallyDrop;

use crate::runtime::worker::Worker;

const UNREGISTERED: u8 = 0;
const REGISTERED: u8 = 1;
const ORPHANED: u8 = 2;
/// Registered, no trust left, waiting for its fence round.
const DOOMED: u8 = 3;

/// `blocked` bit: the value was dropped at shutdown (the cell lives on
/// until every value of the trustee is dropped).
const DROPPED: u32 = 1 << 31;
/// `blocked` bit: the value moved to another cell; this one forwards.
const MOVED: u32 = 1 << 30;
/// `blocked` bit, with `MOVED`: the value is changing trustees; requests
/// wait until it has arrived.
const DRAINING: u32 = 1 << 29;
/// `blocked` bit: the property follows its requests
/// (`MigrationPolicy::Follow`): each closure is counted before it runs (see
/// `trust::migrate::follow`). Set only on a cell that holds its value.
const FOLLOW: u32 = 1 << 28;

/// Why a closure may not reach a property's value now.
pub(crate) const LENT: &str = "gossamer: this property is a Latch held (or awaited) by a launched closure, and a \
closure sent with apply/apply_then may not reach its value meanwhile (it would alias the launched closure's borrow); \
use launch/launch_then for every access to a Trust<Latch<T>> that may overlap a launch";
/// Why a closure reached a property that moved, where it cannot follow.
pub(crate) const MOVED_AWAY: &str = "gossamer: this property was moved to another trustee (Trust::migrate_to), and \
this request reached the cell it left, which cannot relay it";
/// Why a closure was refused at shutdown.
pub(crate) const GONE: &str = "gossamer: the runtime is shutting down and this property was already dropped; the \
closure was refused";

/// The type-erased front of a [`PropertyCell`].
#[repr(C)]
pub(crate) struct Header {
    ids: UnsafeCell<Vec<u64>>,
    /// Position in the trustee's registry (for dropping at shutdown).
    pub(crate) index: Cell<usize>,
    state: Cell<u8>,
    /// Nonzero while closures may not reach the value: the number of
    /// launched closures holding or awaiting its latch, plus `DROPPED`.
    blocked: Cell<u32>,
    /// The fence round of the latest doom, and the replies it awaits.
    round: Cell<u32>,
    awaiting: Cell<u32>,
    /// Set when `MOVED`: the trustee and cell that hold the value now, and
    /// the id this record holds in that cell's set.
    forward: Cell<(u32, *mut Header, u64)>,
    /// Requests of this thread that wait while `DRAINING`, in order.
    held: UnsafeCell<Vec<Box<dyn FnOnce()>>>,
    /// Set with `FOLLOW`: told of each closure before it runs.
    follow: UnsafeCell<Option<Box<dyn Follow>>>,
    drop_value: unsafe fn(*mut Header),
    free: unsafe fn(*mut Header),
}

#[repr(C)]
pub(crate) struct PropertyCell<T> {
    pub(crate) header: Header,
    /// Dropped in place at shutdown before the cell is freed (see the
    /// module documentation), hence `ManuallyDrop`.
    pub(crate) value: UnsafeCell<ManuallyDrop<T>>,
}

impl<T> PropertyCell<T> {
    /// Allocates a cell whose id set holds just `id`.
    pub(crate) fn new_boxed(value: T, id: u64) -> *mut PropertyCell<T> {
        let cell = Box::into_raw(Box::new(PropertyCell {
            header: Header {
                ids: UnsafeCell::new(vec![id]),
                index: Cell::new(usize::MAX),
                state: Cell::new(UNREGISTERED),
                blocked: Cell::new(0),
                round: Cell::new(0),
                awaiting: Cell::new(0),
                forward: Cell::new((0, std::ptr::null_mut(), 0)),
                held: UnsafeCell::new(Vec::new()),
                follow: UnsafeCell::new(None),
                drop_value: Self::drop_value,
                free: Self::free,
            },
            value: UnsafeCell::new(ManuallyDrop::new(value)),
        }));
        // Trusts may carry the address as an integer (serialized, or to
        // another process); the trustee turns it back into this pointer.
        let _ = cell.expose_provenance();
        cell
    }

    unsafe fn drop_value(h: *mut Header) {
        // SAFETY: `h` is the header at the start of a `PropertyCell<T>`
        // (repr(C)) whose value is dropped exactly once, here.
        unsafe { ManuallyDrop::drop(&mut *(*h.cast::<PropertyCell<T>>()).value.get()) }
    }

    unsafe fn free(h: *mut Header) {
        // SAFETY: `h` is the header of a `PropertyCell<T>` allocated by
        // `new_boxed`, whose value was dropped; freed exactly once.
        drop(unsafe { Box::from_raw(h.cast::<PropertyCell<T>>()) });
    }
}

/// Drops the value and frees the cell.
///
/// # Safety
/// `h` is live, unreachable from now on, and dropped only here.
unsafe fn destroy(h: *mut Header) {
    // SAFETY: per the contract; the cell is freed even if the drop panics.
    unsafe {
        struct Free(*mut Header);
        impl Drop for Free {
            fn drop(&mut self) {
                // SAFETY: as for `destroy`.
                unsafe { ((*self.0).free)(self.0) }
            }
        }
        let _free = Free(h);
        ((*h).drop_value)(h);
    }
}

/// Drops the value of a cell that was never registered and frees it (a
/// moved value whose registration never arrived, see `trust::migrate`).
///
/// # Safety
/// As for `destroy`: `h` is live, unreachable from now on, and dropped
/// only here.
pub(crate) unsafe fn drop_unregistered(h: *mut Header) {
    // SAFETY: per the contract.
    unsafe { destroy(h) }
}

/// Whether a closure may reach the value now; `Err` says why not.
///
/// # Safety
/// `h` must be a live header, on its trustee thread.
#[inline]
pub(crate) unsafe fn check_reachable(h: *const Header) -> Result<(), &'static str> {
    // SAFETY: per the contract.
    let b = unsafe { (*h).blocked.get() };
    if b == 0 {
        Ok(())
    } else if b == FOLLOW {
        // SAFETY: per the contract; a closure is about to reach the value.
        unsafe { observe(h) };
        Ok(())
    } else if b & DROPPED != 0 {
        Err(GONE)
    } else if b & MOVED != 0 {
        Err(MOVED_AWAY)
    } else {
        Err(LENT)
    }
}

/// What a property that follows its requests keeps in the cell that holds
/// its value (`trust::migrate::follow` implements it): the trustee tells
/// it of each closure before it runs.
pub(crate) trait Follow: std::any::Any {
    /// A closure is about to run on the cell at `h`, whose state this is.
    ///
    /// # Safety
    /// `h` must be a live header that holds its value, on its trustee
    /// thread, between closures.
    unsafe fn observe(&mut self, h: *const Header);

    /// For the implementation to reach its own type.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

/// Tells the follow state of the cell at `h` of a closure about to run.
///
/// # Safety
/// As for [`Follow::observe`], and `FOLLOW` set.
#[cold]
#[inline(never)]
unsafe fn observe(h: *const Header) {
    // SAFETY: per the contract; the state is reached only on this thread,
    // by one step at a time.
    if let Some(st) = unsafe { (*(*h).follow.get()).as_deref_mut() } {
        // SAFETY: per the contract.
        unsafe { st.observe(h) }
    }
}

/// What a cell does with a request (see `trust::migrate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Run it here (or refuse it, see `check_reachable`).
    Here,
    /// Send it on to the cell that holds the value, on trustee `.0`.
    Forward(usize, *mut Header),
    /// Hold it until the value has arrived where it moves.
    Draining,
}

/// What the cell at `h` does with a request.
///
/// # Safety
/// `h` must be a live header, on its trustee thread.
#[inline]
pub(crate) unsafe fn route(h: *const Header) -> Route {
    // SAFETY: per the contract.
    let hd = unsafe { &*h };
    let b = hd.blocked.get();
    if b & (MOVED | DROPPED) != MOVED {
        Route::Here
    } else if b & DRAINING != 0 {
        Route::Draining
    } else {
        let (t, cell, _) = hd.forward.get();
        Route::Forward(t as usize, cell)
    }
}

/// True when the property's value is not in the cell at `h` because it
/// moved (see `route`).
///
/// # Safety
/// As for `route`.
#[inline]
pub(crate) unsafe fn moved(h: *const Header) -> bool {
    // SAFETY: per the contract.
    unsafe { route(h) != Route::Here }
}

/// Points the cell at `h` to `cell` on trustee `t`, which holds `id` for
/// it, and ends a drain; the cell's value (if it still had one) has been
/// moved out by the caller. Returns the requests held meanwhile, in order.
///
/// # Safety
/// `h` must be a live header on its trustee thread, reachable until now
/// (not lent, not dropped) or already `MOVED`.
pub(crate) unsafe fn set_forward(h: *mut Header, t: usize, cell: *mut Header, id: u64) -> Vec<Box<dyn FnOnce()>> {
    // SAFETY: per the contract.
    let hd = unsafe { &*h };
    debug_assert!(hd.blocked.get() & !(MOVED | DRAINING) == 0);
    hd.forward.set((t as u32, cell, id));
    hd.blocked.set(MOVED);
    // SAFETY: touched only on this thread, never while borrowed elsewhere.
    std::mem::take(unsafe { &mut *hd.held.get() })
}

/// Where the moved cell at `h` forwards to: trustee, cell, and the id it
/// holds there.
///
/// # Safety
/// `h` must be a live, `MOVED` header on its trustee thread.
pub(crate) unsafe fn forward_of(h: *const Header) -> (usize, *mut Header, u64) {
    // SAFETY: per the contract.
    let (t, cell, id) = unsafe { (*h).forward.get() };
    (t as usize, cell, id)
}

/// Starts a drain on the moved cell at `h`: requests wait from now on.
///
/// # Safety
/// `h` must be a live, `MOVED` header on its trustee thread.
pub(crate) unsafe fn set_draining(h: *mut Header) {
    // SAFETY: per the contract.
    let hd = unsafe { &*h };
    debug_assert_eq!(hd.blocked.get(), MOVED);
    hd.blocked.set(MOVED | DRAINING);
}

/// Keeps `f` until the drain of the cell at `h` ends (`set_forward`).
///
/// # Safety
/// `h` must be a live, draining header on its trustee thread.
pub(crate) unsafe fn hold(h: *mut Header, f: Box<dyn FnOnce()>) {
    // SAFETY: per the contract; touched only on this thread.
    unsafe { (*(*h).held.get()).push(f) }
}

/// Gives the cell at `h` the follow state `st` (and the `FOLLOW` bit), in
/// place of any it had.
///
/// # Safety
/// `h` must be a live header that holds its value, on its trustee thread
/// (or not yet published to any other thread), with no reference from
/// [`follow_state`] alive.
pub(crate) unsafe fn put_follow(h: *const Header, st: Box<dyn Follow>) {
    // SAFETY: per the contract.
    let hd = unsafe { &*h };
    // SAFETY: touched only on this thread, not borrowed (per the contract).
    unsafe { *hd.follow.get() = Some(st) };
    hd.blocked.set(hd.blocked.get() | FOLLOW);
}

/// Takes the follow state of the cell at `h` (and clears `FOLLOW`).
///
/// # Safety
/// As for [`put_follow`].
pub(crate) unsafe fn take_follow(h: *const Header) -> Option<Box<dyn Follow>> {
    // SAFETY: per the contract.
    let hd = unsafe { &*h };
    hd.blocked.set(hd.blocked.get() & !FOLLOW);
    // SAFETY: as for `put_follow`.
    unsafe { (*hd.follow.get()).take() }
}

/// The follow state of the cell at `h`, if it has one.
///
/// # Safety
/// `h` must be a live header on its trustee thread; the reference must not
/// outlive the caller's step, nor overlap another one to the same state.
pub(crate) unsafe fn follow_state<'a>(h: *const Header) -> Option<&'a mut dyn Follow> {
    // SAFETY: per the contract.
    unsafe { (*(*h).follow.get()).as_deref_mut() }
}

/// The single trust id in the set of the cell at `h`: for a cell a moved
/// value was put into, the id its forwarding record holds there.
///
/// # Safety
/// `h` must be a live header on its trustee thread.
pub(crate) unsafe fn sole_id(h: *const Header) -> Option<u64> {
    // SAFETY: per the contract; the set is not borrowed elsewhere.
    let ids = unsafe { &*(*h).ids.get() };
    match ids[..] {
        [id] => Some(id),
        _ => None,
    }
}

/// Unregisters and frees a cell whose value was moved out and that no
/// request can name any more (see `trust::migrate`).
///
/// # Safety
/// `h` must be a live header registered with `w`, its value moved out, and
/// unreachable from now on.
pub(crate) unsafe fn forget(w: &Worker, h: *mut Header) {
    w.unregister(h);
    // SAFETY: per the contract: only the memory, once.
    unsafe { ((*h).free)(h) }
}

/// Counts a launched closure that holds or awaits the property's latch
/// while it lives (on the trustee thread).
pub(crate) struct Lent(*const Header);

impl Lent {
    /// # Safety
    /// `h` must be a live header on its trustee thread, kept alive (by a
    /// trust) for as long as the returned value lives.
    pub(crate) unsafe fn new(h: *const Header) -> Lent {
        // SAFETY: per the contract.
        unsafe { (*h).blocked.set((*h).blocked.get() + 1) };
        Lent(h)
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        // SAFETY: live while we are (see `new`).
        unsafe { (*self.0).blocked.set((*self.0).blocked.get() - 1) };
    }
}

/// Records a new property with its trustee (on the trustee thread).
///
/// # Safety
/// `h` must be a live header created by `new_boxed`, registered once, and
/// `w` must be its trustee.
pub(crate) unsafe fn register(w: &Worker, h: *mut Header) {
    // SAFETY: per the contract, `h` is live and only this thread touches it.
    let state = unsafe { &(*h).state };
    match state.get() {
        UNREGISTERED => {
            state.set(REGISTERED);
            w.register(h);
        }
        // Every trust was dropped before the registration arrived; requests
        // queued behind the registration may still come.
        ORPHANED => {
            w.register(h);
            // SAFETY: registered here, live.
            unsafe { doom(w, h) };
        }
        _ => unreachable!("gossamer: property registered twice"),
    }
}

/// Starts a fence round for a property whose set is empty.
///
/// # Safety
/// `h` must be live and registered with its trustee `w`.
unsafe fn doom(w: &Worker, h: *mut Header) {
    // SAFETY: per the contract.
    let hd = unsafe { &*h };
    hd.state.set(DOOMED);
    let round = hd.round.get().wrapping_add(1);
    hd.round.set(round);
    hd.awaiting.set(w.fence(h, round));
    w.doom(h);
}

/// A fence reply from another worker for round `round` of `h`.
///
/// # Safety
/// `h` must be a header of trustee `w` that was doomed in round `round`
/// or later, and not dropped since (it is not: a doomed property waits for
/// every reply of its latest round, and replies of one worker arrive in
/// the order of the rounds).
pub(crate) unsafe fn fence_reply(w: &Worker, h: *mut Header, round: u32) {
    if w.cleaning.get() {
        return;
    }
    // SAFETY: per the contract.
    let hd = unsafe { &*h };
    if hd.state.get() == DOOMED && hd.round.get() == round {
        hd.awaiting.set(hd.awaiting.get() - 1);
    }
}

/// Toggles `id` in the property's id set; dooms the property when the set
/// becomes empty (on the trustee thread).
///
/// # Safety
/// `h` must be a live header whose trustee is `w`, and `id` the id of a
/// trust being cloned or dropped.
pub(crate) unsafe fn toggle(w: &Worker, h: *mut Header, id: u64) {
    if w.cleaning.get() {
        // The trustee is dropping everything left at shutdown.
        return;
    }
    // SAFETY: the id set is only touched on the trustee thread, never while
    // another reference to it exists (closures see only the value).
    let ids = unsafe { &mut *(*h).ids.get() };
    match ids.iter().position(|&x| x == id) {
        Some(i) => {
            ids.swap_remove(i);
        }
        None => ids.push(id),
    }
    // SAFETY: `h` is live.
    let state = unsafe { &(*h).state };
    if ids.is_empty() {
        match state.get() {
            // SAFETY: registered, live.
            REGISTERED => unsafe { doom(w, h) },
            UNREGISTERED => state.set(ORPHANED),
            _ => unreachable!("gossamer: trust id toggled on a dropped property"),
        }
    } else if state.get() == DOOMED {
        // A toggle that trailed the others (a clone's, say) arrived after
        // the set had emptied: the property has a trust again.
        state.set(REGISTERED);
        w.undoom(h);
    } else if state.get() == ORPHANED {
        state.set(UNREGISTERED);
    }
}

/// Whether a doomed property's fence round is complete (its workers have
/// answered); `None` if it is no longer doomed.
///
/// # Safety
/// `h` must be live, on its trustee thread.
pub(crate) unsafe fn fenced(h: *const Header) -> Option<bool> {
    // SAFETY: per the contract.
    let hd = unsafe { &*h };
    (hd.state.get() == DOOMED).then(|| hd.awaiting.get() == 0)
}

/// Drops a doomed property whose fence round completed (see the module
/// documentation).
///
/// # Safety
/// `h` must be a live header whose trustee is `w`, doomed there, its round
/// complete, and no round of the outside queues pending for it.
pub(crate) unsafe fn release(w: &Worker, h: *mut Header) {
    // SAFETY: `h` is live, on its trustee.
    if let Route::Forward(..) = unsafe { route(h) } {
        // A moved property's origin: its client routes retire first.
        let hooks = super::migrate_hooks::HOOKS.get().expect("gossamer: a forwarding record without a move");
        // SAFETY: per the contract, which the hook shares.
        return unsafe { (hooks.release_origin)(w, h) };
    }
    w.unregister(h);
    // SAFETY: unregistered just now, so dropped only here.
    unsafe { destroy(h) }
}

/// Releases the forwarding record at `h`, the origin of a moved property
/// that lost its last trust and whose clients dropped their routes: frees
/// its memory and lets the cell that holds the value go.
///
/// # Safety
/// `h` must be a live, registered, `MOVED` origin of trustee `w`, doomed
/// there, its round complete, released once.
pub(crate) unsafe fn release_record(w: &Worker, h: *mut Header) {
    w.unregister(h);
    // SAFETY: `h` is live, on its trustee.
    if let Route::Forward(t, cell) = unsafe { route(h) } {
        // A forwarding record: no value here; the new cell loses the trust
        // this record held (sent after every request this thread forwarded
        // to it, on the same lane).
        // SAFETY: as above.
        let id = unsafe { (*h).forward.get().2 };
        let cell = SendPtr(cell);
        w.send_plain(t, move || {
            let cell = cell;
            if let Some(w) = crate::runtime::context::current() {
                // SAFETY: runs on the new cell's trustee, which keeps it
                // while this record's id is in its set.
                unsafe { toggle(w, cell.0, id) }
            }
        });
        // SAFETY: unregistered just now, its value moved out: only the
        // memory is freed, once.
        unsafe { ((*h).free)(h) };
        return;
    }
    unreachable!("gossamer: a record released while it did not forward");
}

/// At shutdown, first stage: drops the value and marks the property so
/// that closures still sent to it are refused.
///
/// # Safety
/// `h` must be live, registered with the trustee running its shutdown, and
/// its value not dropped yet.
pub(crate) unsafe fn drop_value_at_shutdown(h: *mut Header) {
    // SAFETY: per the contract.
    unsafe {
        let moved = (*h).blocked.get() & MOVED != 0;
        (*h).blocked.set((*h).blocked.get() | DROPPED);
        // A forwarding record holds no value (its new cell is dropped by
        // its own trustee).
        if !moved {
            ((*h).drop_value)(h);
        }
    }
}

/// At shutdown, second stage: frees the cell.
///
/// # Safety
/// `h` went through `drop_value_at_shutdown`, and every value of the
/// trustee has been dropped (nothing reaches the cell any more).
pub(crate) unsafe fn free_at_shutdown(h: *mut Header) {
    // SAFETY: per the contract.
    unsafe { ((*h).free)(h) }
}

/// A value moved across threads on the runtime's behalf.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<P>(pub(crate) P);
// SAFETY: only used for pointers whose targets the runtime hands over
// between threads under its own protocol (properties, waiting fibers).
unsafe impl<P> Send for SendPtr<P> {}
