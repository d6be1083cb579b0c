//! The shared home of an adaptive property's value: the [`Gate`] and the
//! value it guards, reached in place by callers through their handles and
//! by the trustee through the [`Owner`] it holds as a `Trust` property.

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;

use super::gate::Gate;

/// The value and its gate. Shared (`Arc`) by the owner on the trustee and
/// every handle, so that callers in place reach it without the trustee.
pub(crate) struct Slot<T> {
    pub(crate) gate: Gate,
    /// Dropped by the owner (on the trustee, after the last handle), never
    /// by the slot itself.
    value: UnsafeCell<ManuallyDrop<T>>,
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
    #[inline]
    pub(crate) fn in_place(slot: &'a Slot<T>) -> Held<'a, T> {
        let contended = !slot.gate.try_lock();
        if contended {
            slot.gate.lock();
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

/// The trustee's share of an adaptive property, entrusted as an ordinary
/// `Trust` property: it drops the value when the last trust to it goes.
pub(crate) struct Owner<T>(pub(crate) std::sync::Arc<Slot<T>>);

impl<T> Drop for Owner<T> {
    fn drop(&mut self) {
        // The last handle is gone, so nobody can run in place any more; the
        // lock orders this drop after the last access all the same.
        self.0.gate.lock();
        // SAFETY: the owner is dropped once, with the property, and no
        // handle is left to reach the value (each handle holds a trust to
        // this owner): this is its last access.
        unsafe { ManuallyDrop::drop(&mut *self.0.value.get()) };
        self.0.gate.unlock();
    }
}
