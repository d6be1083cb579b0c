//! The heap cell that holds an entrusted property, and its trust-id set.
//!
//! Reference counting follows §2.5.4 of the thesis: every trust has a unique
//! id, and both clone and drop *toggle* their id in the property's id set
//! (symmetric difference). Toggles commute, so they may be sent
//! asynchronously, from any thread and from delegated context, in any order:
//! the set is empty exactly when the last trust is gone, and then the
//! trustee drops the property, once. All of this runs on the trustee thread.
//!
//! Requests from threads outside the runtime (`apply_async`) travel apart
//! from the toggles, through the trustee's submission queue, so one may
//! still be queued when the last trust's toggle arrives. Every such request
//! was queued before its trust was dropped, though; so a property whose set
//! becomes empty while anything is queued (or a taken batch runs) is only
//! *doomed*, and dropped once the batches that may hold its requests have
//! run (`Worker::release_doomed`).

use std::cell::{Cell, UnsafeCell};

use crate::runtime::worker::Worker;

const UNREGISTERED: u8 = 0;
const REGISTERED: u8 = 1;
const ORPHANED: u8 = 2;
/// Registered, no trust left, waiting for requests from outside.
const DOOMED: u8 = 3;

/// The type-erased front of a [`PropertyCell`].
#[repr(C)]
pub(crate) struct Header {
    ids: UnsafeCell<Vec<u64>>,
    /// Position in the trustee's registry (for dropping at shutdown).
    pub(crate) index: Cell<usize>,
    state: Cell<u8>,
    pub(crate) drop_fn: unsafe fn(*mut Header),
}

#[repr(C)]
pub(crate) struct PropertyCell<T> {
    pub(crate) header: Header,
    pub(crate) value: UnsafeCell<T>,
}

impl<T> PropertyCell<T> {
    /// Allocates a cell whose id set holds just `id`.
    pub(crate) fn new_boxed(value: T, id: u64) -> *mut PropertyCell<T> {
        let cell = Box::into_raw(Box::new(PropertyCell {
            header: Header {
                ids: UnsafeCell::new(vec![id]),
                index: Cell::new(usize::MAX),
                state: Cell::new(UNREGISTERED),
                drop_fn: Self::drop_fn,
            },
            value: UnsafeCell::new(value),
        }));
        // Trusts may carry the address as an integer (serialized, or to
        // another process); the trustee turns it back into this pointer.
        let _ = cell.expose_provenance();
        cell
    }

    unsafe fn drop_fn(h: *mut Header) {
        // SAFETY: `h` is the header at the start of a `PropertyCell<T>`
        // (repr(C)) allocated by `new_boxed`, dropped exactly once.
        drop(unsafe { Box::from_raw(h.cast::<PropertyCell<T>>()) });
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
        // Every trust was dropped before the registration arrived.
        ORPHANED if w.outside_may_refer() => {
            state.set(DOOMED);
            w.register(h);
            w.doom(h);
        }
        // SAFETY: nothing else refers to the property any more.
        ORPHANED => unsafe { ((*h).drop_fn)(h) },
        _ => unreachable!("gossamer: property registered twice"),
    }
}

/// Toggles `id` in the property's id set; drops the property when the set
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
        // With an empty set no trust refers to it.
        match state.get() {
            REGISTERED if w.outside_may_refer() => {
                state.set(DOOMED);
                w.doom(h);
            }
            REGISTERED => {
                w.unregister(h);
                // SAFETY: unregistered just now, so dropped only here.
                unsafe { ((*h).drop_fn)(h) }
            }
            UNREGISTERED => state.set(ORPHANED),
            _ => unreachable!("gossamer: trust id toggled on a dropped property"),
        }
    } else if state.get() == DOOMED {
        // A toggle that trailed the others (a clone's, say) arrived after
        // the set had emptied: the property has a trust again.
        state.set(REGISTERED);
        w.undoom(h);
    }
}

/// Drops a doomed property (see the module documentation), unless it got
/// a trust again meanwhile.
///
/// # Safety
/// `h` must be a live header whose trustee is `w`, doomed there, with no
/// request from outside the runtime left that refers to it.
pub(crate) unsafe fn release(w: &Worker, h: *mut Header) {
    // SAFETY: per the contract, `h` is live and only this thread touches it.
    let state = unsafe { &(*h).state };
    if state.get() == DOOMED {
        w.unregister(h);
        // SAFETY: unregistered just now, so dropped only here.
        unsafe { ((*h).drop_fn)(h) }
    }
}
