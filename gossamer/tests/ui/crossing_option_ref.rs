// `Option<&'static T>` holds an address as much as `&'static T` does.
static NUMBER: u64 = 9;

fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let t = gossamer::entrust_on(1, 0u64);
        let maybe: Option<&'static u64> = Some(&NUMBER);
        t.apply_with(|c, m: Option<&'static u64>| *c += m.copied().unwrap_or(0), maybe);
    });
}
