// A delegated closure's result leaves the trustee: it cannot borrow from
// the property.
struct Buffers {
    data: Vec<u8>,
}

fn main() {
    gossamer::Runtime::builder().workers(2).build().unwrap().block_on(|| {
        let t = gossamer::local_trustee().entrust(Buffers { data: vec![1, 2, 3] });
        let data = t.apply(|b| &b.data);
        println!("{}", data.len());
    });
}
