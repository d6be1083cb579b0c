// The attribute takes no arguments; serde's own options go in `#[serde(..)]`.
#[gossamer::transferable(rename_all = "camelCase")]
struct Stats {
    hits: u64,
}

fn main() {
    let _ = Stats { hits: 1 }.hits;
}
