//! `Adaptive<T>` and the locks a trustee keeps through the batch it serves:
//! a run of delegated requests to one property takes its lock once, and
//! the lock stays held until the batch ends. Totals stay exact with more
//! properties than the trustee keeps and with callers in place beside it,
//! a closure may still change another property of its trustee (whose lock
//! the trustee keeps), and a closure that changes its own property panics
//! instead of waiting forever for the lock its own call holds.

mod common;
use common::{rt, within};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use gossamer::{Adaptive, Policy};

/// An increment with a window between its read and its write, so that two
/// closures running at once on one value would lose an update.
fn bump(n: &mut u64) {
    let v = *n;
    for _ in 0..50 {
        std::hint::spin_loop();
    }
    *n = std::hint::black_box(v) + 1;
}

/// More properties than a trustee keeps the locks of (8), all on one
/// trustee. Two clients send runs of requests to the same property in
/// their batches; a third thread flips some properties to lock mode and
/// back, so that callers run in place beside the kept locks.
#[test]
fn totals_are_exact_with_runs_of_requests_and_callers_in_place() {
    within(120, || {
        let rt = rt(3);
        const PROPS: usize = 19;
        let props: Vec<Adaptive<u64>> = (0..PROPS).map(|_| rt.trustee(2).entrust_adaptive(0u64)).collect();
        for p in &props {
            p.set_policy(Policy::Delegate);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flips = {
            let (mine, stop) = (props.clone(), stop.clone());
            rt.spawn_on(2, move || {
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let p = &mine[(n * 5) % PROPS];
                    p.set_policy(if n % 2 == 0 { Policy::Lock } else { Policy::Delegate });
                    n += 1;
                    gossamer::yield_now();
                }
                n
            })
        };
        const ROUNDS: usize = 2000;
        let clients: Vec<_> = (0..4usize)
            .map(|f| {
                let mine = props.clone();
                rt.spawn_on(f % 2, move || {
                    for r in 0..ROUNDS {
                        // A run of 3 to one property, then one to each of
                        // the others in turn.
                        let p = &mine[(r * 3 + f) % PROPS];
                        for _ in 0..3 {
                            p.apply_then(bump, |()| {});
                        }
                        for q in 1..PROPS {
                            mine[(r + q) % PROPS].apply_then(bump, |()| {});
                        }
                        if r % 4 == 0 {
                            p.apply(bump);
                        } else {
                            gossamer::yield_now();
                        }
                    }
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
        assert!(flips.join().unwrap() > 0);
        let all = props.clone();
        let total: u64 = rt.block_on(move || all.iter().map(|p| p.apply(|n| *n)).sum());
        let per_round = 3 + (PROPS - 1) as u64;
        let waits = ROUNDS.div_ceil(4) as u64;
        assert_eq!(total, 4 * (ROUNDS as u64 * per_round + waits), "every increment took effect once");
    });
}

/// Sets the policy of the property whose handle it is given.
fn lock_it(_: &mut u64, other: Adaptive<u64>) {
    other.set_policy(Policy::Lock);
}

/// One client's batch: requests to `b`, a request to `a` whose closure
/// sets `b`'s policy, and more requests to `b`. The trustee keeps `b`'s
/// lock when the closure on `a` runs; it hands the lock over instead of
/// waiting for itself.
#[test]
fn a_closure_changes_another_property_whose_lock_its_trustee_keeps() {
    within(60, || {
        let rt = rt(2);
        rt.block_on(|| {
            let a = gossamer::trustee(1).entrust_adaptive(0u64);
            let b = gossamer::trustee(1).entrust_adaptive(0u64);
            a.set_policy(Policy::Delegate);
            b.set_policy(Policy::Delegate);
            for round in 0..50u64 {
                for _ in 0..3 {
                    b.apply_then(bump, |()| {});
                }
                a.apply_with_then(lock_it, b.clone(), |()| {});
                b.apply_then(bump, |()| {});
                a.apply_then(|n| *n += 1, |()| {});
                assert_eq!(b.apply(|n| *n), 4 * (round + 1));
                assert_eq!(b.policy(), Policy::Lock, "the closure on a set b's policy");
                b.set_policy(Policy::Delegate);
            }
            assert_eq!(a.apply(|n| *n), 50);
        });
    });
}

/// Sets the policy of the very property it runs on.
fn lock_myself(_: &mut u64, me: Adaptive<u64>) {
    me.set_policy(Policy::Lock);
}

/// A closure served by the trustee that sets its own property's policy
/// would wait forever for the lock its own request holds: it panics, the
/// caller gets the panic, and the property serves the next requests.
#[test]
fn a_closure_that_changes_its_own_property_panics_instead_of_hanging() {
    within(60, || {
        let rt = rt(2);
        rt.block_on(|| {
            let a = gossamer::trustee(1).entrust_adaptive(0u64);
            a.set_policy(Policy::Delegate);
            for _ in 0..3 {
                // Alone in its batch, and behind other requests to `a`.
                for before in [0, 2] {
                    for _ in 0..before {
                        a.apply_then(bump, |()| {});
                    }
                    let seen = std::rc::Rc::new(std::cell::Cell::new(None));
                    let s = seen.clone();
                    a.try_apply_with_then(lock_myself, a.clone(), move |r| s.set(Some(r.map_err(|p| p.to_string()))));
                    // Answers come in order: the callback has run once this
                    // later call returns.
                    a.apply(|_| ());
                    let r = seen.take().expect("the call was answered");
                    let msg = r.expect_err("the closure's nested lock panics");
                    assert!(msg.contains("same property"), "unexpected panic: {msg}");
                }
            }
            assert_eq!(a.policy(), Policy::Delegate, "the refused change changed nothing");
            assert_eq!(a.apply(|n| *n), 6);
            a.apply(bump);
            assert_eq!(a.apply(|n| *n), 7, "the lock was released after the panic");
        });
    });
}
