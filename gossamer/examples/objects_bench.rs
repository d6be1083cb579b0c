//! Barrier latency and broadcast throughput of `gossamer::objects`, one
//! worker thread per process, for comparison with Open MPI's `MPI_Barrier`
//! and `MPI_Ibcast` (see `scripts/mpi-objects.sh`, which runs both).
//!
//! `GOSSAMER_PROCESSES=4 cargo run --release --example objects_bench -- [ROUNDS] [MESSAGES] [REPS]`
//!
//! * barrier: every thread waits at one `Barrier` ROUNDS times per
//!   repetition; thread 0 times each repetition; prints the median time
//!   per barrier;
//! * broadcast: thread 0 writes MESSAGES 64-byte messages into a `ring`
//!   (capacity 64) read by one thread of every other process; a repetition
//!   ends when every reader has read them all (a barrier); prints the
//!   median messages per second.
//!
//! Output lines: `barrier_us_median <f>` and `bcast_msgs_per_s_median <f>`.

use std::time::Instant;

use gossamer::objects::{ring, Barrier, RingReader};

const SIZE: usize = 64;
const CAPACITY: usize = 64;

fn args() -> (u64, u64, usize) {
    let a: Vec<u64> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    (a.first().copied().unwrap_or(2000), a.get(1).copied().unwrap_or(20000), a.get(2).copied().unwrap_or(7) as usize)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn gsm_main() {
    let (rounds, messages, reps) = args();
    let n = gossamer::threads();
    let barrier = Barrier::new();
    let others: Vec<_> = (1..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |(b, total): (Barrier, u64)| {
                    for _ in 0..total {
                        b.wait();
                    }
                },
                (barrier.clone(), rounds * (reps as u64 + 1)),
            )
        })
        .collect();
    for _ in 0..rounds {
        barrier.wait(); // warm-up
    }
    let mut per_barrier = vec![];
    for _ in 0..reps {
        let start = Instant::now();
        for _ in 0..rounds {
            barrier.wait();
        }
        per_barrier.push(start.elapsed().as_secs_f64() * 1e6 / rounds as f64);
    }
    for f in others {
        f.join().unwrap();
    }
    println!("processes {} threads {n}", gossamer::topology().processes.len());
    println!("barrier_us_median {:.3}", median(per_barrier));
    if n < 2 {
        return;
    }

    let readers: Vec<usize> = (1..n).collect();
    let (mut writer, ends) = ring::<Vec<u8>>(&readers, CAPACITY);
    let fibers: Vec<_> = ends
        .into_iter()
        .map(|end| {
            gossamer::spawn_with(
                end.inbox_thread(),
                |(mut r, b, per_rep, reps): (RingReader<Vec<u8>>, Barrier, u64, usize)| {
                    for _ in 0..=reps {
                        for _ in 0..per_rep {
                            let m = r.read().expect("the ring closed early");
                            assert_eq!(m.len(), SIZE);
                        }
                        b.wait();
                    }
                },
                (end, barrier.clone(), messages, reps),
            )
        })
        .collect();
    let mut rates = vec![];
    for rep in 0..=reps {
        let start = Instant::now();
        for i in 0..messages {
            writer.write(vec![i as u8; SIZE]);
        }
        barrier.wait();
        if rep > 0 {
            rates.push(messages as f64 / start.elapsed().as_secs_f64()); // rep 0 warms up
        }
    }
    drop(writer);
    for f in fibers {
        f.join().unwrap();
    }
    println!("bcast_msgs_per_s_median {:.0}", median(rates));
}

fn main() {
    // One thread per process unless OBJECTS_THREADS says otherwise.
    let threads = std::env::var("OBJECTS_THREADS").ok().and_then(|s| s.parse().ok());
    gossamer::main(gsm_main, threads.unwrap_or_else(|| gossamer::rack::planned_processes().unwrap_or(1)));
}
