fn main() {
    let rt = gossamer::Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let t = gossamer::local_trustee().entrust(Vec::<String>::new());
        let name = String::from("owned, but behind a pointer");
        t.apply(move |v| v.push(name));
    });
}
