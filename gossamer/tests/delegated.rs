//! Delegated context never suspends; `launch` runs blocking closures in a
//! fiber on the trustee, under the property's latch.

mod common;
use common::{rt, within};

use gossamer::{Latch, Trust};
use std::panic::{catch_unwind, AssertUnwindSafe};

#[test]
fn blocking_inside_a_delegated_closure_fails_at_once_naming_launch() {
    within(60, || {
        let rt = rt(2);
        let outer = rt.trustee(1).entrust(0u32);
        let inner = rt.trustee(0).entrust(0u32);
        let msg = rt.block_on(move || {
            let r = catch_unwind(AssertUnwindSafe(|| {
                outer.apply_with(|_, inner: Trust<u32>| inner.apply(|v| *v), inner.clone())
            }));
            let p = r.unwrap_err();
            p.downcast_ref::<String>().cloned().unwrap_or_default()
        });
        // One line, which names the fixes.
        let first = msg.lines().next().unwrap_or_default();
        assert!(first.contains("launch") && first.contains("apply_then"), "the first line names the fix: {msg}");
        assert!(msg.contains("delegated context"), "{msg}");
    });
}

#[test]
fn blocking_in_a_then_callback_fails_and_is_reported() {
    within(60, || {
        let rt = rt(2);
        let a = rt.trustee(1).entrust(0u32);
        let a2 = a.clone();
        rt.block_on(move || {
            a.apply_then(
                |v| *v,
                move |_| {
                    a2.apply(|v| *v);
                },
            );
            a.apply(|_| ());
        });
        assert_eq!(rt.stats().unhandled_panics, 1);
    });
}

#[test]
fn apply_then_is_allowed_in_delegated_context() {
    within(60, || {
        let rt = rt(3);
        let a = rt.trustee(1).entrust(0u32);
        let b = rt.trustee(2).entrust(0u32);
        let b2 = b.clone();
        rt.block_on(move || {
            for _ in 0..100 {
                a.apply_with(
                    |v, b: Trust<u32>| {
                        *v += 1;
                        b.apply_then(|w| *w += 1, |()| {});
                    },
                    b2.clone(),
                );
            }
            // Trustee 1's requests to trustee 2 are sent by trustee 1's
            // worker loop; wait for them to land.
            while b2.apply(|w| *w) < 100 {
                gossamer::yield_now();
            }
            assert_eq!(a.apply(|v| *v), 100);
        });
        assert_eq!(b.apply(|w| *w), 100);
    });
}

#[test]
fn launch_allows_nested_blocking_apply() {
    within(60, || {
        let rt = rt(3);
        let account = rt.trustee(1).entrust(Latch::new(100i64));
        let audit = rt.trustee(2).entrust(Vec::<i64>::new());
        let audit2 = audit.clone();
        let final_balance = rt.block_on(move || {
            let hs: Vec<_> = (0..10)
                .map(|i| {
                    let account = account.clone();
                    let audit = audit2.clone();
                    gossamer::spawn_on(i % 3, move || {
                        account.launch_with(
                            |bal, audit: Trust<Vec<i64>>| {
                                // Nested blocking delegation while holding the latch.
                                let seen = audit.apply(|log| log.len());
                                *bal -= 1;
                                let b = *bal;
                                audit.apply(move |log| log.push(b));
                                seen
                            },
                            audit,
                        )
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            account.launch(|bal| *bal)
        });
        assert_eq!(final_balance, 90);
        let mut log = audit.apply(|l| l.clone());
        assert_eq!(log.len(), 10);
        log.sort();
        assert_eq!(log, (90..100).collect::<Vec<_>>(), "each launch saw the latch exclusively");
    });
}

#[test]
fn launch_then_delivers_to_the_issuing_thread_and_panics_in_launch_reach_the_caller() {
    within(60, || {
        let rt = rt(2);
        let t = rt.trustee(1).entrust(Latch::new(1u32));
        rt.block_on(move || {
            let got = std::rc::Rc::new(std::cell::Cell::new(0));
            let g = got.clone();
            t.launch_then(
                |v| {
                    *v += 1;
                    *v
                },
                move |v| {
                    assert_eq!(gossamer::current_thread(), Some(0));
                    g.set(v)
                },
            );
            while got.get() == 0 {
                gossamer::yield_now();
            }
            assert_eq!(got.get(), 2);
            let r = catch_unwind(AssertUnwindSafe(|| t.launch(|_| -> u8 { panic!("in launch") })));
            assert!(r.is_err());
            // The latch was released by the unwinding fiber.
            assert_eq!(t.launch(|v| *v), 2);
            assert!(!t.apply(|l| l.is_locked()));
        });
    });
}

#[test]
fn latch_hands_over_in_fifo_order_between_fibers_of_one_thread() {
    within(30, || {
        let rt = rt(1);
        let order = rt.block_on(|| {
            let t = gossamer::local_trustee().entrust(Latch::new(Vec::<u32>::new()));
            let t0 = t.clone();
            // The first launched fiber holds the latch across several
            // suspensions while the others queue behind it.
            let first = gossamer::spawn(move || {
                t0.launch(|v| {
                    for _ in 0..10 {
                        gossamer::yield_now();
                    }
                    v.push(100)
                })
            });
            gossamer::yield_now();
            let hs: Vec<_> = (0..5u32)
                .map(|i| {
                    let t = t.clone();
                    gossamer::spawn(move || t.launch(move |v| v.push(i)))
                })
                .collect();
            first.join().unwrap();
            for h in hs {
                h.join().unwrap();
            }
            t.launch(|v| v.clone())
        });
        assert_eq!(order, vec![100, 0, 1, 2, 3, 4]);
    });
}

#[test]
fn a_launch_from_inside_a_launch_on_the_same_property_is_refused_instead_of_hanging() {
    within(60, || {
        let rt = rt(2);
        let t = rt.trustee(1).entrust(Latch::new(7u32));
        let msg = rt.block_on(move || {
            // The outer closure holds the latch; the inner launch would wait
            // for it while the outer waits for the inner launch.
            let r = catch_unwind(AssertUnwindSafe(|| {
                t.launch_with(|_, again: Trust<Latch<u32>>| again.launch(|v| *v), t.clone())
            }));
            let p = r.expect_err("the nested launch must panic, not hang");
            let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
            // The latch was released as the outer closure unwound, and the
            // value is intact.
            assert_eq!(t.launch(|v| *v), 7);
            // (Other fibers of the trustee's thread, which do not hold the
            // latch, still wait their turn: see
            // `latch_hands_over_in_fifo_order_between_fibers_of_one_thread`.)
            msg
        });
        assert!(msg.contains("holds its latch") && msg.contains("launch_then"), "{msg}");
    });
}

#[test]
fn taking_a_latch_the_fiber_already_holds_is_refused_instead_of_hanging() {
    within(30, || {
        let rt = rt(1);
        let msg = rt.block_on(|| {
            let latch = Latch::new(1u32);
            let first = latch.lock();
            let r = catch_unwind(AssertUnwindSafe(|| *latch.lock()));
            drop(first);
            // Free again, and taken by this fiber without complaint.
            assert_eq!(*latch.lock(), 1);
            let p = r.expect_err("relocking must panic, not hang");
            p.downcast_ref::<String>().cloned().unwrap_or_default()
        });
        assert!(msg.contains("already holds") && msg.contains("not reentrant"), "{msg}");
    });
}
