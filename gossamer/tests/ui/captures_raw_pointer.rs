fn main() {
    let rt = gossamer::Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let t = gossamer::local_trustee().entrust(0u64);
        let mut local = 5u64;
        let p: *mut u64 = &mut local;
        t.apply(move |v| *v += unsafe { *p });
    });
}
