//! Why gossamer-kv does its socket I/O in fibers inside the runtime rather
//! than on threads outside it: the cost of one delegated increment when
//! issued (1) with `apply` from a thread outside the runtime (the path an
//! I/O thread would have to take), (2) with `apply` from a fiber, and (3)
//! with `apply_then` from a fiber keeping 64 requests in flight.
//!
//! ```sh
//! cargo run --release -p gossamer-kv --example delegation_paths
//! ```

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

const N: u64 = 200_000;

fn main() {
    let rt = gossamer::Runtime::builder().workers(2).build().expect("runtime");
    let counter = rt.trustee(1).entrust(0u64);

    let start = Instant::now();
    for _ in 0..N {
        counter.apply(|c| *c += 1);
    }
    let outside = start.elapsed().as_nanos() as f64 / N as f64;

    let c = counter.clone();
    let inside = rt.block_on(move || {
        let start = Instant::now();
        for _ in 0..N {
            c.apply(|c| *c += 1);
        }
        start.elapsed().as_nanos() as f64 / N as f64
    });

    let c = counter.clone();
    let pipelined = rt.block_on(move || {
        let done = Rc::new(Cell::new(0u64));
        let start = Instant::now();
        let mut issued = 0;
        while done.get() < N {
            while issued < N && issued - done.get() < 64 {
                let d = done.clone();
                c.apply_then(|c| *c += 1, move |()| d.set(d.get() + 1));
                issued += 1;
            }
            gossamer::yield_now();
        }
        start.elapsed().as_nanos() as f64 / N as f64
    });

    println!("apply from a thread outside the runtime: {outside:>8.0} ns per request");
    println!("apply from a fiber:                      {inside:>8.0} ns per request");
    println!("apply_then from a fiber, 64 in flight:   {pipelined:>8.0} ns per request");
}
