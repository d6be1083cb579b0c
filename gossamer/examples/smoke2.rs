fn main() {
    let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
    eprintln!("built");
    let r = rt.block_on(|| {
        eprintln!("in fiber");
        5
    });
    eprintln!("got {r}");
    let r = rt.block_on(|| {
        let ct = gossamer::local_trustee().entrust(17);
        ct.apply(|c| *c += 1);
        eprintln!("local ok");
        let remote = gossamer::trustee(1).entrust(0u64);
        remote.apply(|c| *c += 1);
        eprintln!("remote ok");
        remote.apply(|c| *c)
    });
    eprintln!("got {r}");
}
