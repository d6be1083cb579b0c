//! `Adaptive<T>`: a client that keeps requests in flight without waiting
//! (a window of `apply_then` calls) gets back in place once the property
//! is in lock mode. The calls it makes while its delegated ones are still
//! outstanding are held on its thread behind them, in issue order, and run
//! in place once their answers are in; from then on its calls run in place
//! at once. Before, each such call was delegated too, so that a client
//! that always had one in flight never ran in place again.

mod common;
use common::{rt, within};

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gossamer::{Adaptive, Policy};

/// Which thread ran each call, in the order the calls took effect.
type Log = Vec<(u64, usize)>;

fn record(i: u64) -> impl FnOnce(&mut Log) + Copy + Send + 'static {
    move |v: &mut Log| v.push((i, gossamer::current_thread().expect("on a worker")))
}

/// Runs `f` in a fiber of thread 0 of a runtime of two threads.
fn on_thread_0(f: impl FnOnce() + Send + 'static) {
    within(60, || {
        let rt = rt(2);
        rt.spawn_on(0, f).join().unwrap();
    });
}

/// A property of trustee 1 that delegates every call, for now.
fn delegating<T: Send + 'static>(value: T) -> Adaptive<T> {
    let a = gossamer::trustee(1).entrust_adaptive(value);
    a.set_policy(Policy::Delegate);
    a
}

/// A callback that counts itself in `done`.
fn count(done: &Rc<Cell<u64>>) -> impl FnOnce(()) + 'static {
    let d = done.clone();
    move |()| d.set(d.get() + 1)
}

#[test]
fn calls_behind_requests_in_flight_are_held_then_run_in_place_in_order() {
    on_thread_0(|| {
        let a = delegating(Log::new());
        let done = Rc::new(Cell::new(0u64));
        let issue = |i: u64| a.apply_then(record(i), count(&done));
        // Delegated: nothing is answered until this fiber lets its
        // thread run.
        for i in 0..100 {
            issue(i);
        }
        a.set_policy(Policy::Lock);
        // In lock mode, behind 100 requests still outstanding: held.
        for i in 100..200 {
            issue(i);
        }
        assert_eq!(done.get(), 0, "a held call ran before the requests ahead of it were answered");
        // A blocking call goes behind the held ones, and waits for them.
        let seen = a.apply(|v| v.len());
        assert_eq!(seen, 200, "the blocking call overtook calls held before it");
        assert_eq!(done.get(), 200);
        // Nothing outstanding any more: in place, at once.
        for i in 200..300 {
            issue(i);
            assert_eq!(done.get(), i + 1, "call {i} did not run in place at once");
        }
        let log = a.apply(|v| v.clone());
        let order: Vec<u64> = log.iter().map(|e| e.0).collect();
        assert_eq!(order, (0..300).collect::<Vec<_>>(), "calls took effect out of issue order");
        assert!(log[..100].iter().all(|e| e.1 == 1), "the delegated calls ran on the trustee");
        assert!(log[100..].iter().all(|e| e.1 == 0), "a held call was delegated instead of run in place");
    });
}

#[test]
fn a_call_made_by_a_held_calls_callback_goes_behind_the_calls_still_held() {
    on_thread_0(|| {
        let a = Rc::new(delegating(Log::new()));
        let done = Rc::new(Cell::new(0u64));
        for i in 0..20 {
            a.apply_then(record(i), count(&done));
        }
        a.set_policy(Policy::Lock);
        for i in 20..40 {
            // Each held call's callback makes one more call, numbered after
            // every call made here: it must take effect after them all.
            let (again, d) = (a.clone(), done.clone());
            a.apply_then(record(i), move |()| {
                d.set(d.get() + 1);
                again.apply_then(record(i + 20), count(&d));
            });
        }
        while done.get() < 60 {
            gossamer::yield_now();
        }
        let order: Vec<u64> = a.apply(|v| v.clone()).iter().map(|e| e.0).collect();
        assert_eq!(order, (0..60).collect::<Vec<_>>(), "calls took effect out of issue order");
    });
}

