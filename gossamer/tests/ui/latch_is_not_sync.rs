fn main() {
    let latch = std::sync::Arc::new(gossamer::Latch::new(0u32));
    let l2 = latch.clone();
    std::thread::spawn(move || {
        *l2.lock() += 1;
    });
}
