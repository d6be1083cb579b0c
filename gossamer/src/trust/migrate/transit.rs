//! Cells a moved value was put into whose trustee has not registered them
//! yet. Registration travels as a message; if the runtime stops before it
//! arrives (shutdown gave up waiting, with a hand-over in flight), no
//! trustee would drop the value. The runtime drops what is left here once
//! its workers have stopped, so every value is dropped exactly once: by
//! its trustee if it was registered, else here.

use std::sync::Mutex;

use crate::runtime::property::{self, Header, SendPtr};

/// Per cell in transit: its runtime and the cell.
static TRANSIT: Mutex<Vec<(u64, SendPtr<*mut Header>)>> = Mutex::new(Vec::new());

fn transit() -> std::sync::MutexGuard<'static, Vec<(u64, SendPtr<*mut Header>)>> {
    TRANSIT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The value of runtime `runtime` was just put into the fresh cell `h`.
pub(super) fn departed(runtime: u64, h: *mut Header) {
    transit().push((runtime, SendPtr(h)));
}

/// The cell `h` was registered with its trustee.
pub(super) fn arrived(h: *mut Header) {
    let mut t = transit();
    if let Some(i) = t.iter().position(|(_, c)| c.0 == h) {
        t.swap_remove(i);
    }
}

/// After the workers of runtime `runtime` stopped: drops the values still
/// in transit and frees their cells.
pub(crate) fn drop_left(runtime: u64) {
    let left: Vec<SendPtr<*mut Header>> = {
        let mut t = transit();
        let (mine, others): (Vec<_>, Vec<_>) = t.drain(..).partition(|(r, _)| *r == runtime);
        *t = others;
        mine.into_iter().map(|(_, c)| c).collect()
    };
    for h in left {
        // SAFETY: a cell made for a moved value and never registered, so no
        // trustee dropped it, and the workers that could have have stopped:
        // dropped once, here.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { property::drop_unregistered(h.0) }));
        if let Err(p) = r {
            tracing::error!("a moved property's drop at shutdown panicked: {}", crate::error::panic_message(&*p));
            crate::error::drop_payload(p);
        }
    }
}
