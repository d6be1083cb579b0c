//! Soundness of the runtime layer: fibers, joins, wakes, panics and
//! shutdown, each driven only through safe code and the public API. Every
//! test is one way a careful user could hang, abort or crash the program;
//! each must end in a correct result or a clear panic of the offending
//! fiber. Scenarios that must crash a process (a stack overflow) or need
//! several processes re-run this test binary with `GOSSAMER_SOUNDNESS` set.

use std::future::{Future, IntoFuture};
use std::os::unix::process::ExitStatusExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use gossamer::objects::{Barrier, Shared};
use gossamer::{Parker, Runtime, Trust};

mod common;
use common::programs::{run_program, text};
use common::{rt, within};

/// A value whose `Drop` panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("a Drop that panics");
    }
}

/// The text of a panic payload.
fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

// ---- 6: joining across runtimes ---------------------------------------------

/// A fiber of runtime A joins a fiber of runtime B: the join waits for the
/// result and gets it; B's worker goes on serving.
#[test]
fn s06_joining_a_fiber_of_another_runtime() {
    within(60, || {
        let a = rt(1);
        let b = rt(1);
        let hb = b.handle();
        let got = a.block_on(move || {
            let h = hb.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                42u32
            });
            h.join().unwrap()
        });
        assert_eq!(got, 42);
        // B still runs fibers.
        assert_eq!(b.block_on(|| 7), 7);
        assert!(a.shutdown().clean);
        assert!(b.shutdown().clean);
    });
}

/// The variant where the joiner's fiber number on A names, on B, a fiber
/// that waits for a latch: the completion must not wake that fiber, and no
/// second closure may take the latch while another holds it.
#[test]
fn s06_a_cross_runtime_join_never_wakes_a_latch_waiter() {
    static HOLDERS: AtomicUsize = AtomicUsize::new(0);
    static OVERLAP: AtomicBool = AtomicBool::new(false);
    static RELEASE: AtomicBool = AtomicBool::new(false);
    fn hold(v: &mut u64, ms: u64) {
        if HOLDERS.fetch_add(1, Ordering::SeqCst) != 0 {
            OVERLAP.store(true, Ordering::SeqCst);
        }
        // Hold the latch across suspensions, as a launched closure may.
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(ms) {
            gossamer::yield_now();
        }
        *v += 1;
        HOLDERS.fetch_sub(1, Ordering::SeqCst);
    }
    within(60, || {
        let a = rt(1);
        let b = rt(1);
        let hb = b.handle();
        let latch: Trust<gossamer::Latch<u64>> = b.trustee(0).entrust(gossamer::Latch::new(0u64));
        let l2 = latch.clone();
        let got = a.block_on(move || {
            // On A: this is fiber 0; fibers 1 to 3 wait, so the joiner is fiber 4.
            let idle: Vec<_> = (0..3)
                .map(|_| {
                    gossamer::spawn(|| {
                        while !RELEASE.load(Ordering::SeqCst) {
                            gossamer::yield_now();
                        }
                    })
                })
                .collect();
            let joiner = gossamer::spawn(move || {
                // On B: fibers 0 and 1 launch on the latch (the launched
                // closures become fibers 3 and 4: 4 waits for the latch
                // that 3 holds); A's fiber 4 joins B's fiber 2.
                let (first, second) = (l2.clone(), l2.clone());
                let h0 = hb.spawn_on(0, move || first.launch(|v| hold(v, 300)));
                let h1 = hb.spawn_on(0, move || second.launch(|v| hold(v, 10)));
                let h2 = hb.spawn_on(0, || 5u32);
                let r = h2.join().unwrap();
                h0.join().unwrap();
                h1.join().unwrap();
                r
            });
            let r = joiner.join().unwrap();
            RELEASE.store(true, Ordering::SeqCst);
            idle.into_iter().for_each(|h| h.join().unwrap());
            r
        });
        assert_eq!(got, 5);
        assert!(!OVERLAP.load(Ordering::SeqCst), "two closures held the latch at once");
        assert_eq!(b.block_on(move || latch.launch(|v| *v)), 2);
    });
}

// ---- 7: a panic payload whose Drop panics ------------------------------------

