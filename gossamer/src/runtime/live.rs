//! The public calls that change trustee settings while the runtime runs —
//! the number of dedicated trustees, the policy that picks it, and each
//! trustee's polling parameters — on [`Runtime`], [`Handle`] and, for
//! fibers, as free functions (`TrusteeRef`'s are in the trust layer).

use std::sync::Arc;

use super::context;
use super::shared::Shared;
use super::tuning::{DedicatedChange, DedicatedPolicy, TrusteeParams};
use super::{autodedicate, Handle, Runtime};
use crate::error::Error;

pub(crate) fn set_policy(sh: &Arc<Shared>, policy: DedicatedPolicy) -> Result<(), Error> {
    sh.set_dedicated_policy(policy)?;
    if policy == DedicatedPolicy::Auto {
        autodedicate::ensure_started(sh);
    }
    Ok(())
}

impl Runtime {
    /// The number of dedicated trustees right now: the last that many
    /// workers of this process serve delegated closures first, and
    /// placement (`entrust`, `spawn`) leaves them out of the fibers' share.
    pub fn dedicated(&self) -> usize {
        self.shared.tuning.dedicated()
    }

    /// Makes the last `k` workers of this process dedicated trustees from
    /// now on, and switches the controller off (the policy becomes
    /// `Fixed(k)`). Nothing moves: properties stay with their trustees
    /// (pool-level `entrust` places new ones on the dedicated workers),
    /// and fibers stay on their threads — a worker that becomes dedicated
    /// gets no new fibers from `spawn` and runs the ones it has only
    /// between batches it serves, one that stops being dedicated runs
    /// fibers as before.
    ///
    /// ```
    /// let rt = gossamer::Runtime::builder().workers(2).build()?;
    /// let counter = rt.entrust(0u64);
    /// rt.set_dedicated(1)?;
    /// assert_eq!(rt.dedicated(), 1);
    /// let c = counter.clone();
    /// rt.spawn(move || c.apply(|v| *v += 1)).join().unwrap(); // runs on worker 0
    /// rt.set_dedicated(0)?;
    /// assert_eq!(rt.block_on(move || counter.apply(|v| *v)), 1);
    /// assert!(rt.set_dedicated(2).is_err()); // one worker must run fibers
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::TooManyDedicated`] when `k` leaves no worker of this
    /// process to run fibers.
    pub fn set_dedicated(&self, k: usize) -> Result<(), Error> {
        self.shared.set_dedicated_policy(DedicatedPolicy::Fixed(k))
    }

    /// The policy that picks the number of dedicated trustees.
    pub fn dedicated_policy(&self) -> DedicatedPolicy {
        self.shared.dedicated_policy()
    }

    /// Sets the policy: a fixed count (as [`set_dedicated`](Self::set_dedicated)),
    /// or `Auto`, which starts the controller of
    /// [`Builder::dedicated_trustees_auto`](super::Builder::dedicated_trustees_auto)
    /// from the count in force.
    pub fn set_dedicated_policy(&self, policy: DedicatedPolicy) -> Result<(), Error> {
        set_policy(&self.shared, policy)
    }

    /// The latest changes of the dedicated count (up to 256), oldest first.
    pub fn dedicated_history(&self) -> Vec<DedicatedChange> {
        self.shared.dedicated_history()
    }

    /// The polling parameters of trustee `index` (a worker of this process).
    pub fn trustee_params(&self, index: usize) -> Result<TrusteeParams, Error> {
        self.shared.trustee_params(index)
    }

    /// Sets the polling parameters of trustee `index`, or of every worker of
    /// this process (`None`), effective at the worker's next idle round.
    ///
    /// # Errors
    /// [`Error::BadTrusteeParam`] for a value outside the bounds documented
    /// on [`TrusteeParams`]; [`Error::NoSuchTrustee`] for an index that is
    /// not a worker of this process.
    pub fn set_trustee_params(&self, index: Option<usize>, params: TrusteeParams) -> Result<(), Error> {
        self.shared.set_trustee_params(index, params)
    }
}

impl Handle {
    /// As [`Runtime::dedicated`].
    pub fn dedicated(&self) -> usize {
        self.shared.tuning.dedicated()
    }

    /// As [`Runtime::set_dedicated`].
    pub fn set_dedicated(&self, k: usize) -> Result<(), Error> {
        self.shared.set_dedicated_policy(DedicatedPolicy::Fixed(k))
    }

    /// As [`Runtime::set_dedicated_policy`].
    pub fn set_dedicated_policy(&self, policy: DedicatedPolicy) -> Result<(), Error> {
        set_policy(&self.shared, policy)
    }

    /// As [`Runtime::dedicated_policy`].
    pub fn dedicated_policy(&self) -> DedicatedPolicy {
        self.shared.dedicated_policy()
    }

    /// As [`Runtime::trustee_params`].
    pub fn trustee_params(&self, index: usize) -> Result<TrusteeParams, Error> {
        self.shared.trustee_params(index)
    }

    /// As [`Runtime::set_trustee_params`].
    pub fn set_trustee_params(&self, index: Option<usize>, params: TrusteeParams) -> Result<(), Error> {
        self.shared.set_trustee_params(index, params)
    }
}

/// As [`Runtime::set_dedicated`], for the calling fiber's runtime.
///
/// ```
/// let rt = gossamer::Runtime::builder().workers(2).build()?;
/// rt.block_on(|| gossamer::set_dedicated(1))?;
/// assert_eq!(rt.dedicated(), 1);
/// # Ok::<(), gossamer::Error>(())
/// ```
///
/// # Panics
/// Outside the runtime's threads.
pub fn set_dedicated(k: usize) -> Result<(), Error> {
    context::worker().shared.set_dedicated_policy(DedicatedPolicy::Fixed(k))
}

/// As [`Runtime::set_dedicated_policy`], for the calling fiber's runtime.
///
/// # Panics
/// Outside the runtime's threads.
pub fn set_dedicated_policy(policy: DedicatedPolicy) -> Result<(), Error> {
    set_policy(&context::worker().shared, policy)
}

/// As [`Runtime::dedicated`], for the calling fiber's runtime.
///
/// # Panics
/// Outside the runtime's threads.
pub fn dedicated() -> usize {
    context::worker().shared.tuning.dedicated()
}
