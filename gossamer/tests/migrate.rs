//! Moving a property while the program runs (`Trust::migrate_to`): every
//! request runs exactly once and in per-client order across moves, every
//! trust stays valid, and the property is dropped exactly once.

mod common;
use common::moves::{check_order, wait_for, Counted};
use common::{rt, within};

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gossamer::Trust;

/// The shared property: a total, the order in which requests ran, and a
/// drop counter.
struct State {
    total: u64,
    log: Vec<(u32, u32)>,
    _drops: Counted,
}

fn state(drops: &Arc<AtomicUsize>) -> State {
    State { total: 0, log: Vec::new(), _drops: Counted(drops.clone()) }
}

const THREADS: usize = 4;
const CLIENTS: u32 = 8;
const PER_CLIENT: u32 = 600;
const MOVES: usize = 300;

/// One client fiber: `apply_then` and `apply` mixed, a panicking closure
/// now and then, a fresh clone now and then; every `then` callback runs
/// on this thread in issue order.
fn client(t: Trust<State>, c: u32) {
    let mut t = t;
    let called = Rc::new(RefCell::new(Vec::new()));
    for s in 0..PER_CLIENT {
        if s % 50 == 25 {
            // A panic in a closure during the moves reaches the caller and
            // changes nothing.
            let r = catch_unwind(AssertUnwindSafe(|| t.apply(|_| -> u64 { panic!("closure panics on purpose") })));
            assert!(r.is_err());
        }
        if s % 64 == 0 {
            // A trust made now (after some moves) works like the others.
            t = t.clone();
        }
        if s % 3 == 2 {
            let seen = t.apply(move |st| {
                st.total += 1;
                st.log.push((c, s));
                st.total
            });
            assert!(seen >= 1);
        } else {
            let called = called.clone();
            t.apply_then(
                move |st| {
                    st.total += 1;
                    st.log.push((c, s));
                    s
                },
                move |s| called.borrow_mut().push(s),
            );
        }
        if s % 16 == 0 {
            gossamer::yield_now();
        }
    }
    // The last request of this fiber runs after all of its earlier ones.
    t.apply(|_| ());
    let called = called.borrow();
    assert!(called.windows(2).all(|w| w[0] < w[1]), "client {c}: then callbacks out of order");
    assert_eq!(called.len() as u32, PER_CLIENT - PER_CLIENT / 3, "client {c}: then callbacks missing");
}

#[test]
fn requests_run_once_and_in_order_while_the_property_moves_back_and_forth() {
    within(240, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(THREADS);
        let d = drops.clone();
        let log = rt.block_on(move || {
            let t = gossamer::trustee(1).entrust(state(&d));
            let clients: Vec<_> = (0..CLIENTS)
                .map(|c| {
                    let t = t.clone();
                    gossamer::spawn_on(c as usize % THREADS, move || client(t, c))
                })
                .collect();
            let mover = {
                let t = t.clone();
                gossamer::spawn_on(0, move || {
                    for i in 0..MOVES {
                        t.migrate_to(gossamer::trustee((i * 3 + 2) % THREADS));
                        gossamer::yield_now();
                    }
                })
            };
            for h in clients {
                h.join().unwrap();
            }
            mover.join().unwrap();
            let (total, log) = t.apply(|st| (st.total, std::mem::take(&mut st.log)));
            assert_eq!(total, u64::from(CLIENTS * PER_CLIENT), "every request ran exactly once");
            assert_eq!(d.load(Ordering::SeqCst), 0, "dropped while a trust remains");
            log
        });
        check_order(&log, CLIENTS, PER_CLIENT);
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once after the last trust");
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "shutdown must not drop it again");
    });
}

