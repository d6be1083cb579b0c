// `spawn_with` may start its fiber in another process: its code is a `fn`,
// and data goes as the argument, never as a capture.
fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let step = 5u64;
        let h = gossamer::spawn_with(1, move |n: u64| n + step, 1);
        let t = gossamer::entrust_on(1, 0u64);
        let s = gossamer::spawn_to(&t, move |t| t.apply(|v| *v) + step);
        let _ = (h.join(), s.join());
    });
}
