use std::time::Instant;
fn main() {
    let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
    let r = rt.block_on(|| {
        let ct = gossamer::local_trustee().entrust(17);
        ct.apply(|c| *c += 1);
        assert_eq!(ct.apply(|c| *c), 18);
        let remote = gossamer::trustee(1).entrust(0u64);
        let t0 = Instant::now();
        let n = 2000;
        for _ in 0..n {
            remote.apply(|c| *c += 1);
        }
        let dt = t0.elapsed();
        println!("sequential apply rtt: {:?}/op", dt / n);
        let mut hs = vec![];
        for _ in 0..64 {
            let r = remote.clone();
            hs.push(gossamer::spawn(move || {
                for _ in 0..20000 {
                    r.apply(|c| *c += 1);
                }
            }));
        }
        let t0 = Instant::now();
        for h in hs {
            h.join().unwrap();
        }
        let dt = t0.elapsed();
        println!("64 fibers: {:.1} Mops/s", 64.0 * 20000.0 / dt.as_secs_f64() / 1e6);
        let t0 = Instant::now();
        let m = 2_000_000u64;
        for _ in 0..m {
            remote.apply_then(
                |c| {
                    *c += 1;
                },
                |_| {},
            );
        }
        let v = remote.apply(|c| *c);
        println!("apply_then: {:.1} Mops/s", m as f64 / t0.elapsed().as_secs_f64() / 1e6);
        v
    });
    println!("{r}");
}
