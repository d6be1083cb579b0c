// A raw pointer is neither `Send` nor serializable: it crosses nowhere.
fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let t = gossamer::entrust_on(1, 0u64);
        let mut local = 5u64;
        let p: *mut u64 = &mut local;
        t.apply_with(|c, p: *mut u64| *c += unsafe { *p }, p);
    });
}
