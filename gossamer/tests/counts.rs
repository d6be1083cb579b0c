//! Exact final counts with many threads and many fibers per thread.

mod common;
use common::{rt, within};

use std::cell::Cell;
use std::rc::Rc;

#[test]
fn apply_from_many_fibers_on_every_thread_counts_exactly() {
    within(120, || {
        let rt = rt(4);
        let counters: Vec<_> = (0..4).map(|i| rt.trustee(i).entrust(0u64)).collect();
        let handles: Vec<_> = (0..4)
            .flat_map(|w| {
                let counters = counters.clone();
                (0..16).map(move |f| (w, f, counters.clone()))
            })
            .map(|(w, f, counters)| {
                rt.spawn_on(w, move || {
                    for i in 0..500u64 {
                        let c = &counters[((i + f) % 4) as usize];
                        let before = c.apply(|v| {
                            *v += 1;
                            *v
                        });
                        assert!(before >= 1);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let total: u64 = rt.block_on(move || counters.iter().map(|c| c.apply(|v| *v)).sum());
        assert_eq!(total, 4 * 16 * 500);
    });
}

#[test]
fn apply_then_counts_exactly_and_callbacks_run_on_the_issuing_thread() {
    within(120, || {
        let rt = rt(3);
        let c = rt.trustee(2).entrust(0u64);
        let n = 20_000u64;
        let sum: u64 = (0..2)
            .map(|w| {
                let c = c.clone();
                rt.spawn_on(w, move || {
                    let done = Rc::new(Cell::new(0u64));
                    for _ in 0..n {
                        let d = done.clone();
                        c.apply_then(
                            |v| *v += 1,
                            move |()| {
                                assert_eq!(gossamer::current_thread(), Some(w));
                                d.set(d.get() + 1)
                            },
                        );
                    }
                    while done.get() < n {
                        gossamer::yield_now();
                    }
                    done.get()
                })
            })
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(sum, 2 * n);
        assert_eq!(rt.block_on(move || c.apply(|v| *v)), 2 * n);
        assert_eq!(rt.stats().unhandled_panics, 0);
    });
}

#[test]
fn dedicated_trustees_serve_and_pool_entrust_places_on_them() {
    within(120, || {
        let rt = gossamer::Runtime::builder().workers(3).dedicated_trustees(1).build().unwrap();
        let t = rt.entrust(0u64);
        assert_eq!(t.trustee().index(), 2);
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let t = t.clone();
                rt.spawn(move || {
                    assert!(gossamer::current_thread().unwrap() < 2, "fibers avoid dedicated trustees");
                    for _ in 0..1000 {
                        t.apply(|v| *v += 1);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(t.apply(|v| *v), 8000);
    });
}

#[test]
fn threads_outside_the_runtime_can_apply() {
    within(60, || {
        let rt = rt(2);
        let t = rt.entrust(Vec::<u32>::new());
        let ts: Vec<_> = (0..3)
            .map(|k| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        t.apply(move |v| v.push(k * 1000 + i));
                    }
                })
            })
            .collect();
        for th in ts {
            th.join().unwrap();
        }
        assert_eq!(t.apply(|v| v.len()), 300);
    });
}

#[test]
fn a_single_worker_runtime_works_through_the_local_shortcut() {
    within(30, || {
        let rt = rt(1);
        let v = rt.block_on(|| {
            let t = gossamer::entrust(1u64);
            let hs: Vec<_> = (0..10)
                .map(|_| {
                    let t = t.clone();
                    gossamer::spawn(move || {
                        for _ in 0..100 {
                            t.apply(|v| *v += 1);
                            gossamer::yield_now();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            t.apply(|v| *v)
        });
        assert_eq!(v, 1001);
    });
}

#[test]
fn a_fiber_using_only_its_own_trustee_does_not_starve_remote_clients() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    within(60, || {
        let rt = rt(2);
        let t = rt.trustee(0).entrust(0u64);
        let t2 = t.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        // A fiber on worker 0 hammers its own trustee through the local
        // shortcut, never waiting on anything, until the remote client is
        // done: the worker must still serve the remote client's requests.
        let local = rt.spawn_on(0, move || {
            let mut n = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                t.apply(|v| *v += 1);
                n += 1;
            }
            n
        });
        let remote = rt.spawn_on(1, move || {
            for _ in 0..2000 {
                t2.apply(|v| *v += 1);
            }
        });
        remote.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        assert!(local.join().unwrap() > 0);
    });
}
