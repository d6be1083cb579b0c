//! Orderly shutdown: nothing issued is lost, nothing hangs.

mod common;
use common::within;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn shutdown_completes_outstanding_requests_and_detached_fibers() {
    within(60, || {
        let done = Arc::new(AtomicU64::new(0));
        let rt = gossamer::Runtime::builder().workers(3).build().unwrap();
        let counter = rt.trustee(2).entrust(0u64);
        let c2 = counter.clone();
        let d = done.clone();
        rt.block_on(move || {
            for w in 0..2 {
                let c = c2.clone();
                let d = d.clone();
                // Detached fibers, still issuing when block_on returns.
                gossamer::spawn_on(w, move || {
                    for _ in 0..5000 {
                        let d = d.clone();
                        c.apply_then(
                            |v| *v += 1,
                            move |()| {
                                d.fetch_add(1, Ordering::Relaxed);
                            },
                        );
                    }
                });
            }
        });
        let report = rt.shutdown();
        assert!(report.clean, "{report:?}");
        assert_eq!(done.load(Ordering::Relaxed), 10_000, "every callback ran before shutdown finished");
        drop(counter);
    });
}

#[test]
fn shutdown_abandons_a_fiber_blocked_forever_after_the_timeout() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).shutdown_timeout(Duration::from_millis(300)).build().unwrap();
        rt.block_on(|| {
            let t = gossamer::trustee(1).entrust(gossamer::Latch::new(0u8));
            let t2 = t.clone();
            // Hold the latch forever from one launched fiber, and queue a
            // second launch behind it.
            t.launch_then(
                |_| loop {
                    gossamer::yield_now();
                    std::thread::sleep(Duration::from_millis(1));
                },
                |()| {},
            );
            gossamer::spawn(move || t2.launch(|v| *v));
        });
        let report = rt.shutdown();
        assert!(!report.clean);
        assert!(report.elapsed < Duration::from_secs(5));
    });
}

#[test]
fn idle_runtimes_start_and_stop_quickly_many_times() {
    within(60, || {
        for i in 0..20 {
            let rt = gossamer::Runtime::builder().workers(1 + i % 3).build().unwrap();
            assert_eq!(rt.block_on(move || i * 2), i * 2);
            let r = rt.shutdown();
            assert!(r.clean);
        }
    });
}

#[test]
fn builder_rejects_impossible_configurations() {
    assert!(matches!(gossamer::Runtime::builder().workers(0).build(), Err(gossamer::Error::NoWorkers)));
    assert!(matches!(
        gossamer::Runtime::builder().workers(2).dedicated_trustees(2).build(),
        Err(gossamer::Error::TooManyDedicated { .. })
    ));
}
