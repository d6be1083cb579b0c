//! Arguments and results far larger than a slot.

mod common;
use common::{rt, within};

#[test]
fn megabyte_arguments_and_results_round_trip() {
    within(120, || {
        let rt = rt(2);
        let store = rt.trustee(1).entrust(Vec::<Vec<u8>>::new());
        let ok = rt.block_on(move || {
            for k in 0..4u8 {
                let blob: Vec<u8> = (0..(1 << 20) + k as usize).map(|i| (i as u8) ^ k).collect();
                store.apply_with(|s, b| s.push(b), blob);
            }
            // A result of 4 MiB.
            let all: Vec<u8> = store.apply(|s| s.concat());
            assert_eq!(all.len(), 4 * (1 << 20) + 6);
            let back = store.apply(|s| s[3].clone());
            back.iter().enumerate().all(|(i, &b)| b == (i as u8) ^ 3)
        });
        assert!(ok);
    });
}

#[test]
fn large_captures_and_large_by_value_results_take_the_boxed_path() {
    within(60, || {
        let rt = rt(2);
        let t = rt.trustee(1).entrust(0u64);
        rt.block_on(move || {
            let big = [7u64; 300]; // 2400 bytes captured by value: boxed
                                   // A 768-byte result by value: boxed too.
            type Big = ([u64; 32], [u64; 32], [u64; 32]);
            let r: Big = t.apply(move |v| {
                *v += big.iter().sum::<u64>();
                let mut out = ([7; 32], [8; 32], [9; 32]);
                out.0[0] = *v;
                out
            });
            assert_eq!(r.0[0], 2100);
            assert_eq!((r.0[31], r.1[0], r.2[31]), (7, 8, 9));
            // Many mid-size results in one batch force the trustee to box
            // some of them when the response slot runs short.
            let done = std::rc::Rc::new(std::cell::Cell::new(0));
            for i in 0..200u64 {
                let d = done.clone();
                // 384-byte results: a batch of them outgrows the response
                // slot, and the trustee boxes the rest.
                t.apply_then(
                    move |_| ([i; 24], [i; 24]),
                    move |a: ([u64; 24], [u64; 24])| {
                        assert_eq!(a, ([i; 24], [i; 24]));
                        d.set(d.get() + 1);
                    },
                );
            }
            t.apply(|_| ());
            assert_eq!(done.get(), 200);
        });
    });
}

#[test]
fn zero_sized_closures_and_results_work() {
    within(30, || {
        let rt = rt(2);
        let t = rt.trustee(1).entrust(());
        rt.block_on(move || {
            fn unit(_: &mut ()) {}
            for _ in 0..1000 {
                t.apply(unit);
                t.apply_then(unit, |()| ());
            }
        });
    });
}
