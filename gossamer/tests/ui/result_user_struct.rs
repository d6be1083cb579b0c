// A type of the user's own as a result: it needs serde's traits, which
// `#[gossamer::transferable]` derives.
struct Stats {
    hits: u64,
}

fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let t = gossamer::entrust_on(1, 0u64);
        let s = t.apply_with(|c, ()| Stats { hits: *c }, ());
        println!("{}", s.hits);
    });
}
