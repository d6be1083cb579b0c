//! One program over several processes: a counter on every thread of every
//! process, and a fiber on every thread that increments all of them.
//!
//! `GOSSAMER_PROCESSES=3 cargo run --release --example rack_counters`

use gossamer::Trust;

const ROUNDS: u64 = 1000;

fn gsm_main() {
    let topo = gossamer::topology();
    let n = topo.threads();
    println!(
        "rank {} runs gsm_main; the program has {} processes and {n} threads: {:?}",
        topo.rank,
        topo.processes.len(),
        topo.processes
    );
    let counters: Vec<Trust<u64>> = (0..n).map(|t| gossamer::entrust_on(t, 0u64)).collect();
    let fibers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |cs: Vec<Trust<u64>>| {
                    for _ in 0..ROUNDS {
                        for c in &cs {
                            c.apply_with(|v, ()| *v += 1, ());
                        }
                    }
                    (gossamer::rack::rank(), gossamer::current_thread().unwrap(), gossamer::rack::load_address())
                },
                counters.clone(),
            )
        })
        .collect();
    for f in fibers {
        let (rank, thread, base) = f.join().expect("a fiber panicked");
        println!("fiber on thread {thread} (rank {rank}, code at {base:#x}) done");
    }
    let totals: Vec<u64> = counters.iter().map(|c| c.apply_with(|v, ()| *v, ())).collect();
    assert!(totals.iter().all(|&t| t == n as u64 * ROUNDS), "lost updates: {totals:?}");
    println!("every counter reached {} = {n} fibers x {ROUNDS} rounds", totals[0]);
}

fn main() {
    gossamer::main(gsm_main, 6);
}
