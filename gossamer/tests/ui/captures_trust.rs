fn main() {
    let rt = gossamer::Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let a = gossamer::local_trustee().entrust(0u64);
        let b = gossamer::local_trustee().entrust(0u64);
        a.apply(move |v| *v += b.apply_then(|w| *w, |_| ()) as u64);
    });
}
