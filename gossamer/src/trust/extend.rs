//! What the trust layer adds to the runtime's types: entrusting from
//! outside the runtime ([`Runtime::entrust`], [`Handle::entrust`] and their
//! `trustee` lookups) and profiling the property behind a trust
//! ([`Target::trust`]). They live here, above the runtime they extend, so
//! that the runtime never names a trust.

use std::sync::atomic::Ordering;

use super::{Trust, TrusteeRef};
use crate::runtime::profile::Target;
use crate::runtime::shared::Shared;
use crate::runtime::{Handle, Runtime};

impl Runtime {
    /// Trustee `index`.
    ///
    /// # Panics
    /// If there is no such worker.
    pub fn trustee(&self, index: usize) -> TrusteeRef {
        trustee(&self.shared, index)
    }

    /// Entrusts `value` to a trustee chosen round-robin (the dedicated ones
    /// if there are any).
    pub fn entrust<T: Send + 'static>(&self, value: T) -> Trust<T> {
        entrust(&self.shared, value)
    }
}

impl Handle {
    /// Trustee `index`.
    ///
    /// # Panics
    /// If there is no such worker.
    pub fn trustee(&self, index: usize) -> TrusteeRef {
        trustee(&self.shared, index)
    }

    /// Entrusts `value` to a trustee chosen round-robin (the dedicated ones
    /// if there are any).
    pub fn entrust<T: Send + 'static>(&self, value: T) -> Trust<T> {
        self.check();
        entrust(&self.shared, value)
    }
}

impl Target {
    /// The property behind `t`.
    pub fn trust<T: Send + 'static>(t: &Trust<T>) -> Target {
        Target::Property(t.profile_id())
    }
}

fn trustee(s: &Shared, index: usize) -> TrusteeRef {
    assert!(index < s.n, "gossamer: no trustee {index} (the runtime has {})", s.n);
    TrusteeRef::new(index, s.id)
}

fn entrust<T: Send + 'static>(s: &Shared, value: T) -> Trust<T> {
    let r = s.placement_range(None);
    let k = r.start + s.outside_rr.fetch_add(1, Ordering::Relaxed) as usize % r.len();
    trustee(s, k).entrust(value)
}