/// Payloads whose `Drop` panics, in every place the runtime drops a
/// payload: a detached fiber's, an `apply_then` closure's, a joined fiber's
/// result that the joiner drops. The runtime goes on; `block_on` returns.
#[test]
fn s07_a_panic_payload_whose_drop_panics() {
    within(60, || {
        let rt = rt(2);
        let remote = rt.trustee(1).entrust(0u64);
        let r = rt.block_on(move || {
            drop(gossamer::spawn(|| std::panic::panic_any(Bomb)));
            remote.apply_then(|_| std::panic::panic_any(Bomb), |()| {});
            for _ in 0..100 {
                gossamer::yield_now();
            }
            remote.apply(|v| {
                *v += 1;
                *v
            })
        });
        assert_eq!(r, 1);
        assert_eq!(rt.block_on(|| 3), 3);
        assert!(rt.stats().unhandled_panics >= 2, "{:?}", rt.stats());
        // The payload of a fiber that block_on resumes here: ours to drop.
        let p = catch_unwind(AssertUnwindSafe(|| rt.block_on(|| std::panic::panic_any(Bomb)))).unwrap_err();
        std::mem::forget(p);
        assert!(rt.shutdown().clean);
    });
}

// ---- 8: a fiber abandoned at shutdown whose Drop calls apply ----------------

static LOCAL_APPLIED: AtomicUsize = AtomicUsize::new(0);

struct ApplyOnDrop(Trust<u64>);

impl Drop for ApplyOnDrop {
    fn drop(&mut self) {
        self.0.apply(|v| {
            *v += 1;
            LOCAL_APPLIED.fetch_add(1, Ordering::SeqCst);
        });
    }
}

/// Fibers still parked at the shutdown timeout own values whose `Drop`
/// calls `apply`, on a property of their own thread and of another one:
/// shutdown ends (not clean), with no abort.
#[test]
fn s08_an_abandoned_fiber_whose_drop_calls_apply() {
    within(60, || {
        let rt = Runtime::builder().workers(2).shutdown_timeout(Duration::from_millis(300)).build().unwrap();
        let local = rt.trustee(0).entrust(0u64);
        let far = rt.trustee(1).entrust(0u64);
        let started = Arc::new(AtomicUsize::new(0));
        for t in [local, far] {
            let s = started.clone();
            drop(rt.spawn_on(0, move || {
                let _g = ApplyOnDrop(t);
                let (p, _u) = Parker::new();
                s.fetch_add(1, Ordering::SeqCst);
                loop {
                    p.park();
                }
            }));
        }
        let start = Instant::now();
        while started.load(Ordering::SeqCst) < 2 {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(5));
        }
        let report = rt.shutdown();
        assert!(!report.clean);
        // The apply on the fiber's own thread ran: its property was still there.
        assert_eq!(LOCAL_APPLIED.load(Ordering::SeqCst), 1);
    });
}

// ---- 9: deep recursion in a fiber ---------------------------------------------

#[inline(never)]
fn recurse(n: u64) -> u64 {
    let a = std::hint::black_box([n; 64]);
    if n == u64::MAX {
        return 0;
    }
    recurse(n + 1).wrapping_add(a[7])
}

fn overflow_child() {
    let rt = Runtime::builder().workers(1).stack_size(64 * 1024).build().unwrap();
    let r = rt.block_on(|| recurse(0));
    println!("unreachable: {r}");
}

/// Deep recursion in a fiber ends the process the way std ends a thread
/// that overflows its stack: a message naming the fiber stack size and
/// the setting that raises it, then an abort — not a bare SIGSEGV.
#[test]
fn s09_deep_recursion_in_a_fiber_reports_a_stack_overflow() {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "soundness_entry", "--nocapture", "--test-threads=1"]).env("GOSSAMER_SOUNDNESS", "overflow");
    let (out, _) = run_program(cmd, Duration::from_secs(60));
    let t = text(&out);
    assert_eq!(out.status.signal(), Some(libc_sigabrt()), "{t}");
    assert!(t.contains("has overflowed its stack"), "{t}");
    assert!(t.contains("65536") && t.contains("Builder::stack_size"), "{t}");
}

fn libc_sigabrt() -> i32 {
    6
}

fn thread_overflow_child() {
    // The runtime's fault handler is installed; a plain thread's overflow
    // must still reach std's.
    let rt = Runtime::builder().workers(1).build().unwrap();
    assert_eq!(rt.block_on(|| 1), 1);
    let t = std::thread::Builder::new().name("plain".into()).stack_size(128 * 1024).spawn(|| recurse(0)).unwrap();
    println!("unreachable: {:?}", t.join().is_ok());
}

