// A `&'static str` is an address in the sender: it cannot be the data that
// crosses into another process (an `apply_with` argument).
fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let t = gossamer::entrust_on(1, 0u64);
        let word: &'static str = "greeting";
        t.apply_with(|c, w: &'static str| *c += w.len() as u64, word);
    });
}
