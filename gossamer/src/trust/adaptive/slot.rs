//! The memory of an adaptive property: the [`Slot`] (the value and the
//! [`Gate`] that guards it), inside a [`Node`] that also holds the one
//! `Trust` to the trustee's [`Owner`] and counts the handles. A handle is a
//! single pointer to its node, and a call in place reads one cache line
//! of it (the trust's routing fields, the value and the gate's hot words)
//! when the value is small.

use std::cell::UnsafeCell;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use super::gate::Gate;
use crate::trust::Trust;

/// The value and its gate.
#[repr(C)]
pub(crate) struct Slot<T> {
    /// Dropped by the owner (on the trustee, after the last handle), never
    /// by the slot itself.
    value: UnsafeCell<ManuallyDrop<T>>,
    pub(crate) gate: Gate,
}

// SAFETY: the value is only reached while holding the gate's lock (see
// `Held`), one thread at a time; it moves between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Slot<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Slot<T> {}

impl<T> Slot<T> {
    pub(crate) fn new(value: T) -> Slot<T> {
        Slot { gate: Gate::new(), value: UnsafeCell::new(ManuallyDrop::new(value)) }
    }

    /// Drops the value, under the lock, ordered after every access.
    ///
    /// # Safety
    /// Once, when nothing can reach the value any more.
    unsafe fn drop_value(&self) {
        self.gate.lock();
        self.gate.retire();
        // SAFETY: per the contract, this is the value's last access (a
        // caller in place that took the lock after this sees `retired`).
        unsafe { ManuallyDrop::drop(&mut *self.value.get()) };
        self.gate.unlock();
    }
}

/// Proof that the caller holds a slot's lock; releases it when dropped
/// (also when a closure panics), after counting the access.
pub(crate) struct Held<'a, T> {
    slot: &'a Slot<T>,
    served: bool,
    contended: bool,
}

impl<'a, T> Held<'a, T> {
    /// Takes the lock for a call in place; `contended` records whether it
    /// was found held.
    ///
    /// # Panics
    /// If the value is gone: the runtime shut down (its trustee dropped
    /// the value) while this caller was on its way in.
    #[inline]
    pub(crate) fn in_place(slot: &'a Slot<T>) -> Held<'a, T> {
        let contended = !slot.gate.try_lock();
        if contended {
            slot.gate.lock();
        }
        if slot.gate.retired() {
            slot.gate.unlock();
            panic!("gossamer: the runtime that owns this adaptive property has shut down");
        }
        Held { slot, served: false, contended }
    }

    /// Takes the lock for the trustee, to serve a delegated request.
    #[inline]
    pub(crate) fn serving(slot: &'a Slot<T>) -> Held<'a, T> {
        slot.gate.lock();
        Held { slot, served: true, contended: false }
    }

    /// The value, exclusively, for as long as the lock is held.
    #[inline]
    pub(crate) fn value(&mut self) -> &mut T {
        // SAFETY: we hold the lock (taken in the constructor, released in
        // `drop`), which every access to the value holds; the borrow of
        // `self` keeps the reference inside that span.
        unsafe { &mut *self.slot.value.get() }
    }
}

impl<T> Drop for Held<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.served {
            self.slot.gate.note_served();
        } else {
            self.slot.gate.note_in_place(self.contended);
        }
        self.slot.gate.unlock();
    }
}

/// Everything of one adaptive property that its handles share: the trust
/// to the owner (routing fields first), the slot, and the handle count.
/// Aligned to a cache line so that the hot fields share one.
#[repr(C, align(64))]
pub(crate) struct Node<T> {
    /// The one trust to the owner: written once, before the first handle
    /// exists; dropped by the last handle.
    trust: UnsafeCell<MaybeUninit<Trust<Owner<T>>>>,
    pub(crate) slot: Slot<T>,
    /// Live handles; the last one to go drops the trust.
    handles: AtomicUsize,
}

// SAFETY: the trust is written before the node is shared and dropped by
// the last handle, and only read in between; `Trust` and `Slot` are
// `Send + Sync` for `T: Send`.
unsafe impl<T: Send> Sync for Node<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Node<T> {}

impl<T: Send + 'static> Node<T> {
    /// Makes a node around `value`, entrusts its owner with `entrust`, and
    /// returns the node with one handle counted.
    pub(crate) fn make(value: T, entrust: impl FnOnce(Owner<T>) -> Trust<Owner<T>>) -> Arc<Node<T>> {
        let node = Arc::new(Node {
            trust: UnsafeCell::new(MaybeUninit::uninit()),
            slot: Slot::new(value),
            handles: AtomicUsize::new(1),
        });
        let trust = entrust(Owner(node.clone()));
        // SAFETY: no handle exists yet and the owner never reads the trust:
        // this write is alone.
        unsafe { (*node.trust.get()).write(trust) };
        node
    }

    /// The trust to the owner.
    #[inline]
    pub(crate) fn trust(&self) -> &Trust<Owner<T>> {
        // SAFETY: written in `make` before any handle existed, dropped only
        // by the last handle, and the caller's handle is live.
        unsafe { (*self.trust.get()).assume_init_ref() }
    }

    /// Counts a new handle.
    pub(crate) fn add_handle(&self) {
        self.handles.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Uncounts a handle; the last one drops the trust, so the owner (and
    /// with it the value) goes on the trustee.
    pub(crate) fn drop_handle(&self) {
        if self.handles.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            // SAFETY: the last handle: nobody reads the trust any more, and
            // it is dropped once.
            unsafe { (*self.trust.get()).assume_init_drop() };
        }
    }
}

/// The trustee's share of an adaptive property, entrusted as an ordinary
/// `Trust` property: it drops the value when the last trust to it goes.
pub(crate) struct Owner<T>(pub(crate) Arc<Node<T>>);

impl<T> Drop for Owner<T> {
    fn drop(&mut self) {
        // SAFETY: the owner is dropped once, with the property, after the
        // last trust to it; the last handle dropped that trust, so no
        // handle is left to reach the value.
        unsafe { self.0.slot.drop_value() };
    }
}
