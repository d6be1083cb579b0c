//! Dedicated trustees changed while the runtime runs: `set_dedicated` up
//! and down under load (exact totals, every fiber finishes), placement
//! following the count, the controller's direction under a serving-heavy
//! and a fiber-heavy load, and the `gossamer top` socket's commands for the
//! count and the trustees' polling parameters. Every wait is bounded.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::top::Top;
use common::within;
use gossamer::{DedicatedPolicy, Runtime, TrusteeParams};

/// Busy-waits for `d` (a closure that costs its trustee real time).
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Polls `cond` every 5 ms for up to `secs` seconds.
fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

#[test]
fn placement_follows_the_count_and_properties_stay() {
    within(60, || {
        let rt = Runtime::builder().workers(3).build().unwrap();
        let before: Vec<_> = (0..6u64).map(|i| rt.entrust(i)).collect();
        let homes: Vec<usize> = before.iter().map(|t| t.trustee().index()).collect();
        assert_eq!(homes.iter().copied().collect::<BTreeSet<_>>(), BTreeSet::from([0, 1, 2]));

        rt.set_dedicated(2).unwrap();
        assert_eq!((rt.dedicated(), rt.dedicated_policy()), (2, DedicatedPolicy::Fixed(2)));
        let ran: BTreeSet<usize> =
            (0..12).map(|_| rt.spawn(|| gossamer::current_thread().unwrap())).map(|h| h.join().unwrap()).collect();
        assert_eq!(ran, BTreeSet::from([0]), "fibers placed on dedicated trustees");
        let placed: BTreeSet<usize> = (0..12u64).map(|i| rt.entrust(i).trustee().index()).collect();
        assert_eq!(placed, BTreeSet::from([1, 2]), "entrust placed outside the dedicated trustees");
        // From inside: the free functions, and pool-level entrust.
        let inside = rt.block_on(|| {
            let placed: BTreeSet<usize> = (0..12u64).map(|i| gossamer::entrust(i).trustee().index()).collect();
            gossamer::set_dedicated(1).unwrap();
            (placed, gossamer::dedicated())
        });
        assert_eq!(inside, (BTreeSet::from([1, 2]), 1));

        rt.set_dedicated(0).unwrap();
        let ran: BTreeSet<usize> =
            (0..12).map(|_| rt.spawn(|| gossamer::current_thread().unwrap())).map(|h| h.join().unwrap()).collect();
        assert_eq!(ran, BTreeSet::from([0, 1, 2]));
        // What was placed before every change is where it was, intact.
        for (i, (t, home)) in before.into_iter().zip(homes).enumerate() {
            assert_eq!(t.trustee().index(), home);
            assert_eq!(rt.block_on(move || t.apply(|v| *v)), i as u64);
        }
        assert!(rt.set_dedicated(3).is_err(), "no worker left for fibers");
        assert_eq!(rt.dedicated(), 0, "a refused count changes nothing");
        let h = rt.dedicated_history();
        assert_eq!(
            h.iter().map(|c| (c.from, c.to, c.auto)).collect::<Vec<_>>(),
            [(0, 2, false), (2, 1, false), (1, 0, false)]
        );
        assert!(rt.shutdown().clean);
    });
}

#[test]
fn set_dedicated_up_and_down_while_fibers_and_requests_run() {
    within(120, || {
        const WAVES: usize = 30;
        const FIBERS: usize = 8;
        const OPS: u64 = 200;
        let rt = Runtime::builder().workers(3).build().unwrap();
        let counters: Arc<Vec<_>> = Arc::new((0..3).map(|i| rt.trustee(i).entrust(0u64)).collect());
        let changing = Arc::new(AtomicBool::new(true));
        let handle = rt.handle();
        let (flag, h2) = (changing.clone(), handle.clone());
        let changer = std::thread::spawn(move || {
            let mut changes = 0u64;
            for k in [1usize, 2, 1, 0, 2, 0].into_iter().cycle() {
                if !flag.load(Ordering::Relaxed) {
                    break;
                }
                h2.set_dedicated(k).unwrap();
                changes += 1;
                std::thread::sleep(Duration::from_micros(300));
            }
            changes
        });
        let mut total_fibers = 0;
        for wave in 0..WAVES {
            let hs: Vec<_> = (0..FIBERS)
                .map(|f| {
                    let c = counters.clone();
                    handle.spawn(move || {
                        // Each fiber also starts one on its own thread, which
                        // delegates with apply_then.
                        let c2 = c.clone();
                        let child = gossamer::spawn(move || {
                            let done = std::rc::Rc::new(std::cell::Cell::new(0u64));
                            for i in 0..OPS {
                                let d = done.clone();
                                c2[(i as usize + f) % 3].apply_then(|v| *v += 1, move |()| d.set(d.get() + 1));
                            }
                            while done.get() < OPS {
                                gossamer::yield_now();
                            }
                            done.get()
                        });
                        for i in 0..OPS {
                            c[(i as usize + f + wave) % 3].apply(|v| *v += 1);
                        }
                        child.join().unwrap() + OPS
                    })
                })
                .collect();
            total_fibers += hs.len();
            let sum: u64 = hs.into_iter().map(|h| h.join().expect("a fiber was lost or failed")).sum();
            assert_eq!(sum, FIBERS as u64 * OPS * 2);
        }
        changing.store(false, Ordering::Relaxed);
        let changes = changer.join().unwrap();
        assert!(changes > 1, "the count never changed under load");
        let c = counters.clone();
        let total: u64 = rt.block_on(move || c.iter().map(|t| t.apply(|v| *v)).sum());
        assert_eq!(total, (total_fibers as u64) * OPS * 2);
        assert_eq!(rt.stats().unhandled_panics, 0);
        drop(counters);
        assert!(rt.shutdown().clean, "shutdown found fibers or requests left");
    });
}