#[test]
fn held_calls_go_delegated_if_the_mode_switches_back_meanwhile() {
    on_thread_0(|| {
        let a = delegating(Log::new());
        let done = Rc::new(Cell::new(0u64));
        let issue = |i: u64| {
            let c = count(&done);
            a.try_apply_then(record(i), move |r| {
                r.expect("no panic");
                c(())
            });
        };
        for i in 0..50 {
            issue(i);
        }
        a.set_policy(Policy::Lock);
        for i in 50..100 {
            issue(i);
        }
        // Back to delegation before the held calls could go: they are
        // delegated when they go, behind the first ones, in order.
        a.set_policy(Policy::Delegate);
        for i in 100..150 {
            issue(i);
        }
        while done.get() < 150 {
            gossamer::yield_now();
        }
        let log = a.apply(|v| v.clone());
        let order: Vec<u64> = log.iter().map(|e| e.0).collect();
        assert_eq!(order, (0..150).collect::<Vec<_>>(), "calls took effect out of issue order");
        assert!(log.iter().all(|e| e.1 == 1), "a call ran in place under the delegate policy");
    });
}

#[test]
fn a_pipelined_client_comes_back_in_place_under_the_adaptive_policy() {
    on_thread_0(|| {
        let props: Vec<_> = (0..16).map(|_| delegating(Log::new())).collect();
        let issued = Cell::new(0u64);
        let done = Rc::new(Cell::new(0u64));
        // A window of 256 requests in flight over 16 properties, as the
        // fetch-and-add benchmark keeps.
        let pump = |upto: u64| {
            while issued.get() < upto {
                while issued.get() < upto && issued.get() - done.get() < 256 {
                    let i = issued.get();
                    props[(i % 16) as usize].apply_then(record(i), count(&done));
                    issued.set(i + 1);
                }
                gossamer::yield_now();
            }
        };
        pump(4000);
        for p in &props {
            p.set_policy(Policy::Adaptive);
            p.set_policy(Policy::Lock);
            p.set_policy(Policy::Adaptive);
        }
        let switched = issued.get();
        pump(switched + 8000);
        while done.get() < issued.get() {
            gossamer::yield_now();
        }
        let mut tail_in_place = 0;
        let mut total = 0;
        for (k, p) in props.iter().enumerate() {
            let log = p.apply(|v| v.clone());
            let order: Vec<u64> = log.iter().map(|e| e.0).collect();
            let want: Vec<u64> = (0..issued.get()).filter(|i| i % 16 == k as u64).collect();
            assert_eq!(order, want, "property {k}: calls took effect out of issue order");
            total += log.len() as u64;
            // The second half of the calls made after the switch.
            let late = switched + (issued.get() - switched) / 2;
            tail_in_place += log.iter().filter(|e| e.0 >= late && e.1 == 0).count() as u64;
            assert!(log.iter().filter(|e| e.0 >= late).all(|e| e.1 == 0), "property {k}: still delegated");
        }
        assert_eq!(total, issued.get());
        assert_eq!(tail_in_place, 4000);
    });
}

#[test]
fn calls_with_an_argument_that_owns_heap_data_are_held_too() {
    on_thread_0(|| {
        let a = delegating(Vec::<String>::new());
        let push = |v: &mut Vec<String>, s: String| {
            v.push(s);
            v.len()
        };
        let done = Rc::new(Cell::new(0usize));
        for i in 0..40 {
            let d = done.clone();
            a.apply_with_then(push, format!("delegated {i}"), move |n| d.set(n));
        }
        a.set_policy(Policy::Lock);
        for i in 0..40 {
            let d = done.clone();
            a.apply_with_then(push, format!("held {i}"), move |n| d.set(n));
        }
        assert_eq!(a.apply_with(push, "last".to_string()), 81);
        assert_eq!(done.get(), 80);
        let want: Vec<String> = (0..40)
            .map(|i| format!("delegated {i}"))
            .chain((0..40).map(|i| format!("held {i}")))
            .chain(["last".to_string()])
            .collect();
        assert_eq!(a.apply(|v| v.clone()), want);
    });
}

static DROPS: AtomicUsize = AtomicUsize::new(0);

struct Tracked(u64);

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_runtime_that_stops_with_calls_held_drops_them_and_the_value_once() {
    within(60, || {
        let rt = rt(2);
        let ran = std::sync::Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        rt.spawn_on(0, move || {
            let a = delegating(Tracked(0));
            let issue = || {
                let r = r.clone();
                a.apply_then(
                    |t| t.0 += 1,
                    move |()| {
                        r.fetch_add(1, Ordering::SeqCst);
                    },
                );
            };
            (0..100).for_each(|_| issue());
            a.set_policy(Policy::Lock);
            (0..100).for_each(|_| issue());
            // Returns with calls held and requests in flight.
        })
        .join()
        .unwrap();
        drop(rt);
        assert!(ran.load(Ordering::SeqCst) <= 200);
        assert_eq!(DROPS.load(Ordering::SeqCst), 1, "the value was not dropped exactly once");
    });
}
