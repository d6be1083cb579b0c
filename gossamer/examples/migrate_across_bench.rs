//! What a move costs the clients in another process: throughput of
//! `apply_with` from the fibers of rank 1 to a property of rank 0 that
//! never moved, beside one that was moved to another trustee of rank 0
//! (whose first trustee relays a thread's first requests and tells it
//! where the value is; the thread then sends the others there by its
//! route, see `trust::migrate`). The two are measured in turns, in the
//! same run.
//!
//! `GOSSAMER_PROCESSES=2 cargo run --release --example migrate_across_bench -- [MS] [FIBERS] [REPS]`
//!
//! Two processes of 2 threads each; MS milliseconds per measurement
//! (default 300), FIBERS client fibers per thread of rank 1 (default 32),
//! REPS measurements of each kind (default 5). Output lines:
//! `unmoved_kops_median <f>`, `moved_kops_median <f>`,
//! `moved_over_unmoved <f>` and `relayed_requests <n>` (requests rank 0
//! relayed in the whole run, from `gossamer::stats`).

use std::time::{Duration, Instant};

use gossamer::Trust;

const THREADS: usize = 4;

fn args() -> (u64, usize, usize) {
    let a: Vec<u64> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    (
        a.first().copied().unwrap_or(300),
        a.get(1).copied().unwrap_or(32) as usize,
        a.get(2).copied().unwrap_or(5) as usize,
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// On a thread of rank 1: `fibers` fibers that each increment the counter
/// until `ms` milliseconds have passed; the increments they made.
fn clients((counter, fibers, ms): (Trust<u64>, usize, u64)) -> u64 {
    let end = Instant::now() + Duration::from_millis(ms);
    let me = gossamer::current_thread().expect("a worker");
    let hs: Vec<_> = (0..fibers)
        .map(|_| {
            let c = counter.clone();
            gossamer::spawn_on(me, move || {
                let mut n = 0u64;
                while Instant::now() < end {
                    c.apply_with(|v, by: u64| *v += by, 1);
                    n += 1;
                }
                n
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().expect("a client fiber")).sum()
}

/// Thousands of increments per second from both threads of rank 1.
fn measure(counter: &Trust<u64>, fibers: usize, ms: u64) -> f64 {
    let start = Instant::now();
    let hs: Vec<_> = (2..THREADS).map(|t| gossamer::spawn_with(t, clients, (counter.clone(), fibers, ms))).collect();
    let n: u64 = hs.into_iter().map(|h| h.join().expect("a client thread")).sum();
    n as f64 / start.elapsed().as_secs_f64() / 1e3
}

fn gsm_main() {
    let (ms, fibers, reps) = args();
    assert_eq!(gossamer::topology().processes.len(), 2, "run with GOSSAMER_PROCESSES=2");
    let unmoved = gossamer::trustee(0).entrust(0u64);
    let moved = gossamer::trustee(0).entrust(0u64);
    moved.migrate_to(gossamer::trustee(1));
    println!("processes 2 threads {THREADS} fibers per client thread {fibers} ms {ms} reps {reps}");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    // One warm-up of each, then the measurements in turns.
    for rep in 0..=reps {
        let (x, y) = (measure(&unmoved, fibers, ms), measure(&moved, fibers, ms));
        if rep > 0 {
            println!("rep {rep}: unmoved {x:.1} kops/s, moved {y:.1} kops/s");
            a.push(x);
            b.push(y);
        }
    }
    let (x, y) = (median(a), median(b));
    println!("unmoved_kops_median {x:.1}");
    println!("moved_kops_median {y:.1}");
    println!("moved_over_unmoved {:.3}", y / x);
    println!("relayed_requests {}", gossamer::stats().relayed_requests);
}

fn main() {
    gossamer::main(gsm_main, THREADS);
}
