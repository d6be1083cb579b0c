//! `apply_async` / `apply_with_async` from tokio's multi-thread runtime, in
//! fibers and on plain threads: exact totals with thousands of tasks and
//! requests in flight, order, panics, cancellation at random points with
//! every owned value and result dropped exactly once, properties whose
//! last trust goes while requests are queued, and shutdown. Every test is
//! bounded in time.

mod common;
use common::within;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde::{Deserialize, Serialize};

fn tokio_rt(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_time().build().expect("tokio runtime")
}

/// Runs `fut` on a fresh tokio multi-thread runtime, failing after `secs`.
fn on_tokio<F: Future + Send + 'static>(threads: usize, secs: u64, fut: F) -> F::Output
where
    F::Output: Send,
{
    tokio_rt(threads).block_on(async move {
        tokio::time::timeout(Duration::from_secs(secs), fut).await.expect("timed out under tokio (a lost wake-up?)")
    })
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn ten_thousand_tokio_tasks_get_exact_totals() {
    within(120, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let h = rt.handle();
        let counters: Arc<Vec<gossamer::Trust<u64>>> = Arc::new((0..8).map(|_| h.entrust(0u64)).collect());
        let table = h.entrust(std::collections::HashMap::<String, u64>::new());
        const TASKS: u64 = 10_000;
        const EACH: u64 = 5;
        let (cs, t2) = (counters.clone(), table.clone());
        let seen = on_tokio(4, 100, async move {
            let mut tasks = Vec::new();
            for i in 0..TASKS {
                let (cs, table) = (cs.clone(), t2.clone());
                tasks.push(tokio::spawn(async move {
                    let mut last = 0;
                    for j in 0..EACH {
                        let c = &cs[((i + j) % 8) as usize];
                        last = c
                            .apply_async(|c| {
                                *c += 1;
                                *c
                            })
                            .await;
                        if j == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    table
                        .apply_with_async(
                            |t, k: String| {
                                *t.entry(k).or_insert(0) += 1;
                            },
                            format!("k{}", i % 100),
                        )
                        .await;
                    last
                }));
            }
            let mut max = 0;
            for t in tasks {
                max = max.max(t.await.expect("task"));
            }
            max
        });
        assert!(seen > 0);
        let total: u64 = counters.iter().map(|c| gossamer::block_on(c.apply_async(|v| *v))).sum();
        assert_eq!(total, TASKS * EACH);
        let (keys, sum) = gossamer::block_on(table.apply_async(|t| (t.len(), t.values().sum::<u64>())));
        assert_eq!((keys, sum), (100, TASKS));
        drop((counters, table));
        assert!(rt.shutdown().clean);
    });
}

#[test]
fn many_requests_in_flight_per_task_run_in_issue_order() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let log = rt.trustee(1).entrust(Vec::<u32>::new());
        let l2 = log.clone();
        let results = on_tokio(2, 50, async move {
            // Issued without awaiting: all 2000 are in flight at once.
            let futs: Vec<_> = (0..2000u32)
                .map(|i| {
                    l2.apply_async(move |v| {
                        v.push(i);
                        v.len()
                    })
                })
                .collect();
            let mut out = Vec::new();
            for f in futs {
                out.push(f.await);
            }
            out
        });
        assert_eq!(results, (1..=2000).collect::<Vec<_>>());
        let v = gossamer::block_on(log.apply_async(|v| v.clone()));
        assert_eq!(v, (0..2000).collect::<Vec<_>>());
    });
}

#[test]
fn panics_reach_the_awaiting_task_and_the_trustee_keeps_serving() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let c = rt.entrust(5u64);
        let c2 = c.clone();
        let (err, after) = on_tokio(2, 50, async move {
            let c3 = c2.clone();
            let err = tokio::spawn(async move {
                c3.apply_async(|v| {
                    if *v == 5 {
                        panic!("deliberate: five");
                    }
                    *v
                })
                .await
            })
            .await
            .unwrap_err();
            (err, c2.apply_async(|v| *v + 1).await)
        });
        assert!(err.is_panic());
        let msg = err.into_panic();
        assert_eq!(msg.downcast_ref::<&str>().copied(), Some("deliberate: five"));
        assert_eq!(after, 6);
        assert_eq!(rt.stats().unhandled_panics, 0);
    });
}

