// A `Copy` struct holding a reference: serde cannot rebuild it in another
// process, so it cannot be a result that travels back.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Labelled<'a> {
    label: &'a str,
    weight: u32,
}

fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let t = gossamer::entrust_on(1, 0u64);
        let l: Labelled<'static> = t.apply(|c| Labelled { label: "static", weight: *c as u32 });
        println!("{}", l.weight);
    });
}
