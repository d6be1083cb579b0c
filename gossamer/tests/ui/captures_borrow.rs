fn main() {
    let rt = gossamer::Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let t = gossamer::local_trustee().entrust(Vec::<String>::new());
        let name = String::from("borrowed");
        let r = &name;
        t.apply(|v| v.push(r.clone()));
    });
}