// ----- cancellation ------------------------------------------------------

static ARGS_MADE: AtomicU64 = AtomicU64::new(0);
static ARGS_DROPPED: AtomicU64 = AtomicU64::new(0);
static RESULTS_MADE: AtomicU64 = AtomicU64::new(0);
static RESULTS_DROPPED: AtomicU64 = AtomicU64::new(0);

/// An argument whose drops are counted.
#[derive(Serialize, Deserialize)]
struct Arg(u64);

impl Arg {
    fn new(v: u64) -> Arg {
        ARGS_MADE.fetch_add(1, Ordering::SeqCst);
        Arg(v)
    }
}

impl Drop for Arg {
    fn drop(&mut self) {
        ARGS_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// A result whose drops are counted.
#[derive(Serialize, Deserialize)]
struct Res(u64);

impl Res {
    fn new(v: u64) -> Res {
        RESULTS_MADE.fetch_add(1, Ordering::SeqCst);
        Res(v)
    }
}

impl Drop for Res {
    fn drop(&mut self) {
        RESULTS_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// The property: how many closures ran, and the sum of their arguments.
#[derive(Default)]
struct Tally {
    ran: u64,
    sum: u64,
}

/// Polls a future once with a waker that does nothing.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(f).poll(&mut cx)
}

#[test]
fn cancellation_at_random_points_drops_everything_exactly_once() {
    within(120, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let tallies: Arc<Vec<gossamer::Trust<Tally>>> =
            Arc::new((0..4).map(|_| rt.entrust(Tally::default())).collect());
        let ts = tallies.clone();
        let (issued, completed, completed_sum) = on_tokio(3, 100, async move {
            let mut tasks = Vec::new();
            for task in 0..200u64 {
                let ts = ts.clone();
                tasks.push(tokio::spawn(async move {
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (task + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
                    let (mut issued, mut completed, mut sum) = (0u64, 0u64, 0u64);
                    for _ in 0..100 {
                        let t = &ts[(rng.next() % 4) as usize];
                        let v = rng.next() % 1000;
                        let f = t.apply_with_async(
                            |t: &mut Tally, a: Arg| {
                                t.ran += 1;
                                t.sum += a.0;
                                Res::new(a.0)
                            },
                            Arg::new(v),
                        );
                        issued += 1;
                        let got = match rng.next() % 5 {
                            // Dropped at once, never polled.
                            0 => None,
                            // Polled once, then dropped (or done already).
                            1 => {
                                let mut f = f;
                                match poll_once(&mut f) {
                                    Poll::Ready(r) => Some(r),
                                    Poll::Pending => None,
                                }
                            }
                            // A random short deadline.
                            2 => tokio::time::timeout(Duration::from_micros(rng.next() % 200), f).await.ok(),
                            // A race against another timer.
                            3 => {
                                let d = Duration::from_micros(rng.next() % 100);
                                tokio::select! {
                                    r = f => Some(r),
                                    _ = tokio::time::sleep(d) => None,
                                }
                            }
                            _ => Some(f.await),
                        };
                        if let Some(r) = got {
                            assert_eq!(r.0, v);
                            completed += 1;
                            sum += v;
                        }
                    }
                    (issued, completed, sum)
                }));
            }
            let mut tot = (0, 0, 0);
            for t in tasks {
                let (i, c, s) = t.await.unwrap();
                tot = (tot.0 + i, tot.1 + c, tot.2 + s);
            }
            tot
        });
        // Whatever ran is in the tallies; what completed ran.
        let (ran, sum) = tallies
            .iter()
            .map(|t| gossamer::block_on(t.apply_async(|t| (t.ran, t.sum))))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert_eq!(issued, 20_000);
        assert!(completed <= ran && ran <= issued, "completed {completed}, ran {ran}, issued {issued}");
        assert!(completed_sum <= sum);
        assert!(completed > 0 && completed < issued, "some requests should complete and some be cancelled");
        drop(tallies);
        assert!(rt.shutdown().clean);
        // Every argument and every result went exactly once, cancelled or not.
        assert_eq!(ARGS_MADE.load(Ordering::SeqCst), issued);
        assert_eq!(ARGS_DROPPED.load(Ordering::SeqCst), issued);
        assert_eq!(RESULTS_MADE.load(Ordering::SeqCst), ran);
        assert_eq!(RESULTS_DROPPED.load(Ordering::SeqCst), ran);
    });
}

static RAN_AT_DROP: AtomicU64 = AtomicU64::new(u64::MAX);
static RAN_TOTAL: AtomicU64 = AtomicU64::new(0);
static PROPS_DROPPED: AtomicU64 = AtomicU64::new(0);

/// A property that records, when dropped, how many closures had run on it.
struct Watched {
    ran: u64,
}

impl Drop for Watched {
    fn drop(&mut self) {
        RAN_AT_DROP.store(self.ran, Ordering::SeqCst);
        PROPS_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn last_trust_dropped_while_requests_are_queued_keeps_the_property_until_they_ran() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let h = rt.handle();
        let ran_before_drops = on_tokio(2, 50, async move {
            let mut ran_before_drops = 0;
            for round in 0..50u64 {
                let t = h.trustee((round % 2) as usize).entrust(Watched { ran: 0 });
                // Requests in flight, their futures and then the only trust
                // dropped at once: the trustee must run them first.
                let futs: Vec<_> = (0..100)
                    .map(|_| {
                        t.apply_async(|w| {
                            w.ran += 1;
                            RAN_TOTAL.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect();
                if round % 2 == 0 {
                    drop(futs);
                    drop(t);
                } else {
                    // Or keep the futures: they complete with the trust gone.
                    drop(t);
                    for f in futs {
                        f.await;
                    }
                }
                let start = std::time::Instant::now();
                while PROPS_DROPPED.load(Ordering::SeqCst) <= round {
                    assert!(start.elapsed() < Duration::from_secs(10), "property {round} never dropped");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let ran = RAN_AT_DROP.load(Ordering::SeqCst);
                assert!(ran <= 100, "round {round}: {ran}");
                if round % 2 == 1 {
                    assert_eq!(ran, 100, "round {round}: awaited requests ran before the drop");
                }
                ran_before_drops += ran;
            }
            ran_before_drops
        });
        assert_eq!(PROPS_DROPPED.load(Ordering::SeqCst), 50);
        assert!(rt.shutdown().clean);
        // No closure ran on a dropped property: each ran before its drop.
        assert_eq!(RAN_TOTAL.load(Ordering::SeqCst), ran_before_drops);
    });
}

#[test]
fn last_trust_dropped_on_a_worker_while_requests_are_queued_from_outside() {
    within(60, || {
        static DROPPED: AtomicU64 = AtomicU64::new(0);
        static RAN: AtomicU64 = AtomicU64::new(0);
        static RAN_AT_DROPS: AtomicU64 = AtomicU64::new(0);
        struct Prop(u64);
        impl Drop for Prop {
            fn drop(&mut self) {
                RAN_AT_DROPS.fetch_add(self.0, Ordering::SeqCst);
                DROPPED.fetch_add(1, Ordering::SeqCst);
            }
        }
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let h = rt.handle();
        const ROUNDS: u64 = 200;
        on_tokio(2, 50, async move {
            static STARTED: AtomicU64 = AtomicU64::new(0);
            for round in 0..ROUNDS {
                let t = h.trustee(1).entrust(Prop(0));
                // Keep the trustee busy in one closure while the other
                // requests queue up and the toggle arrives.
                let slow = t.apply_async(move |p| {
                    p.0 += 1;
                    RAN.fetch_add(1, Ordering::SeqCst);
                    STARTED.store(round + 1, Ordering::SeqCst);
                    let t0 = std::time::Instant::now();
                    while t0.elapsed() < Duration::from_millis(2) {
                        std::hint::spin_loop();
                    }
                });
                while STARTED.load(Ordering::SeqCst) != round + 1 {
                    tokio::task::yield_now().await;
                }
                let futs: Vec<_> = (0..50)
                    .map(|_| {
                        t.apply_async(|p| {
                            p.0 += 1;
                            RAN.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect();
                // The last trust goes on worker 0: its toggle travels
                // through the slots and may reach the trustee before the
                // queued requests do.
                let j = h.spawn_on(0, move || drop(t));
                if round % 2 == 0 {
                    drop(futs);
                } else {
                    for f in futs {
                        f.await;
                    }
                }
                j.await.unwrap();
                slow.await;
            }
        });
        assert!(rt.shutdown().clean);
        assert_eq!(DROPPED.load(Ordering::SeqCst), ROUNDS);
        assert_eq!(RAN.load(Ordering::SeqCst), RAN_AT_DROPS.load(Ordering::SeqCst));
    });
}

// ----- fibers and plain threads ---------------------------------------------

#[test]
fn awaiting_inside_fibers() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let remote = rt.trustee(1).entrust(0u64);
        // A future made outside the runtime, awaited in a fiber.
        let outside = remote.apply_async(|v| {
            *v += 100;
            *v
        });
        let r2 = remote.clone();
        let got = rt.block_on(move || {
            let first = gossamer::block_on(outside);
            let local = gossamer::local_trustee().entrust(1u64);
            // Local trustee (runs at once), remote trustee, with argument.
            let a = local.apply_async(|v| {
                *v += 1;
                *v
            });
            let b = r2.apply_with_async(
                |v, s: String| {
                    *v += s.len() as u64;
                    *v
                },
                "four".to_string(),
            );
            let c = r2.apply_async(|v| *v);
            // Many fibers awaiting at once, on both workers.
            let fibers: Vec<_> = (0..64)
                .map(|i| {
                    let r = r2.clone();
                    gossamer::spawn_on(i % 2, move || {
                        for _ in 0..10 {
                            gossamer::block_on(r.apply_async(|v| *v += 1));
                        }
                    })
                })
                .collect();
            for f in fibers {
                f.join().unwrap();
            }
            // A panic resumes in the fiber.
            let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                gossamer::block_on(r2.apply_async(|_| -> u64 { panic!("deliberate") }))
            }));
            assert!(p.is_err());
            (first, gossamer::block_on(a), gossamer::block_on(b), gossamer::block_on(c), r2.apply(|v| *v))
        });
        assert_eq!(got, (100, 2, 104, 104, 104 + 640));
        // And a fiber's result awaited from a plain thread.
        assert_eq!(gossamer::block_on(rt.handle().spawn(|| 7).into_future()).unwrap(), 7);
        assert_eq!(rt.stats().unhandled_panics, 0);
    });
}

#[test]
fn a_fiber_of_one_runtime_awaits_a_trust_of_another() {
    within(60, || {
        let a = gossamer::Runtime::builder().workers(2).build().unwrap();
        let b = gossamer::Runtime::builder().workers(2).build().unwrap();
        let counter = b.entrust(0u64);
        let c = counter.clone();
        let n = a.block_on(move || {
            let fs: Vec<_> = (0..100).map(|_| c.apply_async(|v| *v += 1)).collect();
            for f in fs {
                gossamer::block_on(f);
            }
            gossamer::block_on(c.apply_async(|v| *v))
        });
        assert_eq!(n, 100);
        assert!(b.shutdown().clean);
        assert!(a.shutdown().clean);
    });
}

#[test]
fn apply_async_in_delegated_context_does_not_block() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let a = rt.trustee(0).entrust(0u64);
        let b = rt.trustee(1).entrust(0u64);
        let (a2, b2) = (a.clone(), b.clone());
        rt.block_on(move || {
            // Inside a then-callback nothing may block, but a future may be
            // issued and handed on.
            let (tx, rx) = std::sync::mpsc::channel();
            a2.apply_then(
                |v| *v + 1,
                move |n| {
                    let f = b2.apply_async(move |v| {
                        *v += n;
                        *v
                    });
                    tx.send(f).unwrap();
                },
            );
            let f = loop {
                if let Ok(f) = rx.try_recv() {
                    break f;
                }
                gossamer::yield_now();
            };
            assert_eq!(gossamer::block_on(f), 1);
        });
        assert_eq!(gossamer::block_on(b.apply_async(|v| *v)), 1);
    });
}

#[test]
fn tokio_tasks_await_fibers() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let h = rt.handle();
        let sum = on_tokio(2, 50, async move {
            let hs: Vec<_> = (0..100u64)
                .map(|i| {
                    let h = h.clone();
                    tokio::spawn(async move {
                        let counter = h.entrust(i);
                        let c = counter.clone();
                        // A fiber may block in `apply`; the task awaits it.
                        h.spawn(move || c.apply(|v| *v * 2)).await.unwrap()
                    })
                })
                .collect();
            let mut s = 0;
            for t in hs {
                s += t.await.unwrap();
            }
            s
        });
        assert_eq!(sum, 2 * (0..100).sum::<u64>());
    });
}

