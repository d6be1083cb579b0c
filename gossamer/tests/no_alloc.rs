//! The delegation fast path does not allocate per request: a counting
//! global allocator watches a steady stream of `apply` and `apply_then`.

mod common;
use common::within;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_delegation_does_not_allocate() {
    within(120, || {
        let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
        let (apply_allocs, then_allocs, n) = rt.block_on(|| {
            let t = gossamer::trustee(1).entrust([0u64; 4]);
            let local = gossamer::local_trustee().entrust(0u64);
            let done = std::rc::Rc::new(std::cell::Cell::new(0u64));
            let round = |n: u64| {
                for i in 0..n {
                    let v = t.apply(move |a| {
                        a[(i % 4) as usize] += i;
                        a[0]
                    });
                    std::hint::black_box(v);
                    local.apply(|x| *x += 1);
                }
            };
            let round_then = |n: u64| {
                for i in 0..n {
                    let d = done.clone();
                    t.apply_then(move |a| a[(i % 4) as usize] ^ i, move |v| d.set(d.get() + (v & 1)));
                    if i % 64 == 0 {
                        gossamer::yield_now();
                    }
                }
                t.apply(|_| ());
            };
            // Warm up: buffers grow to their steady size.
            round(20_000);
            round_then(20_000);
            let n = 50_000;
            let a0 = ALLOCS.load(Ordering::Relaxed);
            round(n);
            let a1 = ALLOCS.load(Ordering::Relaxed);
            round_then(n);
            let a2 = ALLOCS.load(Ordering::Relaxed);
            (a1 - a0, a2 - a1, n)
        });
        // Rare buffer growth is allowed; one allocation per request is not.
        assert!(apply_allocs < 16, "{apply_allocs} allocations for {n} apply round trips");
        assert!(then_allocs < 16, "{then_allocs} allocations for {n} apply_then requests");
    });
}
