//! The `Follow` migration policy (`Trust::set_migration_policy`): a
//! property moves to the trustee of the thread that issues most of its
//! requests, with hysteresis, and with every guarantee of a move (each
//! request once, each client's in order, trusts valid); a property left
//! with `Stay` never moves.

mod common;
use common::moves::{check_order, wait_for, Counted};
use common::{rt, within, yield_until};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gossamer::{FollowParams, MigrationPolicy, Trust};

/// The shared property: a total, the order in which requests ran, and the
/// trustees it ran on, in turn (one entry per move).
#[derive(Default)]
struct State {
    total: u64,
    log: Vec<(u32, u32)>,
    places: Vec<usize>,
}

impl State {
    fn run(&mut self, c: u32, s: u32) -> u64 {
        let here = gossamer::current_thread().expect("a closure runs on a worker");
        if self.places.last() != Some(&here) {
            self.places.push(here);
        }
        self.total += 1;
        self.log.push((c, s));
        self.total
    }
}

fn follow(window: u32) -> MigrationPolicy {
    MigrationPolicy::Follow(FollowParams {
        window,
        window_ms: 0,
        share_percent: 60,
        return_percent: 80,
        rest_windows: 2,
    })
}

/// Where the value is now: the trustee a closure runs on.
fn place(t: &Trust<State>) -> usize {
    t.apply(|_| gossamer::current_thread().expect("a closure runs on a worker"))
}

/// Where the value is once a move the policy asked for has landed, if it
/// is `expected` within 5 s. The holder asks for a move and the origin
/// makes it on its own thread: on a loaded machine (other tests' workers
/// on the same cores) that may come after the last request of a phase,
/// so the caller yields (letting this thread, the origin's, take the
/// request in) instead of judging at once. A place other than `expected`
/// is returned after 5 s, for the caller's assertion to report.
fn place_once_settled(t: &Trust<State>, expected: usize) -> usize {
    yield_until(Duration::from_secs(5), || place(t) == expected);
    place(t)
}

/// The trustees the requests ran on, in turn, with the value's place now
/// added when a last move landed after the last request.
fn with_last_move(mut places: Vec<usize>, now: usize) -> Vec<usize> {
    if places.last() != Some(&now) {
        places.push(now);
    }
    places
}

#[test]
fn a_property_used_from_one_thread_moves_to_that_threads_trustee() {
    within(120, || {
        const CLIENTS: u32 = 4;
        const PER_CLIENT: u32 = 1500;
        let rt = rt(3);
        rt.block_on(|| {
            let t = gossamer::trustee(0).entrust(State::default());
            t.set_migration_policy(follow(100)).unwrap();
            let clients: Vec<_> = (0..CLIENTS)
                .map(|c| {
                    let t = t.clone();
                    gossamer::spawn_on(2, move || {
                        let mut t = t;
                        for s in 0..PER_CLIENT {
                            if s % 500 == 0 {
                                // A trust made along the way works like the others.
                                t = t.clone();
                            }
                            if s % 2 == 0 {
                                t.apply_then(move |st| st.run(c, s), |_| {});
                            } else {
                                t.apply(move |st| st.run(c, s));
                            }
                        }
                        // The `then` requests issued last have run too.
                        t.apply(|_| ());
                    })
                })
                .collect();
            for c in clients {
                c.join().unwrap();
            }
            let now = place_once_settled(&t, 2);
            assert_eq!(now, 2, "the property did not move to the trustee of the thread that uses it");
            let (total, log, places) = t.apply(|st| (st.total, std::mem::take(&mut st.log), st.places.clone()));
            assert_eq!(total, u64::from(CLIENTS * PER_CLIENT), "every request once");
            check_order(&log, CLIENTS, PER_CLIENT);
            assert_eq!(with_last_move(places, now), vec![0, 2], "one move, from the origin to thread 2");
        });
    });
}

