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

/// Held by each test here while it moves properties: one counts relays.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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

/// Cells registered with the workers of the runtime the caller runs in.
fn registered_cells(workers: usize) -> usize {
    (0..workers)
        .map(|i| {
            crate::spawn_on(i, || crate::runtime::context::current().expect("a worker").registered()).join().unwrap()
        })
        .sum()
}

#[test]
#[cfg_attr(miri, ignore = "runs a runtime with fibers")]
fn records_left_by_hand_overs_are_freed_while_the_property_lives() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    within(120, || {
        const MOVES: usize = 40;
        let rt = Runtime::builder().workers(3).build().unwrap();
        rt.block_on(|| {
            let before = registered_cells(3);
            let t = crate::trustee(0).entrust(Vec::<(u32, u64)>::new());
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            // Clients on both targets keep routes (and requests on them)
            // while the property moves back and forth.
            let clients: Vec<_> = (1..3u32)
                .map(|c| {
                    let (t, stop) = (t.clone(), stop.clone());
                    crate::spawn_on(c as usize, move || {
                        let mut n = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            t.apply_then(move |v| v.push((c, n)), |_| {});
                            t.apply(move |v| v.push((c, n + 1)));
                            n += 2;
                        }
                        n
                    })
                })
                .collect();
            for k in 0..MOVES {
                t.migrate_to(crate::trustee(1 + k % 2));
            }
            stop.store(true, Ordering::Relaxed);
            let issued: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
            // The origin, the holder, and fewer records than start a sweep.
            let bound = before + 2 + super::origin::SWEEP_AT - 1;
            let start = std::time::Instant::now();
            loop {
                let now = registered_cells(3);
                if now <= bound {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(30), "{now} cells registered after {MOVES} moves");
                crate::yield_now();
            }
            let log = t.apply(|v| v.clone());
            assert_eq!(log.len() as u64, issued, "every request once");
            for c in 1..3 {
                let mine: Vec<u64> = log.iter().filter(|e| e.0 == c).map(|e| e.1).collect();
                assert!(mine.windows(2).all(|p| p[0] + 1 == p[1]), "client {c} in issue order");
            }
        });
    });
}
