//! Stuck dumps name the fibers that wait: one waiting on a trustee whose
//! thread is held, and the fibers of a deadlock between two launches.

mod common;
use common::within;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gossamer::profile::WaitOn;
use gossamer::Latch;

/// Polls `rt.stuck()` until `ok` holds (or fails after 10 s).
fn dump_until(
    rt: &gossamer::Runtime,
    ok: impl Fn(&gossamer::profile::StuckDump) -> bool,
) -> gossamer::profile::StuckDump {
    let start = Instant::now();
    loop {
        let d = rt.stuck();
        if ok(&d) {
            return d;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the dump never showed the wait:\n{d}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_fiber_waiting_on_a_held_trustee_is_named_with_its_backlog() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).track_waits(true).build().unwrap();
        let hold = Arc::new(AtomicBool::new(true));
        let h2 = hold.clone();
        let started = Arc::new(AtomicBool::new(false));
        let s2 = started.clone();
        // A fiber on worker 1 that holds its thread: trustee 1 serves nothing.
        let holder = rt.spawn_on(1, move || {
            s2.store(true, Ordering::SeqCst);
            while h2.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        // Worker 1 is held from here on (else it may answer the dump first).
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let t = rt.trustee(1).entrust(5u32);
        let waiter = rt.spawn_on(0, move || t.apply(|v| *v + 1));
        let d = dump_until(&rt, |d| d.waiting.iter().any(|f| f.worker == 0));
        let f = d.on_worker(0).next().unwrap();
        assert_eq!(f.on, WaitOn::Apply(1));
        assert_eq!(f.type_name, "u32");
        assert!(d.missing_workers.contains(&1), "worker 1 is held:\n{d}");
        assert!(d.backlog_of(1) >= 1, "{d}");
        let text = d.to_string();
        assert!(text.contains("waits") && text.contains("apply on trustee 1") && text.contains("u32"), "{text}");
        hold.store(false, Ordering::Relaxed);
        holder.join().unwrap();
        assert_eq!(waiter.join().unwrap(), 6);
        let d = rt.stuck();
        assert!(d.waiting.is_empty(), "{d}");
        assert!(rt.shutdown().clean);
    });
}

#[test]
fn a_deadlock_between_two_launches_shows_in_the_dump() {
    within(60, || {
        let rt = gossamer::Runtime::builder()
            .workers(2)
            .track_waits(true)
            .shutdown_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let a = rt.trustee(0).entrust(Latch::new(1u16));
        let b = rt.trustee(1).entrust(Latch::new(2u16));
        // Launch 1 holds `a`'s latch and launches on `b`; launch 2 holds
        // `b`'s latch and launches on `a`. Each inner launch waits for a
        // latch the other outer launch holds: a deadlock. Neither outer
        // launch goes on before both hold their latch, or the first could
        // finish before the second begins.
        let (a1, b1, a2, b2) = (a.clone(), b.clone(), a.clone(), b.clone());
        static HOLDS_A: AtomicBool = AtomicBool::new(false);
        static HOLDS_B: AtomicBool = AtomicBool::new(false);
        fn both_held(mine: &AtomicBool, other: &AtomicBool) {
            mine.store(true, Ordering::SeqCst);
            while !other.load(Ordering::SeqCst) {
                gossamer::yield_now();
            }
        }
        rt.spawn_on(0, move || {
            a1.launch_with(
                |_, b: gossamer::Trust<Latch<u16>>| {
                    both_held(&HOLDS_A, &HOLDS_B);
                    b.launch(|v| *v)
                },
                b1,
            )
        });
        rt.spawn_on(1, move || {
            b2.launch_with(
                |_, a: gossamer::Trust<Latch<u16>>| {
                    both_held(&HOLDS_B, &HOLDS_A);
                    a.launch(|v| *v)
                },
                a2,
            )
        });
        let d = dump_until(&rt, |d| {
            d.waiting.iter().filter(|f| matches!(f.on, WaitOn::Launch(_))).count() >= 4
                && d.waiting.iter().filter(|f| f.on == WaitOn::Lock).count() >= 2
        });
        let text = d.to_string();
        // The two outer launched closures: on worker 0 waiting for a launch
        // on trustee 1, and on worker 1 waiting for a launch on trustee 0.
        let outer0 = d.on_worker(0).find(|f| f.on == WaitOn::Launch(1)).expect(&text);
        let outer1 = d.on_worker(1).find(|f| f.on == WaitOn::Launch(0)).expect(&text);
        assert!(outer0.type_name.contains("Latch<u16>"), "{text}");
        assert!(outer1.type_name.contains("Latch<u16>"), "{text}");
        assert!(text.contains(&format!("worker 0 (gossamer-0) fiber {}", outer0.fiber)), "{text}");
        assert!(text.contains(&format!("worker 1 (gossamer-1) fiber {}", outer1.fiber)), "{text}");
        // And the inner launches, each waiting for the other's latch.
        assert_eq!(d.on_worker(0).filter(|f| f.on == WaitOn::Lock).count(), 1, "{text}");
        assert_eq!(d.on_worker(1).filter(|f| f.on == WaitOn::Lock).count(), 1, "{text}");
        println!("{text}");
        drop((a, b));
        // The deadlocked fibers are abandoned at shutdown.
        let report = rt.shutdown();
        assert!(!report.clean);
    });
}

#[test]
fn without_tracking_the_dump_says_so() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let d = rt.stuck();
        assert!(!d.tracking);
        assert!(d.to_string().contains("wait tracking is off"));
        rt.track_waits(true);
        assert!(rt.stuck().tracking);
    });
}