/// Threads 1 and 2 issue requests in the exact order of `schedule` (one
/// entry per request: the issuing thread), each waiting for its request to
/// run before the next is issued; `c` numbers the phase in the log.
fn drive(t: &Trust<State>, schedule: Vec<usize>, c: u32, next: &mut u32) {
    let schedule = Arc::new(schedule);
    let pos = Arc::new(AtomicUsize::new(0));
    let first = *next;
    *next += schedule.len() as u32;
    let fibers: Vec<_> = [1usize, 2]
        .into_iter()
        .map(|me| {
            let (t, schedule, pos) = (t.clone(), schedule.clone(), pos.clone());
            gossamer::spawn_on(me, move || loop {
                let p = pos.load(Ordering::Acquire);
                if p == schedule.len() {
                    break;
                }
                if schedule[p] == me {
                    let s = first + p as u32;
                    t.apply(move |st| st.run(c, s));
                    pos.store(p + 1, Ordering::Release);
                } else {
                    gossamer::yield_now();
                }
            })
        })
        .collect();
    for f in fibers {
        f.join().unwrap();
    }
}

/// `n` requests, `a` of every `a + b` from thread 1 and the others from
/// thread 2.
fn mix(n: usize, a: usize, b: usize) -> Vec<usize> {
    (0..n).map(|i| if i % (a + b) < a { 1 } else { 2 }).collect()
}

#[test]
fn two_threads_taking_turns_it_follows_the_main_user_with_hysteresis() {
    within(240, || {
        const N: usize = 1600;
        let rt = rt(3);
        rt.block_on(|| {
            let t = gossamer::trustee(0).entrust(State::default());
            t.set_migration_policy(follow(100)).unwrap();
            let mut next = 0;
            // Thread 1 alone: the property follows it.
            drive(&t, mix(N, 1, 0), 0, &mut next);
            assert_eq!(place_once_settled(&t, 1), 1, "it did not follow the only user, thread 1");
            // Thread 2 alone: it follows.
            drive(&t, mix(N, 0, 1), 0, &mut next);
            assert_eq!(place_once_settled(&t, 2), 2, "it did not follow the only user, thread 2");
            // Thread 1 at 75 %: a majority, but going back to the trustee
            // it left takes 80 %: it stays.
            drive(&t, mix(N, 3, 1), 0, &mut next);
            assert_eq!(place(&t), 2, "it went back to thread 1 on less than the share needed to return");
            // Taking turns one by one: no majority, no move.
            drive(&t, mix(N, 1, 1), 0, &mut next);
            assert_eq!(place(&t), 2, "it moved with no majority");
            // Thread 1 alone: back to it.
            drive(&t, mix(N, 1, 0), 0, &mut next);
            let now = place_once_settled(&t, 1);
            assert_eq!(now, 1, "it did not go back to thread 1 on a clear return share");
            let (total, log, places) = t.apply(|st| (st.total, std::mem::take(&mut st.log), st.places.clone()));
            assert_eq!(total, 5 * N as u64, "every request once");
            check_order(&log, 1, 5 * N as u32);
            assert_eq!(
                with_last_move(places, now),
                vec![0, 1, 2, 1],
                "moves: to thread 1, to thread 2, back to thread 1, no others"
            );
        });
    });
}

#[test]
fn a_property_that_stays_never_moves() {
    within(120, || {
        const N: u32 = 3000;
        let rt = rt(3);
        rt.block_on(|| {
            // The default, and `Stay` set after `Follow`.
            let never = gossamer::trustee(0).entrust(State::default());
            let undone = gossamer::trustee(0).entrust(State::default());
            undone.set_migration_policy(follow(100)).unwrap();
            undone.set_migration_policy(MigrationPolicy::Stay).unwrap();
            let (a, b) = (never.clone(), undone.clone());
            gossamer::spawn_on(2, move || {
                for s in 0..N {
                    a.apply_then(move |st| st.run(0, s), |_| {});
                    b.apply(move |st| st.run(0, s));
                }
                a.apply(|_| ());
            })
            .join()
            .unwrap();
            for t in [&never, &undone] {
                let (total, log, places) = t.apply(|st| (st.total, std::mem::take(&mut st.log), st.places.clone()));
                assert_eq!(total, u64::from(N));
                check_order(&log, 1, N);
                assert_eq!(places, vec![0], "a property that stays moved");
            }
        });
    });
}

