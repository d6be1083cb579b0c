//! `Adaptive<T>`: exact totals, per-client order and exactly-once drop while
//! the property switches between running closures in place under its lock
//! and delegating them to its trustee, forced by `set_policy` and by the
//! contention measurement itself.

mod common;
use common::{rt, within};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use gossamer::{Adaptive, Mode, Policy, Thresholds};

/// Flips the policy of `a` through every policy until `stop` is set;
/// returns the number of flips.
fn flipper(a: Adaptive<impl Send + 'static>, stop: Arc<AtomicBool>) -> impl FnOnce() -> u64 + Send + 'static {
    move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let p = [Policy::Delegate, Policy::Lock, Policy::Adaptive, Policy::Lock][(n % 4) as usize];
            a.set_policy(p);
            n += 1;
            gossamer::yield_now();
        }
        n
    }
}

/// An increment with a window between its read and its write, so that two
/// closures running at once on one value would lose an update.
fn bump(n: &mut u64) {
    let v = *n;
    for _ in 0..200 {
        std::hint::spin_loop();
    }
    *n = std::hint::black_box(v) + 1;
}

/// Thresholds under which every lock window counts as contended: the
/// property leaves lock mode after each window and tries it again after a
/// short delegate window, switching all the time through its own
/// measurement.
fn always_switching() -> Thresholds {
    Thresholds { contended_percent: 0, lock_window: 8, delegate_window_min: 16, delegate_window_max: 16 }
}

