//! Results too large for a response: the waiting fiber pulls them from the
//! trustee's outbox, chunk by chunk (see `channel::large`).

use std::ptr;
use std::thread;

use serde::de::DeserializeOwned;

use super::{complete_wake, Waiter};
use crate::channel::large::{self, serde_bytes_vec::Bytes, LargeResult};
use crate::runtime::context;
use crate::runtime::worker::Completion;

/// Pulls the bytes of `lr` (in the calling fiber, which waits).
fn pull(lr: LargeResult) -> Result<Vec<u8>, String> {
    let w = context::current().ok_or("gossamer: pulling a result outside the runtime")?;
    let bulk =
        if w.shared.same_host(lr.trustee) { w.shared.region.bulk_bytes() } else { w.shared.region.shape().far_bulk };
    let chunk = large::chunk_bytes(bulk);
    // The length comes from the trustee's process: reserved without
    // aborting the program when it cannot be had.
    let mut out = Vec::new();
    out.try_reserve_exact(lr.len).map_err(|_| {
        format!("gossamer: a result of {} bytes from thread {} cannot be held in memory", lr.len, lr.trustee)
    })?;
    while out.len() < lr.len {
        let n = chunk.min(lr.len - out.len());
        let wait = Waiter::<Bytes>::new(w.current_fiber());
        let c = Completion { run: complete_wake::<Bytes>, data: wait.as_data() };
        w.encode_remote(lr.trustee, large::pull_shim, ptr::null_mut(), (lr.id, out.len() as u64, n as u64), None, c);
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wait.wait()))
            .map_err(|p| crate::error::panic_message(&*p))?;
        // The trustee sends at most what its response batch has room for
        // (possibly nothing, when other responses filled it): ask again.
        if got.0.len() > n {
            return Err(format!("gossamer: pulled {} bytes of a result where at most {n} were due", got.0.len()));
        }
        out.extend_from_slice(&got.0);
    }
    Ok(out)
}

/// The value behind a large result, pulled and deserialized.
pub(crate) fn finish<U: DeserializeOwned + 'static>(lr: LargeResult) -> thread::Result<U> {
    let r = pull(lr).and_then(|bytes| crate::channel::remote::try_deserialize::<U>(&bytes));
    r.map_err(|m| Box::new(m) as Box<dyn std::any::Any + Send>)
}

/// If `r` is a large result, the pulled value; else `r` itself.
pub(crate) fn resolve<U: DeserializeOwned + 'static>(r: thread::Result<U>) -> thread::Result<U> {
    match r {
        Err(p) => match p.downcast::<LargeResult>() {
            Ok(lr) => finish(*lr),
            Err(p) => Err(p),
        },
        ok => ok,
    }
}

/// Whether `r` is a large result still to be pulled.
pub(crate) fn is_large<U>(r: &thread::Result<U>) -> bool {
    matches!(r, Err(p) if p.is::<LargeResult>())
}
