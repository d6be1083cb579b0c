//! Figure 3 of the thesis: the asynchronous form of Figure 1. `apply_then`
//! returns at once; the second closure runs on this thread when the result
//! arrives from the trustee (here a trustee on another thread).

use std::cell::Cell;
use std::rc::Rc;

fn main() {
    let rt = gossamer::Runtime::builder().workers(2).build().expect("runtime");
    let seen = rt.block_on(|| {
        let trustee = gossamer::trustee(1);
        let ct = trustee.entrust(17); // shared counter set to 17
        let seen = Rc::new(Cell::new(0));
        let s = seen.clone();
        ct.apply_then(
            |c| {
                *c += 1;
                *c
            }, // increment the counter and return its value
            move |val| {
                assert!(val == 18);
                s.set(val)
            }, // check the return value once received
        );
        println!("figure 3: apply_then returned before the result arrived (seen = {})", seen.get());
        while seen.get() == 0 {
            gossamer::yield_now();
        }
        seen.get()
    });
    println!("figure 3: the then-closure received {seen}");
}
