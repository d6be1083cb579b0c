// A trust owns a share of its property: it is not `Copy`, so it travels as
// an argument (`apply_with`), never as a capture.
fn main() {
    let rt = gossamer::Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let a = gossamer::local_trustee().entrust(0u64);
        let b = gossamer::local_trustee().entrust(0u64);
        a.apply(move |v| {
            b.apply_then(|w| *w, |_| ());
            *v += 1
        });
    });
}