// ----- shutdown ---------------------------------------------------------------

#[test]
fn shutdown_answers_or_refuses_every_outstanding_future() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let c = rt.entrust(0u64);
        let futs: Vec<_> = (0..10_000).map(|_| c.apply_async(|v| *v += 1)).collect();
        let report = rt.shutdown();
        assert!(report.clean, "{report:?}");
        // Queued before shutdown: answered during the quiescence wait.
        let mut answered = 0;
        for f in futs {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gossamer::block_on(f))).is_ok() {
                answered += 1;
            }
        }
        assert_eq!(answered, 10_000);
        // After shutdown the call itself refuses.
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.apply_async(|v| *v))).unwrap_err();
        let msg = e.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| e.downcast_ref::<String>().cloned());
        assert!(msg.unwrap().contains("shut down"));
    });
}

#[test]
fn futures_racing_shutdown_resolve_or_panic_but_never_hang() {
    within(60, || {
        let rt = gossamer::Runtime::builder().workers(2).shutdown_timeout(Duration::from_millis(500)).build().unwrap();
        let c = rt.entrust(0u64);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c2, s2) = (c.clone(), stop.clone());
        let issuer = std::thread::spawn(move || {
            let mut futs = Vec::new();
            // Issue until the runtime is gone (the call then panics).
            while !s2.load(Ordering::SeqCst) {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c2.apply_async(|v| *v += 1))) {
                    Ok(f) => futs.push(f),
                    Err(_) => break,
                }
            }
            let (mut ok, mut refused) = (0u64, 0u64);
            for f in futs {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gossamer::block_on(f))) {
                    Ok(()) => ok += 1,
                    Err(_) => refused += 1,
                }
            }
            (ok, refused)
        });
        std::thread::sleep(Duration::from_millis(50));
        rt.shutdown();
        stop.store(true, Ordering::SeqCst);
        let (ok, _refused) = issuer.join().unwrap();
        assert!(ok > 0);
    });
}

// ----- the example service ----------------------------------------------------

#[allow(dead_code)]
#[path = "../examples/tokio_service.rs"]
mod tokio_service;

#[test]
fn tokio_service_example_self_test_in_process() {
    let report = within(120, || tokio_service::self_test(2, 8, 16, 100)).expect("self-test");
    assert!(report.contains("SUM 1600"), "{report}");
}

#[test]
fn tokio_service_example_binary_self_test() {
    let Some(bin) = common::example("tokio_service") else { return };
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--self-test", "--clients", "8", "--ops", "50"]);
    let (out, _) = common::programs::run_program(cmd, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("self-test passed: 8 clients x 50 INCRs"), "{stdout}");
}
