//! `TrusteeRef`: naming a trustee thread, and entrusting properties to it.

use super::property::{self, PropertyCell};
use super::{outside_id, SendPtr, Trust};
use crate::runtime::context;
use crate::runtime::shared::Shared;

/// A reference to one trustee (worker thread) of a runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrusteeRef {
    index: u32,
    runtime: u64,
}

impl TrusteeRef {
    pub(crate) fn new(index: usize, runtime: u64) -> Self {
        TrusteeRef { index: index as u32, runtime }
    }

    /// The trustee's worker index.
    pub fn index(&self) -> usize {
        self.index as usize
    }

    /// The runtime the trustee belongs to.
    pub(crate) fn runtime(&self) -> u64 {
        self.runtime
    }

    /// Gives `value` to this trustee and returns the first trust to it
    /// (§2.3.2). Never blocks: from another thread the registration travels
    /// as an asynchronous message, so this also works in delegated context.
    ///
    /// # Panics
    /// If the runtime has shut down.
    pub fn entrust<T: Send + 'static>(&self, value: T) -> Trust<T> {
        self.entrust_as(value, false)
    }

    /// `entrust` of a value that was already copied as into another process
    /// (`entrust_on` under strict mode, see `runtime::strict`): allowed to
    /// another simulated process of this one.
    pub(crate) fn entrust_copied<T: Send + 'static>(&self, value: T) -> Trust<T> {
        self.entrust_as(value, true)
    }

    fn entrust_as<T: Send + 'static>(&self, value: T, copied: bool) -> Trust<T> {
        let t = self.index as usize;
        match context::current() {
            Some(w) if w.shared.id == self.runtime => {
                assert!(
                    w.shared.is_local(t) && (copied || !w.shared.crosses(Some(w.index), t)),
                    "gossamer: thread {t} is in another process; entrusting there moves the value serialized: use \
                     gossamer::entrust_on"
                );
                let id = w.new_id();
                let cell = PropertyCell::new_boxed(value, id);
                let h = SendPtr(cell as *mut property::Header);
                if w.index == t {
                    // SAFETY: fresh header, registered once, on its trustee.
                    unsafe { property::register(w, h.0) };
                } else {
                    w.send(t, move || {
                        let h = h;
                        let w = context::current().expect("runtime message outside a worker");
                        // SAFETY: as above, on the trustee thread.
                        unsafe { property::register(w, h.0) }
                    });
                }
                Trust::from_parts(cell, t, self.runtime, id)
            }
            _ => {
                let s = Shared::find(self.runtime).expect("gossamer: entrust on a runtime that has shut down");
                assert!(
                    copied || !s.crosses(None, t),
                    "gossamer: thread {t} is in another process; entrusting there moves the value serialized: use \
                     gossamer::entrust_on from a fiber"
                );
                let id = outside_id();
                let cell = PropertyCell::new_boxed(value, id);
                let h = SendPtr(cell as *mut property::Header);
                s.inject(
                    t,
                    Box::new(move || {
                        let h = h;
                        let w = context::current().expect("injected task outside a worker");
                        // SAFETY: fresh header, registered once, on its trustee.
                        unsafe { property::register(w, h.0) }
                    }),
                );
                Trust::from_parts(cell, t, self.runtime, id)
            }
        }
    }
}

/// The trustee of the calling thread (Figure 1's `local_trustee()`).
///
/// # Panics
/// Outside the runtime's worker threads.
pub fn local_trustee() -> TrusteeRef {
    let w = context::current().expect("gossamer: local_trustee() called outside the runtime's threads");
    TrusteeRef::new(w.index, w.shared.id)
}

/// Trustee number `index` of the calling thread's runtime.
///
/// # Panics
/// Outside the runtime, or if `index` is not a worker.
pub fn trustee(index: usize) -> TrusteeRef {
    let w = context::current().expect("gossamer: trustee() called outside the runtime's threads");
    assert!(index < w.shared.n, "gossamer: no trustee {index} (the runtime has {})", w.shared.n);
    TrusteeRef::new(index, w.shared.id)
}

/// Entrusts `value` to a trustee chosen round-robin by the calling thread
/// among this process's workers (the dedicated trustees, if the runtime has
/// some). To place a property in another process, use
/// [`entrust_on`](crate::entrust_on), which moves it serialized.
///
/// # Panics
/// Outside the runtime's threads.
pub fn entrust<T: Send + 'static>(value: T) -> Trust<T> {
    let w = context::worker();
    let k = w.next_in(w.shared.placement_range(Some(w.index)));
    TrusteeRef::new(k, w.shared.id).entrust(value)
}

impl TrusteeRef {
    /// This trustee's polling parameters.
    ///
    /// # Errors
    /// [`Error::ShutDown`](crate::Error::ShutDown) once its runtime has shut down;
    /// [`Error::NoSuchTrustee`](crate::Error::NoSuchTrustee) if it runs in another process.
    pub fn params(&self) -> Result<crate::TrusteeParams, crate::Error> {
        let sh = Shared::find(self.runtime).ok_or(crate::Error::ShutDown)?;
        sh.trustee_params(self.index())
    }

    /// Sets this trustee's polling parameters (see [`TrusteeParams`](crate::TrusteeParams)).
    ///
    /// ```
    /// let rt = gossamer::Runtime::builder().workers(2).build()?;
    /// let t = rt.trustee(1);
    /// let p = gossamer::TrusteeParams { tight_polls: 16, ..t.params()? };
    /// t.set_params(p)?;
    /// assert_eq!(t.params()?.tight_polls, 16);
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`params`](Self::params), and [`Error::BadTrusteeParam`](crate::Error::BadTrusteeParam).
    pub fn set_params(&self, params: crate::TrusteeParams) -> Result<(), crate::Error> {
        let sh = Shared::find(self.runtime).ok_or(crate::Error::ShutDown)?;
        sh.set_trustee_params(Some(self.index()), params)
    }
}