#[test]
fn totals_are_exact_while_set_policy_flips_the_mode() {
    within(120, || {
        let rt = rt(3);
        let counter = rt.trustee(2).entrust_adaptive(0u64);
        let stop = Arc::new(AtomicBool::new(false));
        let flips = rt.spawn_on(2, flipper(counter.clone(), stop.clone()));
        let clients: Vec<_> = (0..9u64)
            .map(|f| {
                let c = counter.clone();
                rt.spawn_on((f % 3) as usize, move || {
                    for i in 0..2000u64 {
                        match i % 3 {
                            0 => c.apply(bump),
                            1 => c.apply_then(bump, |()| {}),
                            _ => drop(c.apply_async(bump)),
                        }
                        if i % 64 == 0 {
                            gossamer::yield_now();
                        }
                    }
                    c.apply(|_| ());
                })
            })
            .collect();
        for h in clients {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        assert!(flips.join().unwrap() > 0);
        let c = counter.clone();
        assert_eq!(rt.block_on(move || c.apply(|n| *n)), 9 * 2000);
    });
}

#[test]
fn totals_are_exact_while_contention_switches_the_mode() {
    within(120, || {
        let rt = rt(2);
        let counter = rt.trustee(1).entrust_adaptive(0u64);
        counter.set_thresholds(always_switching());
        let saw_delegate = Arc::new(AtomicBool::new(false));
        let saw_lock = Arc::new(AtomicBool::new(false));
        let clients: Vec<_> = (0..6u64)
            .map(|f| {
                let (c, d, l) = (counter.clone(), saw_delegate.clone(), saw_lock.clone());
                rt.spawn_on((f % 2) as usize, move || {
                    for i in 0..3000u64 {
                        match c.mode() {
                            Mode::Delegate => d.store(true, Ordering::Relaxed),
                            Mode::Lock => l.store(true, Ordering::Relaxed),
                        }
                        if i % 2 == 0 {
                            c.apply(bump);
                        } else {
                            c.apply_then(bump, |()| {});
                        }
                    }
                    c.apply(|_| ());
                })
            })
            .collect();
        for h in clients {
            h.join().unwrap();
        }
        assert!(saw_delegate.load(Ordering::Relaxed), "the measurement never switched to delegation");
        assert!(saw_lock.load(Ordering::Relaxed), "the property never ran in lock mode");
        let c = counter.clone();
        assert_eq!(rt.block_on(move || c.apply(|n| *n)), 6 * 3000);
    });
}

/// Each client appends its own sequence numbers; every client's entries
/// must appear in increasing order, all of them, once.
fn check_log(entries: &[(u32, u32)], clients: usize, per_client: u32) {
    assert_eq!(entries.len(), clients * per_client as usize);
    let mut next = vec![0u32; clients];
    for &(f, s) in entries {
        assert_eq!(s, next[f as usize], "client {f}: request {s} took effect out of order");
        next[f as usize] += 1;
    }
}

#[test]
fn each_client_sees_its_order_across_mode_switches() {
    within(120, || {
        let rt = rt(3);
        let log = rt.trustee(2).entrust_adaptive(Vec::<(u32, u32)>::new());
        let stop = Arc::new(AtomicBool::new(false));
        let flips = rt.spawn_on(0, flipper(log.clone(), stop.clone()));
        const PER: u32 = 1500;
        let clients: Vec<_> = (0..8u32)
            .map(|f| {
                let l = log.clone();
                rt.spawn_on((f % 3) as usize, move || {
                    for s in 0..PER {
                        if s % 4 == 0 {
                            l.apply(move |v| v.push((f, s)));
                        } else {
                            l.apply_then(move |v| v.push((f, s)), |()| {});
                        }
                        if s % 29 == 0 {
                            gossamer::yield_now();
                        }
                    }
                    l.apply(|_| ());
                })
            })
            .collect();
        for h in clients {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        flips.join().unwrap();
        let l = log.clone();
        let entries = rt.block_on(move || l.apply(|v| v.clone()));
        check_log(&entries, 8, PER);
    });
}

#[test]
fn each_client_sees_its_order_while_contention_switches_the_mode() {
    within(120, || {
        let rt = rt(2);
        let log = rt.trustee(0).entrust_adaptive(Vec::<(u32, u32)>::new());
        log.set_thresholds(always_switching());
        const PER: u32 = 2000;
        let clients: Vec<_> = (0..6u32)
            .map(|f| {
                let l = log.clone();
                rt.spawn_on((f % 2) as usize, move || {
                    for s in 0..PER {
                        if s % 5 == 0 {
                            l.apply(move |v| v.push((f, s)));
                        } else {
                            l.apply_then(move |v| v.push((f, s)), |()| {});
                        }
                    }
                    l.apply(|_| ());
                })
            })
            .collect();
        for h in clients {
            h.join().unwrap();
        }
        let l = log.clone();
        let entries = rt.block_on(move || l.apply(|v| v.clone()));
        check_log(&entries, 6, PER);
    });
}

#[test]
fn requests_delegated_before_a_switch_take_effect_before_those_in_place_after_it() {
    within(60, || {
        let rt = rt(2);
        rt.block_on(|| {
            let log = gossamer::trustee(1).entrust_adaptive(Vec::<u32>::new());
            for round in 0..50u32 {
                log.set_policy(Policy::Delegate);
                for s in 0..20 {
                    log.apply_then(move |v| v.push(round * 100 + s), |()| {});
                }
                // The next requests may run in place: they must wait for
                // the delegated ones still in flight.
                log.set_policy(Policy::Lock);
                log.apply(move |v| v.push(round * 100 + 20));
                log.apply_then(move |v| v.push(round * 100 + 21), |()| {});
            }
            let v = log.apply(|v| v.clone());
            let want: Vec<u32> = (0..50u32).flat_map(|r| (0..22).map(move |s| r * 100 + s)).collect();
            assert_eq!(v, want);
        });
    });
}

static DROPS: AtomicUsize = AtomicUsize::new(0);

struct Counted(u64);

impl Drop for Counted {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn each_value_is_dropped_exactly_once_after_its_last_handle() {
    within(120, || {
        let rt = rt(3);
        const PROPS: usize = 40;
        let props: Vec<_> = (0..PROPS).map(|i| rt.trustee(i % 3).entrust_adaptive(Counted(0))).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flips: Vec<_> = props.iter().step_by(4).map(|p| rt.spawn_on(1, flipper(p.clone(), stop.clone()))).collect();
        let clients: Vec<_> = (0..6usize)
            .map(|f| {
                let mine: Vec<_> = props.to_vec();
                rt.spawn_on(f % 3, move || {
                    for i in 0..3000usize {
                        let p = &mine[(i * 7 + f) % PROPS];
                        if i % 2 == 0 {
                            p.apply(|c| c.0 += 1);
                        } else {
                            // A clone made and dropped on a client thread.
                            let q = p.clone();
                            q.apply_then(|c| c.0 += 1, |()| {});
                        }
                    }
                    // Every request of this client is in once this waits.
                    for p in &mine {
                        p.apply(|_| ());
                    }
                })
            })
            .collect();
        for h in clients {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for h in flips {
            h.join().unwrap();
        }
        let all: Vec<_> = props.to_vec();
        let total: u64 = rt.block_on(move || all.iter().map(|p| p.apply(|c| c.0)).sum());
        assert_eq!(total, 6 * 3000, "every increment took effect once");
        assert_eq!(DROPS.load(Ordering::SeqCst), 0, "a value was dropped while handles remained");
        drop(props);
        // Dropped on its trustee, asynchronously: wait (bounded by `within`).
        while DROPS.load(Ordering::SeqCst) < PROPS {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        drop(rt);
        assert_eq!(DROPS.load(Ordering::SeqCst), PROPS, "each value dropped exactly once");
    });
}

#[test]
fn a_panic_in_place_reaches_the_caller_and_releases_the_lock() {
    within(60, || {
        let rt = rt(2);
        rt.block_on(|| {
            let c = gossamer::trustee(1).entrust_adaptive(5u64);
            c.set_policy(Policy::Lock);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.apply(|_| -> u64 { panic!("boom") })));
            assert!(r.is_err());
            let seen = std::rc::Rc::new(std::cell::Cell::new(None));
            let s = seen.clone();
            c.try_apply_then(|_| -> u64 { panic!("again") }, move |r| s.set(Some(r.is_err())));
            assert_eq!(seen.get(), Some(true));
            c.set_policy(Policy::Delegate);
            assert_eq!(c.apply(|v| *v + 1), 6);
            c.set_policy(Policy::Lock);
            assert_eq!(c.apply(|v| *v + 2), 7);
        });
    });
}

#[test]
fn futures_and_outside_threads_reach_the_property_in_every_mode() {
    within(60, || {
        let rt = rt(2);
        let c = rt.trustee(1).entrust_adaptive(0u64);
        for p in [Policy::Lock, Policy::Delegate, Policy::Adaptive] {
            c.set_policy(p);
            // From a plain thread: always delegated.
            gossamer::block_on(c.apply_async(|v| *v += 1));
            let c2 = c.clone();
            rt.block_on(move || {
                gossamer::block_on(c2.apply_async(|v| *v += 1));
                c2.apply(|v| *v += 1);
            });
        }
        assert_eq!(gossamer::block_on(c.apply_async(|v| *v)), 9);
    });
}

#[test]
fn the_profile_shows_each_adaptive_trusts_mode() {
    within(60, || {
        let rt = rt(2);
        let a = rt.trustee(1).entrust_adaptive(0u64);
        let plain = rt.trustee(1).entrust(0u64);
        rt.profile(gossamer::profile::Target::All);
        a.set_policy(Policy::Delegate);
        let (a2, p2) = (a.clone(), plain.clone());
        rt.block_on(move || {
            a2.apply(|v| *v += 1);
            p2.apply(|v| *v += 1);
        });
        let p = rt.profile_snapshot();
        assert_eq!(p.trust(a.profile_id()).expect("profiled").mode, Some("delegate"), "{p}");
        assert_eq!(p.trust(plain.profile_id()).expect("profiled").mode, None, "{p}");
        assert!(p.to_string().contains("delegate"), "{p}");
        a.set_policy(Policy::Lock);
        let p = rt.profile_snapshot();
        assert_eq!(p.trust(a.profile_id()).expect("profiled").mode, Some("lock"), "{p}");
    });
}

/// A thread that found a trustee falling behind runs its calls to that
/// trustee's other adaptive properties in place while it is still stalled,
/// even those whose mode says delegate.
#[test]
fn a_thread_that_found_its_trustee_stalled_runs_its_other_properties_in_place() {
    use std::time::{Duration, Instant};
    within(60, || {
        let rt = rt(2);
        rt.block_on(|| {
            let a = gossamer::trustee(1).entrust_adaptive(0u64);
            let b = gossamer::trustee(1).entrust_adaptive(0u64);
            for p in [&a, &b] {
                // Delegate mode under the adaptive policy, windows too long
                // to close during the test.
                p.set_thresholds(Thresholds {
                    delegate_window_min: 1 << 30,
                    delegate_window_max: 1 << 30,
                    ..p.thresholds()
                });
                p.set_policy(Policy::Delegate);
                p.set_policy(Policy::Adaptive);
                assert_eq!(p.mode(), Mode::Delegate);
            }
            let stalls = Arc::new(AtomicUsize::new(0));
            let s = stalls.clone();
            // The trustee's thread stalls twice (a worker preempted for
            // long), serving in between.
            let staller = gossamer::spawn_on(1, move || {
                for _ in 0..2 {
                    s.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(300));
                    s.fetch_add(1, Ordering::SeqCst);
                    gossamer::yield_now();
                }
            });
            let wait_for = |n: usize| {
                let deadline = Instant::now() + Duration::from_secs(20);
                while stalls.load(Ordering::SeqCst) < n {
                    assert!(Instant::now() < deadline, "the trustee's thread did not stall");
                    gossamer::yield_now();
                }
            };
            // The first call waits out the first stall: the trustee is
            // found slow.
            wait_for(1);
            a.apply(|v| *v += 1);
            // During the second stall, a call to the other property runs
            // in place at once.
            wait_for(3);
            b.apply(|v| *v += 1);
            assert_eq!(
                stalls.load(Ordering::SeqCst),
                3,
                "the call to the other property waited for the stalled trustee"
            );
            staller.join().unwrap();
            assert_eq!(a.apply(|v| *v) + b.apply(|v| *v), 2);
        });
    });
}
