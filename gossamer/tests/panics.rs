//! A panic in a delegated closure reaches its caller and leaves the
//! trustee serving; the property is not poisoned.

mod common;
use common::{rt, within};

use std::panic::{catch_unwind, AssertUnwindSafe};

#[test]
fn apply_resumes_the_panic_in_the_caller_and_the_trustee_keeps_serving() {
    within(60, || {
        let rt = rt(2);
        let t = rt.trustee(1).entrust(vec![1, 2, 3]);
        rt.block_on(move || {
            let r = catch_unwind(AssertUnwindSafe(|| {
                t.apply(|v| {
                    v.push(4); // partial update, then a panic
                    if v.len() > 3 {
                        panic!("closure failed on purpose");
                    }
                })
            }));
            let msg = *r.unwrap_err().downcast::<&str>().unwrap();
            assert_eq!(msg, "closure failed on purpose");
            // Not poisoned: the property is as the closure left it.
            assert_eq!(t.apply(|v| v.clone()), vec![1, 2, 3, 4]);
            for _ in 0..100 {
                t.apply(|v| v.push(0));
            }
            assert_eq!(t.apply(|v| v.len()), 104);
        });
    });
}

#[test]
fn a_panic_on_the_local_shortcut_also_reaches_the_caller() {
    within(60, || {
        let rt = rt(1);
        rt.block_on(|| {
            let t = gossamer::local_trustee().entrust(0);
            let r = catch_unwind(AssertUnwindSafe(|| t.apply(|_| -> u8 { panic!("local") })));
            assert!(r.is_err());
            // Delegated context was left: blocking calls work again.
            assert_eq!(t.apply(|v| *v + 1), 1);
        });
    });
}

#[test]
fn apply_then_panics_are_reported_and_try_apply_then_receives_them() {
    within(60, || {
        let rt = rt(2);
        let t = rt.trustee(1).entrust(0u32);
        let t2 = t.clone();
        let got = rt.block_on(move || {
            t2.apply_then(|_| -> u32 { panic!("async failure") }, |_| unreachable!("then must not run"));
            let got = std::rc::Rc::new(std::cell::RefCell::new(None));
            let g = got.clone();
            t2.try_apply_then(|_| -> u32 { panic!("visible failure") }, move |r| *g.borrow_mut() = Some(r));
            let g = got.clone();
            t2.apply(|_| ());
            let r = g.borrow_mut().take().expect("try_apply_then callback ran");
            r.unwrap_err().message()
        });
        assert_eq!(got, "visible failure");
        let t3 = t.clone();
        let got = rt.block_on(move || {
            let got = std::rc::Rc::new(std::cell::RefCell::new(None));
            let g = got.clone();
            t3.try_apply_with_then(
                |_, v: Vec<u8>| -> usize { panic!("with failure {}", v.len()) },
                vec![1, 2, 3],
                move |r| *g.borrow_mut() = Some(r),
            );
            t3.apply(|_| ());
            let r = got.borrow_mut().take().expect("callback ran");
            r.unwrap_err().message()
        });
        assert_eq!(got, "with failure 3");
        assert_eq!(rt.stats().unhandled_panics, 1);
        // A panicking then-callback is reported too, and the thread goes on.
        rt.block_on(move || {
            t.apply_then(|v| *v, |_| panic!("callback failure"));
            t.apply(|_| ());
        });
        assert_eq!(rt.stats().unhandled_panics, 2);
    });
}

#[test]
fn a_panicking_fiber_is_reported_by_join() {
    within(30, || {
        let rt = rt(2);
        let h = rt.spawn(|| -> u8 { panic!("fiber failed") });
        let e = h.join().unwrap_err();
        assert_eq!(e.message(), "fiber failed");
        assert_eq!(rt.block_on(|| 5), 5);
    });
}

/// What a join error must be to travel as an error: `Send + Sync +
/// 'static` and `std::error::Error`.
fn as_shared_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(e)
}

#[test]
fn a_join_error_flows_into_shared_errors_and_still_resumes_its_panic() {
    within(30, || {
        let rt = rt(2);
        let e = rt.spawn(|| -> u8 { std::panic::panic_any(17u32) }).join().unwrap_err();
        let shown = as_shared_error(rt.spawn(|| -> u8 { panic!("fiber failed") }).join().unwrap_err());
        assert_eq!(shown.to_string(), "panicked: fiber failed");
        let via_anyhow: anyhow::Error = rt.spawn(|| -> u8 { panic!("again") }).join().unwrap_err().into();
        assert_eq!(via_anyhow.to_string(), "panicked: again");
        // A shared reference crosses threads; the payload stays whole.
        std::thread::scope(|s| s.spawn(|| assert_eq!(e.message(), "<non-string panic payload>")).join().unwrap());
        let resumed = catch_unwind(AssertUnwindSafe(|| std::panic::resume_unwind(e.into_panic()))).unwrap_err();
        assert_eq!(resumed.downcast_ref::<u32>(), Some(&17));
    });
}
