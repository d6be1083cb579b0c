//! Per-thread counts of delegated requests still outstanding, per adaptive
//! property: a thread may run a closure in place only when none of its
//! delegated requests to that property is still outstanding, so that its
//! requests take effect in the order it issued them.
//!
//! Both ends run on the issuing thread: a [`Ticket`] is taken when a
//! request is delegated and dropped when its answer (or its callback) is
//! done with on that thread. The count is per thread, which is stricter
//! than per fiber: per-fiber order follows.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::marker::PhantomData;

thread_local! {
    /// Outstanding requests of this thread to all adaptive properties: the
    /// common case, none, costs one thread-local load.
    static TOTAL: Cell<u64> = const { Cell::new(0) };
    /// The same, per property.
    static PENDING: RefCell<HashMap<usize, u32>> = RefCell::new(HashMap::new());
}

/// True when the calling thread has a delegated request to the property
/// `key` outstanding.
#[inline]
pub(crate) fn outstanding(key: usize) -> bool {
    TOTAL.try_with(Cell::get).unwrap_or(0) != 0
        && PENDING.try_with(|p| p.borrow().get(&key).is_some_and(|&n| n != 0)).unwrap_or(false)
}

/// One outstanding delegated request of this thread to one property; it
/// is counted until dropped. Not `Send`: it is dropped where it was taken.
pub(crate) struct Ticket {
    key: usize,
    _here: PhantomData<*const ()>,
}

impl Ticket {
    pub(crate) fn take(key: usize) -> Ticket {
        let _ = TOTAL.try_with(|t| t.set(t.get() + 1));
        let _ = PENDING.try_with(|p| *p.borrow_mut().entry(key).or_insert(0) += 1);
        Ticket { key, _here: PhantomData }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // At thread exit the counts may be gone already: nothing to count.
        let _ = TOTAL.try_with(|t| t.set(t.get().saturating_sub(1)));
        let _ = PENDING.try_with(|p| {
            let mut p = p.borrow_mut();
            if let Some(n) = p.get_mut(&self.key) {
                *n -= 1;
                if *n == 0 {
                    p.remove(&self.key);
                }
            }
        });
    }
}