#[test]
fn parameters_out_of_bounds_are_refused_and_change_nothing() {
    within(60, || {
        let rt = rt(2);
        rt.block_on(|| {
            let t = gossamer::trustee(0).entrust(State::default());
            let bad = FollowParams { share_percent: 40, ..FollowParams::default() };
            let err = t.set_migration_policy(MigrationPolicy::Follow(bad)).unwrap_err();
            assert!(err.to_string().contains("share_percent"), "{err}");
            let c = t.clone();
            gossamer::spawn_on(1, move || {
                for s in 0..2000 {
                    c.apply(move |st| st.run(0, s));
                }
            })
            .join()
            .unwrap();
            assert_eq!(place(&t), 0);
        });
    });
}

#[test]
fn frequent_moves_it_asks_for_keep_every_request_once_in_order_and_drop_it_once() {
    within(240, || {
        const CLIENTS: u32 = 6;
        const PER_CLIENT: u32 = 2000;
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(3);
        let d = drops.clone();
        let places = rt.block_on(move || {
            let t = gossamer::trustee(0).entrust((State::default(), Counted(d)));
            // As eager as it gets: a move whenever one thread issued most of
            // 16 requests, no rest, no stronger share to go back.
            let eager =
                FollowParams { window: 16, window_ms: 0, share_percent: 51, return_percent: 51, rest_windows: 0 };
            t.set_migration_policy(MigrationPolicy::Follow(eager)).unwrap();
            let clients: Vec<_> = (0..CLIENTS)
                .map(|c| {
                    let t = t.clone();
                    // Threads 1 and 2 in turns, in bursts, so that each
                    // leads now and then.
                    gossamer::spawn_on(1 + c as usize % 2, move || {
                        for s in 0..PER_CLIENT {
                            if s % 3 == 0 {
                                t.apply(move |(st, _)| st.run(c, s));
                            } else {
                                t.apply_then(move |(st, _)| st.run(c, s), |_| {});
                            }
                            if s % 200 == 199 {
                                for _ in 0..c * 4 {
                                    gossamer::yield_now();
                                }
                            }
                        }
                        t.apply(|_| ());
                    })
                })
                .collect();
            for c in clients {
                c.join().unwrap();
            }
            let (total, log, places) = t.apply(|(st, _)| (st.total, std::mem::take(&mut st.log), st.places.clone()));
            assert_eq!(total, u64::from(CLIENTS * PER_CLIENT), "every request once");
            check_order(&log, CLIENTS, PER_CLIENT);
            places
        });
        wait_for(&drops, 1);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the property was not dropped exactly once");
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped again at shutdown");
        assert!(places.len() > 2, "it hardly moved ({places:?}): the test lost its point");
        eprintln!("moves: {}", places.len() - 1);
    });
}

/// Requests from thread 2, one every millisecond or so: too few for a
/// window of 2^20 requests, so only a window closed by its age moves the
/// property.
fn used_slowly(window_ms: u32, n: u32) -> Vec<usize> {
    let rt = rt(3);
    rt.block_on(move || {
        let t = gossamer::trustee(0).entrust(State::default());
        let params =
            FollowParams { window: 1 << 20, window_ms, share_percent: 60, return_percent: 80, rest_windows: 0 };
        t.set_migration_policy(MigrationPolicy::Follow(params)).unwrap();
        let u = t.clone();
        gossamer::spawn_on(2, move || {
            for s in 0..n {
                u.apply(move |st| st.run(0, s));
                // Blocks only thread 2: its requests go out one by one.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
        .join()
        .unwrap();
        let (total, log, places) = t.apply(|st| (st.total, std::mem::take(&mut st.log), st.places.clone()));
        assert_eq!(total, u64::from(n));
        check_order(&log, 1, n);
        places
    })
}

#[test]
fn a_property_used_slowly_follows_once_its_windows_close_by_age() {
    within(120, || {
        // 300 requests over at least 300 ms: windows of 20 ms hold about
        // 16-20 requests each, so some close by age and one moves it.
        let places = used_slowly(20, 300);
        assert_eq!(places, vec![0, 2], "the property did not follow its only user, or moved more than once");
        // With windows closed by count only, it never collects a window.
        assert_eq!(used_slowly(0, 100), vec![0], "a window of 2^20 requests closed early");
    });
}
