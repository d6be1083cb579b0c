//! Requests from one client to one trustee execute in issue order.

mod common;
use common::{rt, within};

#[test]
fn requests_from_each_fiber_run_in_issue_order() {
    within(120, || {
        let rt = rt(3);
        // The property logs (fiber, sequence) pairs in the order it sees them.
        let log = rt.trustee(2).entrust(Vec::<(u32, u32)>::new());
        let hs: Vec<_> = (0..12u32)
            .map(|f| {
                let log = log.clone();
                rt.spawn_on((f % 2) as usize, move || {
                    for s in 0..300u32 {
                        if s % 3 == 0 {
                            log.apply(move |l| l.push((f, s)));
                        } else {
                            log.apply_then(move |l| l.push((f, s)), |()| {});
                        }
                        if s % 17 == 0 {
                            gossamer::yield_now();
                        }
                    }
                    // A final apply waits for everything issued before it.
                    log.apply(|_| ());
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let entries = log.apply(|l| l.clone());
        assert_eq!(entries.len(), 12 * 300);
        let mut next = [0u32; 12];
        for (f, s) in entries {
            assert_eq!(s, next[f as usize], "fiber {f} saw request {s} out of order");
            next[f as usize] += 1;
        }
    });
}

#[test]
fn then_callbacks_run_in_response_order() {
    within(60, || {
        let rt = rt(2);
        let t = rt.trustee(1).entrust(0u32);
        let seen = rt.block_on(move || {
            let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            for i in 0..5000u32 {
                let s = seen.clone();
                t.apply_then(
                    move |v| {
                        *v += 1;
                        (*v, i)
                    },
                    move |(v, i)| s.borrow_mut().push((v, i)),
                );
            }
            t.apply(|_| ());
            let v = seen.borrow().clone();
            v
        });
        assert_eq!(seen.len(), 5000);
        for (k, (v, i)) in seen.into_iter().enumerate() {
            assert_eq!((v as usize, i as usize), (k + 1, k));
        }
    });
}