/// The handler passes faults outside fiber guard pages on: a plain
/// thread's overflow still gets std's message.
#[test]
fn s09_an_overflow_outside_fibers_still_gets_the_std_message() {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "soundness_entry", "--nocapture", "--test-threads=1"])
        .env("GOSSAMER_SOUNDNESS", "thread_overflow");
    let (out, _) = run_program(cmd, Duration::from_secs(60));
    let t = text(&out);
    if std::env::var_os("GOSSAMER_SANITIZER").is_some() {
        // Under a sanitizer (CI sets the variable) the handler before ours
        // is the sanitizer's, and std installs none: the fault must be
        // passed on to it (AddressSanitizer reports a stack overflow,
        // ThreadSanitizer lets the process die), never taken for a fiber's.
        assert!(!out.status.success(), "{t}");
        assert!(!t.contains("gossamer fiber"), "{t}");
        return;
    }
    assert_eq!(out.status.signal(), Some(libc_sigabrt()), "{t}");
    assert!(t.contains("thread 'plain'") && t.contains("has overflowed its stack"), "{t}");
}

// ---- 15: thread-local context restored; no user code outside catch_unwind --

/// An `apply_then` whose closure panics and whose callback owns a value
/// whose `Drop` panics: the callback is dropped inside the runtime, which
/// must survive it.
#[test]
fn s15_a_callback_dropped_after_a_panic_cannot_kill_its_worker() {
    within(60, || {
        let rt = rt(2);
        let remote = rt.trustee(1).entrust(0u64);
        let r = rt.block_on(move || {
            let bomb = Bomb;
            remote.apply_then(
                |_| -> u64 { panic!("closure panics") },
                move |_| {
                    let _keep = &bomb;
                },
            );
            remote.apply(|v| {
                *v += 1;
                *v
            })
        });
        assert_eq!(r, 1);
        assert_eq!(rt.block_on(|| 11), 11);
        assert!(rt.shutdown().clean);
    });
}

struct PanickyWaker;

impl Wake for PanickyWaker {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics");
    }
}

/// A `JoinHandle` future polled with a waker whose `wake` panics: the
/// fiber's worker survives the wake, and the result is still there.
#[test]
fn s15_a_panicking_waker_cannot_kill_a_worker() {
    within(60, || {
        let rt = rt(1);
        let mut fut = rt
            .spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                9u32
            })
            .into_future();
        let waker = Waker::from(Arc::new(PanickyWaker));
        let mut cx = Context::from_waker(&waker);
        assert!(std::pin::Pin::new(&mut fut).poll(&mut cx).is_pending());
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(rt.block_on(|| 4), 4);
        match std::pin::Pin::new(&mut fut).poll(&mut cx) {
            Poll::Ready(r) => assert_eq!(r.unwrap(), 9),
            Poll::Pending => panic!("the fiber's result was lost"),
        }
        assert!(rt.stats().unhandled_panics >= 1);
        assert!(rt.shutdown().clean);
    });
}

/// After a worker thread served panicking user code (a callback dropped
/// after its closure panicked, its `Drop` panicking too), a thread-local
/// destructor on it sees no runtime: the worker lived on, and its context
/// was cleared when it ended.
#[test]
fn s15_thread_local_destructors_on_a_worker_see_no_runtime() {
    struct Probe(Arc<AtomicUsize>);
    impl Drop for Probe {
        fn drop(&mut self) {
            let v = if gossamer::current_thread().is_none() { 1 } else { 2 };
            self.0.store(v, Ordering::SeqCst);
        }
    }
    thread_local! {
        static PROBE: std::cell::RefCell<Option<Probe>> = const { std::cell::RefCell::new(None) };
    }
    within(60, || {
        let seen = Arc::new(AtomicUsize::new(0));
        let rt = Runtime::builder().workers(2).shutdown_timeout(Duration::from_secs(2)).build().unwrap();
        let remote = rt.trustee(1).entrust(0u64);
        let s = seen.clone();
        drop(rt.spawn_on(0, move || {
            PROBE.with(|p| *p.borrow_mut() = Some(Probe(s)));
            let bomb = Bomb;
            remote.apply_then(
                |_| -> u64 { panic!("closure panics") },
                move |_| {
                    let _keep = &bomb;
                },
            );
        }));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(seen.load(Ordering::SeqCst), 0, "worker 0 ended early");
        assert!(rt.shutdown().clean);
        assert_eq!(seen.load(Ordering::SeqCst), 1, "a thread-local destructor saw a runtime");
    });
}

