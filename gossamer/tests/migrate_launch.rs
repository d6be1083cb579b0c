//! Launches on a property that moves (`launch` on a `Trust<Latch<T>>`
//! after `migrate_to`): the launched closure runs where the value is,
//! exactly once and in each client's order; the property stays while a
//! launch holds its latch, and a move asked for meanwhile panics.

mod common;
use common::moves::{check_order, wait_for, Counted};
use common::{rt, within};

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use gossamer::{Latch, Trust};

struct State {
    total: u64,
    log: Vec<(u32, u32)>,
    /// The threads launched closures ran on.
    ran_on: Vec<usize>,
    _drops: Counted,
}

fn state(drops: &Arc<AtomicUsize>) -> State {
    State { total: 0, log: Vec::new(), ran_on: Vec::new(), _drops: Counted(drops.clone()) }
}

/// The message of a panic.
fn message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

#[test]
fn a_launch_runs_where_the_value_moved_and_keeps_it_there_while_it_holds_the_latch() {
    within(60, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(3);
        let d = drops.clone();
        rt.block_on(move || {
            let t = gossamer::trustee(0).entrust(Latch::new(state(&d)));
            assert_eq!(t.launch(|_| gossamer::current_thread()), Some(0));
            t.migrate_to(gossamer::trustee(1));
            // The closure runs on the new holder, may block there, and its
            // result comes back.
            let on = t.launch(|st| {
                gossamer::yield_now();
                st.total += 1;
                gossamer::current_thread()
            });
            assert_eq!(on, Some(1));
            t.migrate_to(gossamer::trustee(2));
            // launch_then too, its callback back on this thread.
            let got = Rc::new(RefCell::new(None));
            let g = got.clone();
            t.launch_then(
                |st| {
                    st.total += 1;
                    (gossamer::current_thread(), st.total)
                },
                move |r| *g.borrow_mut() = Some((r, gossamer::current_thread())),
            );
            while got.borrow().is_none() {
                gossamer::yield_now();
            }
            assert_eq!(*got.borrow(), Some(((Some(2), 2), Some(0))));

            // While a launch holds the latch on thread 2, a move panics and
            // the value stays; a launch on the same property from inside
            // panics instead of waiting for itself.
            let (refused, nested) = t.launch_with(
                |st, t: Trust<Latch<State>>| {
                    let moved = catch_unwind(AssertUnwindSafe(|| t.migrate_to(gossamer::trustee(0))));
                    let nested = catch_unwind(AssertUnwindSafe(|| t.launch(|st| st.total)));
                    st.total += 1;
                    (moved.map_err(message).err(), nested.map_err(message).err())
                },
                t.clone(),
            );
            let refused = refused.expect("a move while the latch is held must panic");
            assert!(refused.contains("launched closure"), "{refused}");
            let nested = nested.expect("a launch into itself must panic");
            assert!(nested.contains("holds its latch"), "{nested}");
            assert_eq!(t.launch(|st| (gossamer::current_thread(), st.total)), (Some(2), 3));

            // Once the launches are done, the property moves again.
            t.migrate_to(gossamer::trustee(0));
            assert_eq!(t.launch(|_| gossamer::current_thread()), Some(0));
            assert_eq!(d.load(Ordering::SeqCst), 0);
        });
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once after the last trust");
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "shutdown must not drop it again");
    });
}

const THREADS: usize = 4;
const CLIENTS: u32 = 8;
const PER_CLIENT: u32 = 150;
const MOVES: usize = 40;

/// One client: launches and `launch_then`s, each appending its sequence
/// number; waits while the mover asks it to, so that moves find gaps.
fn client(t: Trust<Latch<State>>, c: u32, pause: Arc<AtomicBool>) {
    let called = Rc::new(RefCell::new(Vec::new()));
    for s in 0..PER_CLIENT {
        while pause.load(Ordering::Acquire) {
            gossamer::yield_now();
        }
        if s % 2 == 0 {
            t.launch(move |st| {
                if s % 8 == 0 {
                    gossamer::yield_now(); // blocks while holding the latch
                }
                st.total += 1;
                st.log.push((c, s));
                st.ran_on.push(gossamer::current_thread().unwrap());
            });
        } else {
            let called = called.clone();
            t.launch_then(
                move |st| {
                    st.total += 1;
                    st.log.push((c, s));
                    st.ran_on.push(gossamer::current_thread().unwrap());
                    s
                },
                move |s| called.borrow_mut().push(s),
            );
        }
    }
    // The last launch of this fiber runs after all of its earlier ones.
    t.launch(|_| ());
    let called = called.borrow();
    assert!(called.windows(2).all(|w| w[0] < w[1]), "client {c}: then callbacks out of order");
    assert_eq!(called.len() as u32, PER_CLIENT / 2, "client {c}: then callbacks missing");
}