#[test]
fn fibers_on_a_worker_that_becomes_dedicated_still_finish() {
    within(60, || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let on_one = rt.trustee(1).entrust(0u64);
        let on_zero = rt.trustee(0).entrust(0u64);
        // Fibers on worker 1 keep delegating to worker 0 and using their own
        // property while worker 1 turns into a dedicated trustee and back.
        let hs: Vec<_> = (0..16)
            .map(|_| {
                let (a, b) = (on_zero.clone(), on_one.clone());
                rt.spawn_on(1, move || {
                    for _ in 0..500 {
                        a.apply(|v| *v += 1);
                        b.apply(|v| *v += 1);
                    }
                })
            })
            .collect();
        rt.set_dedicated(1).unwrap();
        // Requests keep arriving at the dedicated trustee meanwhile.
        let b = on_one.clone();
        let client = rt.spawn_on(0, move || {
            for _ in 0..2000 {
                b.apply(|v| *v += 1);
            }
        });
        for h in hs {
            h.join().unwrap();
        }
        client.join().unwrap();
        rt.set_dedicated(0).unwrap();
        let (a, b) = (on_zero.clone(), on_one.clone());
        assert_eq!(rt.block_on(move || (a.apply(|v| *v), b.apply(|v| *v))), (16 * 500, 16 * 500 + 2000));
    });
}

#[test]
fn the_controller_dedicates_a_trustee_under_a_serving_heavy_load() {
    within(90, || {
        let rt = Runtime::builder()
            .workers(2)
            .dedicated_trustees_auto()
            .dedicated_window(Duration::from_millis(10))
            .build()
            .unwrap();
        assert_eq!((rt.dedicated(), rt.dedicated_policy()), (0, DedicatedPolicy::Auto));
        let hot = rt.trustee(1).entrust(0u64);
        let stop = Arc::new(AtomicBool::new(false));
        // Clients on worker 0 keep worker 1 busy serving closures that
        // cost 20 µs each.
        let hs: Vec<_> = (0..32)
            .map(|_| {
                let (h, s) = (hot.clone(), stop.clone());
                rt.spawn_on(0, move || {
                    while !s.load(Ordering::Relaxed) {
                        h.apply(|v| {
                            spin(Duration::from_micros(20));
                            *v += 1
                        });
                    }
                })
            })
            .collect();
        let reached = eventually(60, || rt.dedicated() == 1);
        stop.store(true, Ordering::Relaxed);
        for h in hs {
            h.join().unwrap();
        }
        assert!(reached, "the controller never dedicated a trustee; history {:?}", rt.dedicated_history());
        assert!(rt.dedicated_history().iter().any(|c| c.auto && c.from == 0 && c.to == 1));
    });
}

#[test]
fn the_controller_releases_a_dedicated_trustee_under_a_fiber_heavy_load() {
    within(90, || {
        let rt = Runtime::builder()
            .workers(2)
            .dedicated_trustees(1)
            .dedicated_trustees_auto()
            .dedicated_window(Duration::from_millis(10))
            .build()
            .unwrap();
        assert_eq!(rt.dedicated(), 1);
        let stop = Arc::new(AtomicBool::new(false));
        // Fibers that compute and never delegate.
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let s = stop.clone();
                rt.spawn(move || {
                    let mut x = 0u64;
                    while !s.load(Ordering::Relaxed) {
                        for i in 0..1000u64 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                        }
                        gossamer::yield_now();
                    }
                    x
                })
            })
            .collect();
        let reached = eventually(60, || rt.dedicated() == 0);
        stop.store(true, Ordering::Relaxed);
        for h in hs {
            h.join().unwrap();
        }
        assert!(reached, "the controller kept an idle dedicated trustee; history {:?}", rt.dedicated_history());
        // A fixed count switches the controller off.
        rt.set_dedicated(1).unwrap();
        assert_eq!(rt.dedicated_policy(), DedicatedPolicy::Fixed(1));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(rt.dedicated(), 1, "the controller moved a fixed count");
    });
}