/// Across processes: a `launch_with_then` callback that panics, run by the
/// fiber that waits for the far result; the worker lives on.
fn far_callback() {
    static CALLED: AtomicBool = AtomicBool::new(false);
    let latch: Trust<gossamer::Latch<u64>> =
        gossamer::spawn_with(2, |()| gossamer::local_trustee().entrust(gossamer::Latch::new(0u64)), ()).join().unwrap();
    latch.launch_with_then(
        |v, ()| {
            *v += 1;
            *v
        },
        (),
        |_| {
            CALLED.store(true, Ordering::SeqCst);
            panic!("a launch_then callback that panics");
        },
    );
    let start = Instant::now();
    while !CALLED.load(Ordering::SeqCst) {
        assert!(start.elapsed() < Duration::from_secs(20), "the callback never ran");
        gossamer::yield_now();
    }
    for _ in 0..100 {
        gossamer::yield_now();
    }
    assert_eq!(latch.launch_with(|v, ()| *v, ()), 1);
    println!("SOUNDNESS far_callback ok");
}

#[test]
fn s15_a_panicking_callback_of_a_far_launch_cannot_kill_its_worker() {
    let (out, _) = run_program(multi("far_callback"), Duration::from_secs(60));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SOUNDNESS far_callback ok"), "{t}");
}

/// This test binary as a program of two processes running `scenario`.
fn multi(scenario: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "soundness_entry", "--nocapture", "--test-threads=1"])
        .env("GOSSAMER_SOUNDNESS", scenario)
        .env("GOSSAMER_PROCESSES", "2")
        .env("GOSSAMER_SILENCE_MS", "20000")
        .env_remove("GOSSAMER_RANK")
        .env_remove("GOSSAMER_SIZE");
    cmd
}

// ---- 20: Shared::get and Barrier ---------------------------------------------

/// Two fibers of one worker in another process read the same handle for
/// the first time: the second must not block the thread while the first
/// fetches.
fn shared_two_readers() {
    let s = Shared::new((0..10_000u64).collect::<Vec<_>>());
    let sum = gossamer::spawn_with(
        2,
        |s: Shared<Vec<u64>>| {
            let s = Arc::new(s);
            let s2 = s.clone();
            let other = gossamer::spawn_on(2, move || s2.get().iter().sum::<u64>());
            s.get().iter().sum::<u64>() + other.join().unwrap()
        },
        s.clone(),
    )
    .join()
    .unwrap();
    assert_eq!(sum, 2 * (0..10_000u64).sum::<u64>());
    println!("SOUNDNESS shared ok");
}

#[test]
fn s20_two_fibers_reading_a_shared_value_first_do_not_block_their_thread() {
    let (out, _) = run_program(multi("shared"), Duration::from_secs(60));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SOUNDNESS shared ok"), "{t}");
}

/// A second fiber of a participant thread arrives while the first has
/// been woken for the phase but has not run yet: it must be refused with
/// the two-fibers panic, not take the first one's phase.
#[test]
fn s20_a_barrier_refuses_a_second_fiber_between_wake_and_run() {
    static OPENED: AtomicBool = AtomicBool::new(false);
    within(60, || {
        let rt = rt(2);
        let msg = rt.block_on(|| {
            let b = Barrier::over([0, 1]);
            let flag = gossamer::trustee(0).entrust(());
            let b0 = b.clone();
            let first = gossamer::spawn_on(0, move || b0.wait());
            // Let the first fiber arrive and suspend at its gate.
            for _ in 0..20 {
                gossamer::yield_now();
            }
            let b1 = b.clone();
            gossamer::spawn_on(1, move || {
                // Two fibers of thread 1, run in one pass: the arrival and
                // then the flag travel to thread 0 in one batch, so the
                // flag is set right after the first fiber was woken.
                let arrive = gossamer::spawn_on(1, move || b1.wait());
                let signal =
                    gossamer::spawn_on(1, move || flag.apply_then(|_| OPENED.store(true, Ordering::SeqCst), |()| {}));
                arrive.join().unwrap();
                signal.join().unwrap();
            });
            let start = Instant::now();
            while !OPENED.load(Ordering::SeqCst) {
                assert!(start.elapsed() < Duration::from_secs(10), "the phase never completed");
                gossamer::yield_now();
            }
            let second = catch_unwind(AssertUnwindSafe(|| b.wait()));
            let first = first.join().unwrap();
            assert_eq!(first, 1);
            match second {
                Ok(phase) => format!("the second fiber passed phase {phase}"),
                Err(p) => message(&*p),
            }
        });
        assert!(msg.contains("two fibers of one thread wait at the same barrier"), "{msg}");
    });
}

// ---- child processes ---------------------------------------------------------

#[test]
fn soundness_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SOUNDNESS") else { return };
    match s.as_str() {
        "overflow" => overflow_child(),
        "thread_overflow" => thread_overflow_child(),
        "shared" => gossamer::main(shared_two_readers, 4),
        "far_callback" => gossamer::main(far_callback, 4),
        other => panic!("unknown scenario {other}"),
    }
}
