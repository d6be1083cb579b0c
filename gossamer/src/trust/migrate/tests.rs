//! Checks of the routes that clients take to a moved property: after a
//! move, requests stop going through the origin, without losing their
//! order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::Runtime;

/// Requests relayed by a record since the process started (the tests of
/// this module are the only ones that move properties).
pub(super) static RELAYED: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` on a thread of its own and fails if it takes longer than
/// `secs` seconds.
fn within(secs: u64, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => std::panic::resume_unwind(h.join().unwrap_err()),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("timed out after {secs} s"),
    }
}

#[test]
#[cfg_attr(miri, ignore = "runs a runtime with fibers")]
fn after_a_move_a_client_sends_to_the_holder_directly() {
    within(60, || {
        const N: u64 = 2000;
        let rt = Runtime::builder().workers(3).build().unwrap();
        rt.block_on(|| {
            let t = crate::trustee(0).entrust(Vec::<u64>::new());
            t.migrate_to(crate::trustee(1));
            let before = RELAYED.load(Ordering::Relaxed);
            let c = t.clone();
            let client = crate::spawn_on(2, move || {
                for i in 0..N {
                    if i % 2 == 0 {
                        c.apply_then(move |v| v.push(i), |_| {});
                    } else {
                        c.apply(move |v| v.push(i));
                    }
                }
                c.apply(|v| v.clone())
            });
            let log = client.join().unwrap();
            let relayed = RELAYED.load(Ordering::Relaxed) - before;
            assert_eq!(log, (0..N).collect::<Vec<_>>(), "every request once, in issue order");
            assert!(relayed < 20, "{relayed} of {N} requests went through the origin after the move");
        });
    });
}
