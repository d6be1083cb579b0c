//! Shared helpers for the integration tests.
#![allow(dead_code)]

pub mod netns;
pub mod objects;
pub mod programs;

use std::sync::mpsc;
use std::time::Duration;

/// Runs `f` on its own thread and fails the test if it takes longer than
/// `secs` seconds, so that a hang becomes a failure instead of a stuck CI.
pub fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => match h.join().expect("test thread") {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(_) => panic!("test did not finish within {secs} s (hang?)"),
    }
}

/// A runtime with `n` workers and a short idle spin.
pub fn rt(n: usize) -> gossamer::Runtime {
    gossamer::Runtime::builder().workers(n).build().expect("runtime")
}