#[test]
fn launches_run_once_and_in_order_while_the_property_moves() {
    within(240, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(THREADS);
        let d = drops.clone();
        let (log, ran_on, refusals) = rt.block_on(move || {
            let t = gossamer::trustee(1).entrust(Latch::new(state(&d)));
            let pause = Arc::new(AtomicBool::new(false));
            let clients: Vec<_> = (0..CLIENTS)
                .map(|c| {
                    let (t, pause) = (t.clone(), pause.clone());
                    gossamer::spawn_on(c as usize % THREADS, move || client(t, c, pause))
                })
                .collect();
            let mover = {
                let (t, pause) = (t.clone(), pause.clone());
                gossamer::spawn_on(0, move || {
                    let mut refusals = 0;
                    for i in 0..MOVES {
                        // Ask the clients to stop launching; moves made while
                        // launches are out panic, so try until one is not.
                        pause.store(true, Ordering::Release);
                        let to = gossamer::trustee((i * 3 + 2) % THREADS);
                        loop {
                            // Let the launches that are out end first.
                            for _ in 0..30 {
                                gossamer::yield_now();
                            }
                            match catch_unwind(AssertUnwindSafe(|| t.migrate_to(to))) {
                                Ok(()) => break,
                                Err(p) => {
                                    let m = message(p);
                                    assert!(m.contains("launched closure"), "{m}");
                                    refusals += 1;
                                }
                            }
                        }
                        pause.store(false, Ordering::Release);
                        for _ in 0..20 {
                            gossamer::yield_now();
                        }
                    }
                    refusals
                })
            };
            for h in clients {
                h.join().unwrap();
            }
            let refusals = mover.join().unwrap();
            let (total, log, ran_on) =
                t.launch(|st| (st.total, std::mem::take(&mut st.log), std::mem::take(&mut st.ran_on)));
            assert_eq!(total, u64::from(CLIENTS * PER_CLIENT), "every launch ran exactly once");
            assert_eq!(d.load(Ordering::SeqCst), 0, "dropped while a trust remains");
            (log, ran_on, refusals)
        });
        check_order(&log, CLIENTS, PER_CLIENT);
        let mut threads = ran_on.clone();
        threads.sort_unstable();
        threads.dedup();
        assert!(threads.len() >= 2, "the launches all ran on {threads:?}: the property never moved under them");
        println!("{} launches on threads {threads:?}; {refusals} moves refused while launches were out", ran_on.len());
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once after the last trust");
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "shutdown must not drop it again");
    });
}

/// A fiber on `thread` launches on `t` and moves it at once, `n` times,
/// between trustees 1 and 2.
fn launch_then_move(t: &Trust<Latch<u64>>, thread: usize, n: u64) -> gossamer::JoinHandle<()> {
    let t = t.clone();
    gossamer::spawn_on(thread, move || {
        for i in 0..n {
            t.launch(|v| *v += 1);
            // The launch has ended: nothing holds the latch, so the move
            // must not be refused.
            t.migrate_to(gossamer::trustee(1 + (i as usize % 2)));
        }
    })
}

#[test]
fn a_move_right_after_a_launch_returned_is_never_refused_whatever_thread_asks() {
    within(240, || {
        const N: u64 = 1500;
        let rt = rt(4);
        rt.block_on(move || {
            // Entrusted to trustee 3 (the origin), held by 1 or 2: callers on
            // a third thread (0), on the origin's thread (3) and, every other
            // time, on the holder's (1), one after the other.
            let t = gossamer::trustee(3).entrust(Latch::new(0u64));
            t.migrate_to(gossamer::trustee(1));
            for thread in [0, 3, 1] {
                launch_then_move(&t, thread, N).join().expect("a move right after a launch was refused");
            }
            assert_eq!(t.launch(|v| *v), 3 * N);
        });
    });
}

const ROUTED_OPS: u32 = 4000;

/// The one client of a property that moved, on a thread that keeps a
/// route to it: runs of `apply_then` (which go straight to the holder
/// once the route is known), each run followed by launches (which start at
/// the origin): a `launch_then` or a `launch`, then a `launch`. (One
/// client only: a request that reaches the value while a launch of
/// another client holds the latch is refused, whatever the order.)
fn routed_client(t: Trust<Latch<Vec<(u32, u32)>>>) {
    let c = 0;
    for k in 0..ROUTED_OPS {
        match k % 8 {
            6 if k / 8 % 2 == 0 => t.launch_then(move |log| log.push((c, k)), |()| ()),
            6 | 7 => t.launch(move |log| log.push((c, k))),
            _ => t.apply_then(move |l| l.get_mut().push((c, k)), |()| ()),
        }
    }
}

#[test]
fn a_launch_runs_after_the_requests_its_thread_sent_straight_to_the_holder() {
    within(120, || {
        let rt = rt(3);
        let log = rt.block_on(|| {
            // Entrusted on 1, held on 2: clients on 0 learn the route to 2
            // from their first relayed requests and send there directly,
            // while every launch starts at the origin, on 1.
            let t = gossamer::trustee(1).entrust(Latch::new(Vec::new()));
            t.migrate_to(gossamer::trustee(2));
            let before = gossamer::stats().relayed_requests;
            let client = t.clone();
            gossamer::spawn_on(0, move || routed_client(client))
                .join()
                .expect("a request was refused: a launch overtook it");
            // Without routes nothing could overtake anything: the origin
            // relays what the route does not carry, the launches among them.
            let relayed = gossamer::stats().relayed_requests - before;
            let sent = u64::from(ROUTED_OPS);
            println!("RELAYED {relayed} of {sent}");
            assert!(relayed < sent / 20, "{relayed} of {sent} requests relayed: the clients kept no route");
            t.launch(std::mem::take)
        });
        check_order(&log, 1, ROUTED_OPS);
    });
}
