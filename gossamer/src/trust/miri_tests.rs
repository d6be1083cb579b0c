//! Single-process paths of the trust layer, kept small enough for Miri
//! (where fibers fall back to threads): reference counting across clones
//! and drops on two workers, `then` callbacks and panics, `launch` on a
//! latch, and properties dropped at shutdown. Under Miri these check the
//! unsafe code behind them for aliasing, use after free and leaks; they
//! also run in the plain test suite.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::{Latch, Runtime};

/// A property that counts its drops.
struct Counted {
    value: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn runtime() -> Runtime {
    Runtime::builder().workers(2).build().unwrap()
}

#[test]
fn a_property_is_dropped_once_after_its_last_trust_on_either_worker() {
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let seen = rt.block_on(move || {
        let t = crate::trustee(1).entrust(Counted { value: 0, drops: d.clone() });
        let c = t.clone();
        let f = crate::spawn_on(1, move || {
            c.apply(|p| p.value += 1);
            drop(c);
        });
        f.join().unwrap();
        let seen = std::rc::Rc::new(std::cell::Cell::new(0));
        let s = seen.clone();
        t.apply_then(|p| p.value + 1, move |v| s.set(v));
        let v = t.apply(|p| p.value);
        assert_eq!(d.load(Ordering::SeqCst), 0, "dropped while a trust remained");
        drop(t);
        while d.load(Ordering::SeqCst) == 0 {
            crate::yield_now();
        }
        (v, seen.get())
    });
    assert_eq!(seen, (1, 2));
    assert!(rt.shutdown().clean);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_panic_in_a_delegated_closure_reaches_try_apply_then_and_the_property_lives_on() {
    let rt = runtime();
    let got = rt.block_on(|| {
        let t = crate::trustee(1).entrust(5u64);
        let out = std::rc::Rc::new(std::cell::Cell::new(None));
        let o = out.clone();
        t.try_apply_then(
            |v| -> u64 {
                *v += 1;
                panic!("on purpose")
            },
            move |r| o.set(Some(r.is_err())),
        );
        let v = t.apply(|v| *v);
        while out.get().is_none() {
            crate::yield_now();
        }
        (v, out.get())
    });
    assert_eq!(got, (6, Some(true)));
    assert!(rt.shutdown().clean);
}

#[test]
fn launch_holds_the_latch_while_it_applies_elsewhere() {
    let rt = runtime();
    let v = rt.block_on(|| {
        let other = crate::trustee(0).entrust(10u64);
        let latched = crate::trustee(1).entrust(Latch::new(1u64));
        latched.launch_with(
            |v, other: crate::Trust<u64>| {
                *v += other.apply(|o| *o);
                *v
            },
            other,
        )
    });
    assert_eq!(v, 11);
    assert!(rt.shutdown().clean);
}

#[test]
fn properties_still_entrusted_at_shutdown_are_dropped_once() {
    let rt = runtime();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let kept = rt.block_on(move || {
        let a = crate::trustee(0).entrust(Counted { value: 1, drops: d.clone() });
        let b = crate::trustee(1).entrust(Counted { value: 2, drops: d });
        assert_eq!(a.apply(|p| p.value) + b.apply(|p| p.value), 3);
        (a, b)
    });
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    // Trusts that outlive their runtime are inert.
    drop(kept);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}
