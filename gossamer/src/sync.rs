//! The few synchronisation primitives the slot protocol uses, switched to
//! `loom`'s model-checked versions under `--cfg loom`.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, Ordering};

/// An `UnsafeCell` whose accesses `loom` can track for data races.
#[derive(Debug)]
pub(crate) struct DataCell<T>(#[cfg(loom)] loom::cell::UnsafeCell<T>, #[cfg(not(loom))] std::cell::UnsafeCell<T>);

impl<T> DataCell<T> {
    pub(crate) fn new(v: T) -> Self {
        #[cfg(loom)]
        return DataCell(loom::cell::UnsafeCell::new(v));
        #[cfg(not(loom))]
        DataCell(std::cell::UnsafeCell::new(v))
    }

    /// Runs `f` with a pointer for reading.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(loom)]
        return self.0.with(f);
        #[cfg(not(loom))]
        f(self.0.get())
    }

    /// Runs `f` with a pointer for writing.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(loom)]
        return self.0.with_mut(f);
        #[cfg(not(loom))]
        f(self.0.get())
    }
}
