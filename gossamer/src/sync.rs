//! The few synchronisation primitives the slot protocol uses, switched to
//! `loom`'s model-checked versions under `--cfg loom`, and [`ColdList`],
//! for the rare hand-overs from threads outside the runtime.

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

/// A list that threads outside the runtime fill and the runtime's workers
/// empty, for the rare path where a thread that is not a worker hands one
/// something back (a block of the shared heap it dropped, say). A flag read
/// with a plain load tells a worker whether to look; the list itself is
/// behind a mutex. Its functions are never inlined into their callers, so
/// the lock's atomic read-modify-write stays out of the machine code of the
/// delegation path (see `tests/no_atomic_rmw.rs`).
pub(crate) struct ColdList<T> {
    pending: std::sync::atomic::AtomicBool,
    items: std::sync::Mutex<Vec<T>>,
}

impl<T> ColdList<T> {
    pub(crate) const fn new() -> Self {
        ColdList { pending: std::sync::atomic::AtomicBool::new(false), items: std::sync::Mutex::new(Vec::new()) }
    }

    /// Whether anything may be waiting (a hint: a push may be under way).
    #[inline]
    pub(crate) fn pending(&self) -> bool {
        self.pending.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[inline(never)]
    pub(crate) fn push(&self, item: T) {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        items.push(item);
        self.pending.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Takes the items `take` picks and leaves the others.
    #[inline(never)]
    pub(crate) fn take(&self, mut take: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let (taken, rest): (Vec<T>, Vec<T>) = items.drain(..).partition(|t| take(t));
        *items = rest;
        self.pending.store(!items.is_empty(), std::sync::atomic::Ordering::Relaxed);
        taken
    }
}
