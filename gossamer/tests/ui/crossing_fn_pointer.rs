// A `fn` pointer is a code address in the sender's process.
fn answer() -> u64 {
    42
}

fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let t = gossamer::entrust_on(1, 0u64);
        let f: fn() -> u64 = answer;
        t.apply_with(|c, f: fn() -> u64| *c += f(), f);
    });
}
