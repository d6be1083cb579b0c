fn main() {
    let rt = gossamer::Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let t = gossamer::local_trustee().entrust(0u64);
        let local = 5u64;
        let r = &local;
        t.apply_then(move |v| *v + *r, |_| ());
    });
}
