//! Errors of the public API.

use std::any::Any;
use std::fmt;
use std::sync::Mutex;

/// Errors from building or running a [`Runtime`](crate::Runtime).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `workers(0)` was asked for.
    #[error("a runtime needs at least one worker thread")]
    NoWorkers,
    /// All workers would be dedicated trustees, leaving none to run fibers.
    #[error("{dedicated} dedicated trustees out of {workers} workers leave no worker to run fibers")]
    TooManyDedicated {
        /// Workers asked for.
        workers: usize,
        /// Dedicated trustees asked for.
        dedicated: usize,
    },
    /// A trustee parameter outside its bounds (see [`TrusteeParams`](crate::TrusteeParams)).
    #[error("trustee parameter {name} = {value} is out of bounds: it must be {allowed}")]
    BadTrusteeParam {
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A parameter of [`MigrationPolicy::Follow`](crate::MigrationPolicy::Follow)
    /// outside its bounds (see [`FollowParams`](crate::FollowParams)).
    #[error("migration policy parameter {name} = {value} is out of bounds: it must be {allowed}")]
    BadMigrationParam {
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A trustee index that names no worker of this process.
    #[error("no trustee {index} in this process (its workers are {local:?}); name one of them")]
    NoSuchTrustee {
        /// The index given.
        index: usize,
        /// This process's workers.
        local: std::ops::Range<usize>,
    },
    /// The runtime was asked for something after it shut down.
    #[error("the runtime has shut down; keep the Runtime alive while its settings are changed")]
    ShutDown,
    /// The operating system refused to start a worker thread.
    #[error("cannot start worker thread {index}: {source}")]
    Spawn {
        /// Worker index.
        index: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Best-effort text of a panic payload.
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    }
}

/// Drops a panic payload that the runtime owns, inside `catch_unwind`: a
/// payload's own `Drop` is user code and may panic too (its payload in
/// turn is dropped the same way, a bounded number of times, then leaked),
/// and nothing may unwind into the runtime's loop.
pub(crate) fn drop_payload(payload: Box<dyn Any + Send>) {
    let mut p = payload;
    for _ in 0..8 {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(p))) {
            Ok(()) => return,
            Err(q) => p = q,
        }
    }
    std::mem::forget(p);
}

/// A panic caught where it could not unwind into its caller: in a fiber
/// (returned by [`JoinHandle::join`](crate::JoinHandle::join)) or in a
/// delegated closure (given to [`Trust::try_apply_then`](crate::Trust::try_apply_then)).
///
/// A `std::error::Error` that is `Send + Sync + 'static`, so `?` carries it
/// into `anyhow::Error` or `Box<dyn Error + Send + Sync>`. Its message is
/// kept as text; the original payload stays available to
/// [`into_panic`](Panicked::into_panic), to resume the panic with
/// `std::panic::resume_unwind`.
///
/// ```
/// fn run() -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
///     let rt = gossamer::Runtime::builder().workers(1).build()?;
///     rt.block_on(|| {
///         let fine = gossamer::spawn(|| 6 * 7).join()?;
///         assert_eq!(fine, 42);
///         let failed = gossamer::spawn(|| -> u64 { panic!("out of range") }).join();
///         let err = anyhow::Error::from(failed.unwrap_err());
///         assert_eq!(err.to_string(), "panicked: out of range");
///         Ok(fine)
///     })
/// }
/// assert_eq!(run().unwrap(), 42);
/// ```
pub struct Panicked {
    message: String,
    /// Taken by `into_panic`. A payload is only `Send`; the mutex makes the
    /// error `Sync` without looking inside it.
    payload: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Panicked {
    pub(crate) fn new(payload: Box<dyn Any + Send>) -> Self {
        Panicked { message: panic_message(&*payload), payload: Mutex::new(Some(payload)) }
    }

    /// The panic's message, when it was a string.
    pub fn message(&self) -> String {
        self.message.clone()
    }

    /// The original payload, for `std::panic::resume_unwind`.
    pub fn into_panic(mut self) -> Box<dyn Any + Send> {
        let payload = self.payload.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        payload.unwrap_or_else(|| Box::new(std::mem::take(&mut self.message)))
    }
}

impl Drop for Panicked {
    fn drop(&mut self) {
        // The payload is user data whose `Drop` may panic: never unwind
        // out of an error value being dropped.
        if let Some(p) = self.payload.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            drop_payload(p);
        }
    }
}

impl fmt::Debug for Panicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Panicked").field(&self.message).finish()
    }
}

impl fmt::Display for Panicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "panicked: {}", self.message)
    }
}

impl std::error::Error for Panicked {}

/// The error of [`JoinHandle::join`](crate::JoinHandle::join): the fiber panicked.
pub type JoinError = Panicked;