#[test]
fn trustee_params_are_live_and_checked() {
    within(60, || {
        let rt = Runtime::builder().workers(2).idle_spin(Duration::from_micros(30)).build().unwrap();
        assert_eq!(rt.trustee_params(0).unwrap().idle_spin, Duration::from_micros(30));
        let p = TrusteeParams {
            tight_polls: 0,
            idle_spin: Duration::ZERO,
            sleep_poll: Duration::from_micros(100),
            fiber_yield: 1,
        };
        rt.set_trustee_params(None, p).unwrap();
        assert_eq!((rt.trustee_params(0).unwrap(), rt.trustee(1).params().unwrap()), (p, p));
        // Workers that sleep at once and wake every 100 µs still serve.
        let c = rt.trustee(1).entrust(0u64);
        let c2 = c.clone();
        rt.block_on(move || (0..1000).for_each(|_| c2.apply(|v| *v += 1)));
        assert_eq!(rt.block_on(move || c.apply(|v| *v)), 1000);
        let bad = TrusteeParams { fiber_yield: 0, ..p };
        assert!(matches!(rt.set_trustee_params(Some(1), bad), Err(gossamer::Error::BadTrusteeParam { .. })));
        assert!(matches!(rt.set_trustee_params(Some(5), p), Err(gossamer::Error::NoSuchTrustee { .. })));
        assert_eq!(rt.trustee_params(1).unwrap(), p, "a refused change changed something");
        let t = rt.trustee(1);
        drop(rt);
        assert!(matches!(t.params(), Err(gossamer::Error::ShutDown)));
    });
}

#[test]
fn the_top_socket_sets_the_count_and_parameters_and_refuses_malformed_input() {
    within(60, || {
        let rt = Runtime::builder().workers(2).top_socket(true).build().unwrap();
        let mut top = Top::connect(&rt);
        let s = top.ask(b"settings", true);
        assert!(s.starts_with("dedicated 0 fixed 2\nparams 0 tight_polls=128 idle_spin_us=100 "), "{s}");
        assert!(s.ends_with("fiber_yield=64\nend\n"), "{s}");

        assert_eq!(top.ask(b"dedicated 1", false), "ok\n");
        assert_eq!(rt.dedicated(), 1);
        assert_eq!(top.ask(b"set 1 idle_spin_us=7 tight_polls=3", false), "ok\n");
        let p = rt.trustee_params(1).unwrap();
        assert_eq!((p.idle_spin, p.tight_polls), (Duration::from_micros(7), 3));
        assert_eq!(rt.trustee_params(0).unwrap(), TrusteeParams::default(), "set 1 changed trustee 0");
        assert_eq!(top.ask(b"set all sleep_poll_us=2000", false), "ok\n");
        assert_eq!(rt.trustee_params(0).unwrap().sleep_poll, Duration::from_millis(2));
        assert!(top.ask(b"settings", true).contains("params 1 tight_polls=3 idle_spin_us=7 sleep_poll_us=2000 "));

        // Refused, and nothing changes.
        for bad in [
            &b"dedicated 2"[..],
            b"dedicated -1",
            b"dedicated 99999999999999999999999999",
            b"set all fiber_yield=0",
            b"set all tight_polls=5 sleep_poll_us=0",
            b"set 9 tight_polls=1",
            b"set 1 tight_polls",
            b"set 1 bogus=1",
            b"launch missiles",
        ] {
            let a = top.ask(bad, false);
            assert!(a.starts_with("error "), "{:?} answered {a:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(rt.dedicated(), 1);
        assert_eq!(rt.trustee_params(0).unwrap().tight_polls, 128, "a refused set changed trustee 0");

        assert_eq!(top.ask(b"dedicated auto", false), "ok\n");
        assert_eq!(rt.dedicated_policy(), DedicatedPolicy::Auto);
        assert!(top.ask(b"settings", true).contains(" auto 2\n"));
        assert_eq!(top.ask(b"dedicated 0", false), "ok\n");
        assert_eq!(rt.dedicated_policy(), DedicatedPolicy::Fixed(0));

        // An endless line: refused, and the connection ends.
        let long = vec![b'x'; 64 * 1024];
        let _ = top.writer.write_all(&long);
        let mut rest = String::new();
        let _ = top.reader.read_to_string(&mut rest);
        assert!(rest.starts_with("error command longer than"), "{rest:?}");
        // Bytes that are not text end the connection too; the socket lives on.
        let mut top = Top::connect(&rt);
        let _ = top.writer.write_all(b"set \xff\xfe all\n");
        let mut rest = String::new();
        let _ = top.reader.read_to_string(&mut rest);
        assert!(rest.is_empty() || rest.starts_with("error "), "{rest:?}");
        let mut top = Top::connect(&rt);
        assert!(top.ask(b"settings", true).starts_with("dedicated 0 fixed 2\n"));
    });
}
