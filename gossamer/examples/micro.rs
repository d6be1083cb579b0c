//! Micro-figures of the runtime, printed as a table: `apply` round trip
//! between two threads, single-trustee throughput, the local-trustee
//! shortcut against a direct call, fiber switch cost, CPU used by an idle
//! runtime, and the latency of the first request after an idle period.
//!
//! `cargo run --release --example micro` (add `-- --quick` for a short run).
//! Each figure is the median of several runs.

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use gossamer::Runtime;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// CPU time (user + system) of this process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (runs, n) = if quick { (3, 100_000u64) } else { (5, 1_000_000u64) };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    println!(
        "gossamer micro-figures: 2 workers on {cores} cores, median of {runs} runs, asymmetric fences: {}",
        rt.asymmetric_fences()
    );
    println!("{:<48} {:>14}", "figure", "value");

    let mut rtt = vec![];
    let mut tput_fibers = vec![];
    let mut tput_then = vec![];
    let mut local = vec![];
    let mut direct = vec![];
    let mut switch = vec![];
    for _ in 0..runs {
        let (a, b, c, d, e, f) = rt.block_on(move || {
            let remote = gossamer::trustee(1).entrust(0u64);
            // Round trip: one fiber, one request at a time.
            let m = n / 10;
            let t0 = Instant::now();
            for _ in 0..m {
                remote.apply(|c| *c += 1);
            }
            let rtt_ns = t0.elapsed().as_nanos() as f64 / m as f64;

            // Throughput with 128 fibers each issuing `apply`.
            let per = n / 128;
            let t0 = Instant::now();
            let hs: Vec<_> = (0..128)
                .map(|_| {
                    let r = remote.clone();
                    gossamer::spawn(move || {
                        for _ in 0..per {
                            r.apply(|c| *c += 1);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let fibers_mops = (per * 128) as f64 / t0.elapsed().as_secs_f64() / 1e6;

            // Throughput with one fiber streaming `apply_then`.
            let done = Rc::new(Cell::new(0u64));
            let t0 = Instant::now();
            for i in 0..n {
                let d = done.clone();
                remote.apply_then(|c| *c += 1, move |()| d.set(d.get() + 1));
                if i % 4096 == 4095 {
                    gossamer::yield_now();
                }
            }
            while done.get() < n {
                gossamer::yield_now();
            }
            let then_mops = n as f64 / t0.elapsed().as_secs_f64() / 1e6;

            // Local shortcut against a direct call.
            let mine = gossamer::local_trustee().entrust(0u64);
            let t0 = Instant::now();
            for _ in 0..n {
                mine.apply(|c| *c += 1);
            }
            let local_ns = t0.elapsed().as_nanos() as f64 / n as f64;
            let mut x = 0u64;
            let t0 = Instant::now();
            for _ in 0..n {
                let c = black_box(&mut x);
                *c += 1;
            }
            let direct_ns = t0.elapsed().as_nanos() as f64 / n as f64;

            // Fiber switch: two fibers yielding to each other.
            let t0 = Instant::now();
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    gossamer::spawn(move || {
                        for _ in 0..m {
                            gossamer::yield_now();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let switch_ns = t0.elapsed().as_nanos() as f64 / (2 * m) as f64;
            let total = remote.apply(|c| *c);
            assert_eq!(total, m + per * 128 + n, "counter mismatch");
            (rtt_ns, fibers_mops, then_mops, local_ns, direct_ns, switch_ns)
        });
        rtt.push(a);
        tput_fibers.push(b);
        tput_then.push(c);
        local.push(d);
        direct.push(e);
        switch.push(f);
    }
    println!("{:<48} {:>11.0} ns", "apply round trip, worker 0 -> trustee 1", median(rtt));
    println!("{:<48} {:>10.1} Mops", "one trustee, 128 fibers using apply", median(tput_fibers));
    println!("{:<48} {:>10.1} Mops", "one trustee, one fiber using apply_then", median(tput_then));
    println!("{:<48} {:>11.1} ns", "local-trustee shortcut (apply on own trustee)", median(local));
    println!("{:<48} {:>11.1} ns", "direct increment, for comparison", median(direct));
    println!("{:<48} {:>11.1} ns", "fiber switch (yield_now to another fiber)", median(switch));

    // Idle: CPU used over one second with nothing to do.
    std::thread::sleep(Duration::from_millis(300));
    let c0 = cpu_time();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let idle = (cpu_time() - c0).as_secs_f64() / t0.elapsed().as_secs_f64();
    println!("{:<48} {:>9.2} % of a core", "CPU used by the idle runtime (2 workers)", idle * 100.0);

    // First request after idle: the trustee has gone to sleep.
    let lat = rt.block_on(move || {
        let remote = gossamer::trustee(1).entrust(0u64);
        let mut v = vec![];
        for _ in 0..runs.max(5) {
            // Block this worker's thread so that the trustee goes idle and sleeps.
            std::thread::sleep(Duration::from_millis(200));
            let t0 = Instant::now();
            remote.apply(|c| *c += 1);
            v.push(t0.elapsed().as_nanos() as f64 / 1000.0);
        }
        median(v)
    });
    println!("{:<48} {:>11.1} us", "first apply after 200 ms idle (trustee asleep)", lat);
}
