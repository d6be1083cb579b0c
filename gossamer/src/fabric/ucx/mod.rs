//! UCX between hosts: a hand-written binding to the system's UCP library
//! (`libucp.so.0`, UCX 1.13 or newer), loaded at run time, and the safe
//! types the fabric uses to put slot bytes into another host's memory.
//!
//! This module owns everything that touches UCX:
//! * `ffi`: the C declarations and the function table, loaded with
//!   `libloading` so that building the crate, and every single-host path,
//!   never needs UCX installed;
//! * [`Ucx`]: the loaded library, once per process ([`Ucx::load`]);
//! * [`Context`] (`ucp_context_h`, shared by all threads) and [`MemRegion`]
//!   (memory registered for remote writes, with its packed key);
//! * [`Worker`] (`ucp_worker_h`, one per OS thread), [`Endpoint`]
//!   (`ucp_ep_h`, one per thread and remote host), [`RemoteKey`] (an
//!   unpacked key with the bounds of the remote region it opens) and
//!   [`Request`]/[`Put`] (an operation in flight);
//! * active messages: [`Endpoint::am_send`] sends a header and the bytes of
//!   [`IoPart`]s, eagerly; [`Worker::set_am_handler`] takes them in at the
//!   target, within its progress;
//! * [`UcxError`].
//!
//! Threads: a [`Context`] and its [`MemRegion`]s may be used from any
//! thread. A [`Worker`] is `Send` but not `Sync`: one thread at a time drives
//! it. Everything UCX does for an [`Endpoint`] or a [`RemoteKey`] runs on the
//! worker's thread, which is why their operations take the `&Worker`; their
//! handles may be stored anywhere and dropped anywhere (the cleanup then
//! runs in the worker's next [`Worker::progress`], or when it is dropped).
//!
//! Progress and visibility: nothing moves unless someone calls
//! [`Worker::progress`]. Over TCP a put is carried by messages and written
//! into the target's memory by the target's own `ucp_worker_progress`, so
//! the *target* must keep progressing too. Completion of a [`Put`] is local
//! completion only (its source may be reused); that the bytes are visible
//! at the target is known after a flush ([`Worker::flush`],
//! [`Endpoint::flush`]) completes. [`Worker::fence`] orders puts without
//! waiting (`ucp_worker_fence`; UCX 1.13 has no per-endpoint fence).

mod context;
mod endpoint;
mod error;
mod ffi;
mod worker;

// UCX is a C library loaded at run time: nothing of it runs under Miri.
#[cfg(all(test, not(miri)))]
mod layout_test;
#[cfg(all(test, not(miri)))]
mod tests;

use std::sync::{Arc, OnceLock};

// The fabric's API; not all of it has users outside this module yet.
#[allow(unused_imports)]
pub(crate) use context::{Context, MemRegion};
#[allow(unused_imports)]
pub(crate) use endpoint::{Endpoint, IoPart, RemoteKey};
pub(crate) use error::UcxError;
pub(crate) use ffi::Ucx;
#[allow(unused_imports)]
pub(crate) use worker::{Put, Request, Worker};

impl Ucx {
    /// The process's UCX library (`libucp.so.0`), loaded on first use. Every
    /// call returns the same library, or an error with the same text.
    pub(crate) fn load() -> Result<Arc<Ucx>, UcxError> {
        static UCX: OnceLock<Result<Arc<Ucx>, UcxError>> = OnceLock::new();
        UCX.get_or_init(|| Ucx::load_from(ffi::LIBUCP).map(Arc::new)).clone()
    }
}
