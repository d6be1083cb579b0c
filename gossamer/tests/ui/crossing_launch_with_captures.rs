// `launch_with` may run in another process: its code is a `fn`.
fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let step = 5u64;
        let latch = gossamer::trustee(1).entrust(gossamer::Latch::new(0u64));
        latch.launch_with(move |v, ()| *v += step, ());
    });
}
