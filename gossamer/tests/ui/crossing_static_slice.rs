// A `&'static [u8]` cannot be the data sent to a fiber in another process.
static TABLE: [u8; 3] = [1, 2, 3];

fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let bytes: &'static [u8] = &TABLE;
        let _ = gossamer::spawn_with(1, |b: &'static [u8]| b.len(), bytes);
    });
}