#[test]
fn requests_from_outside_the_runtime_follow_the_moves() {
    within(240, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(3);
        let t = rt.entrust(state(&drops));
        let outside = {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut pending = Vec::new();
                for s in 0..200u32 {
                    if s % 2 == 0 {
                        t.apply(move |st| {
                            st.total += 1;
                            st.log.push((0, s));
                        });
                    } else {
                        // Not awaited before the next: the queue keeps order.
                        pending.push(t.apply_async(move |st| {
                            st.total += 1;
                            st.log.push((0, s));
                        }));
                    }
                }
                for p in pending {
                    gossamer::block_on(p);
                }
            })
        };
        let mover = t.clone();
        rt.block_on(move || {
            for i in 0..60 {
                mover.migrate_to(gossamer::trustee(i % 3));
                gossamer::yield_now();
            }
        });
        outside.join().unwrap();
        let log = rt.block_on(move || {
            let (total, log) = t.apply(|st| (st.total, std::mem::take(&mut st.log)));
            assert_eq!(total, 200);
            log
        });
        check_order(&log, 1, 200);
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn trusts_made_before_and_after_moves_keep_working_and_the_property_drops_once() {
    within(120, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(3);
        let d = drops.clone();
        rt.block_on(move || {
            let a = gossamer::trustee(0).entrust(state(&d));
            a.apply(|st| st.total += 1);
            a.migrate_to(gossamer::trustee(1));
            let b = a.clone();
            b.apply(|st| st.total += 1);
            // A move to where it already is changes nothing.
            b.migrate_to(gossamer::trustee(1));
            b.migrate_to(gossamer::trustee(2));
            let c = b.clone();
            // Back to where it was entrusted, on this very thread.
            c.migrate_to(gossamer::trustee(0));
            assert_eq!(a.apply(|st| st.total), 2);
            drop(a);
            c.apply_then(|st| st.total += 1, |_| {});
            c.migrate_to(gossamer::trustee(2));
            drop(b);
            assert_eq!(c.apply(|st| st.total), 3);
            assert_eq!(d.load(Ordering::SeqCst), 0);
            let far = gossamer::spawn_on(1, move || c.apply(|st| st.total));
            assert_eq!(far.join().unwrap(), 3);
        });
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once, on its last trustee");
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_property_still_entrusted_at_shutdown_is_dropped_once_after_moves() {
    within(60, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(2);
        let d = drops.clone();
        let kept = rt.block_on(move || {
            let t = gossamer::trustee(0).entrust(state(&d));
            t.migrate_to(gossamer::trustee(1));
            t.migrate_to(gossamer::trustee(0));
            t.migrate_to(gossamer::trustee(1));
            t
        });
        // The trust outlives the runtime: shutdown drops the value.
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(kept);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn routes_to_moved_properties_retire_with_their_last_trust() {
    // Many short-lived properties, each moved while clients on other
    // threads stream requests straight to it, and dropped with callbacks
    // still pending: every one runs its requests once, in order, and is
    // dropped once (a cell or route outliving its property would show as a
    // lost or doubled drop, or a request reaching the wrong property).
    within(240, || {
        const ROUNDS: usize = 150;
        const PER: u32 = 40;
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(3);
        let d = drops.clone();
        rt.block_on(move || {
            for round in 0..ROUNDS {
                let t = gossamer::trustee(round % 3).entrust(state(&d));
                let clients: Vec<_> = (0..2u32)
                    .map(|c| {
                        let t = t.clone();
                        gossamer::spawn_on(1 + c as usize, move || {
                            for s in 0..PER {
                                t.apply_then(move |st| st.log.push((c, s)), |_| {});
                                if s % 8 == 0 {
                                    gossamer::yield_now();
                                }
                            }
                            // Runs after all of this fiber's earlier ones.
                            t.apply(|_| ());
                            // A clone dropped with requests still outstanding.
                            let u = t.clone();
                            u.apply_then(|_| (), |_| {});
                        })
                    })
                    .collect();
                t.migrate_to(gossamer::trustee((round + 1) % 3));
                t.migrate_to(gossamer::trustee((round + 2) % 3));
                for h in clients {
                    h.join().unwrap();
                }
                let log = t.apply(|st| std::mem::take(&mut st.log));
                check_order(&log, 2, PER);
            }
        });
        wait_for(&drops, ROUNDS);
        assert_eq!(drops.load(Ordering::SeqCst), ROUNDS, "each property dropped once after its last trust");
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), ROUNDS);
    });
}

#[test]
fn streams_of_apply_then_stay_in_order_while_routes_change() {
    // Long streams of requests that do not wait, so that each client
    // thread nearly always has some outstanding when the value moves: a
    // client that changed its route then would let later requests overtake
    // earlier ones.
    within(240, || {
        const PER: u32 = 4000;
        const STREAMS: u32 = 4;
        let rt = rt(3);
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let log = rt.block_on(move || {
            let t = gossamer::trustee(0).entrust(state(&d));
            let clients: Vec<_> = (0..STREAMS)
                .map(|c| {
                    let t = t.clone();
                    gossamer::spawn_on(1 + c as usize % 2, move || {
                        for s in 0..PER {
                            t.apply_then(move |st| st.log.push((c, s)), |_| {});
                            if s % 64 == 63 {
                                gossamer::yield_now();
                            }
                        }
                        t.apply(|_| ());
                    })
                })
                .collect();
            let mover = {
                let t = t.clone();
                gossamer::spawn_on(0, move || {
                    for i in 0..2000 {
                        t.migrate_to(gossamer::trustee([1, 2, 0, 2, 1][i % 5]));
                        gossamer::yield_now();
                    }
                })
            };
            for h in clients {
                h.join().unwrap();
            }
            mover.join().unwrap();
            t.apply(|st| std::mem::take(&mut st.log))
        });
        check_order(&log, STREAMS, PER);
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_value_in_the_middle_of_a_hand_over_at_shutdown_is_dropped_once() {
    // Shutdown gives up on fibers that keep moving the property and
    // sending to it (a short shutdown timeout), so it stops the workers
    // with hand-overs in flight: whichever step the value is in then, it
    // is dropped exactly once.
    within(240, || {
        for round in 0..30 {
            let drops = Arc::new(AtomicUsize::new(0));
            let rt = gossamer::Runtime::builder()
                .workers(3)
                .shutdown_timeout(std::time::Duration::from_millis(20))
                .build()
                .expect("runtime");
            let d = drops.clone();
            rt.block_on(move || {
                let t = gossamer::trustee(round % 3).entrust(state(&d));
                for k in 0..3 {
                    let t = t.clone();
                    // Never finishes: abandoned at shutdown.
                    gossamer::spawn_on(k, move || {
                        for i in 0.. {
                            t.migrate_to(gossamer::trustee((i + k) % 3));
                            t.apply_then(|st| st.total += 1, |_| {});
                        }
                    });
                }
                for _ in 0..round % 7 {
                    gossamer::yield_now();
                }
            });
            drop(rt);
            assert_eq!(drops.load(Ordering::SeqCst), 1, "round {round}: dropped once at shutdown");
        }
    });
}
