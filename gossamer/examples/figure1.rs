//! Figure 1 of the thesis: a counter entrusted to the local trustee,
//! initialised to 17, incremented once, then read back.

fn main() {
    let rt = gossamer::Runtime::builder().workers(2).build().expect("runtime");
    let value = rt.block_on(|| {
        let ct = gossamer::local_trustee().entrust(17); // ct: Trust<i32>
        ct.apply(|c| *c += 1); // c: &mut i32
        assert!(ct.apply(|c| *c) == 18);
        ct.apply(|c| *c)
    });
    println!("figure 1: entrusted 17, incremented once through apply: {value}");
}
