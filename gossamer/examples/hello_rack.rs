//! Hello from every thread of a program over several processes or hosts:
//! a fiber on each thread prints its rank, host and thread.
//!
//! `GOSSAMER_PROCESSES=2 cargo run --example hello_rack` (one host), or
//! `gossamer run --hosts a,b,c -n 3 --secret-file ~/.gossamer/secret -- target/debug/examples/hello_rack`
//!
//! Environment: `GOSSAMER_THREADS` (worker threads of the whole program;
//! default one per rank, however the ranks were started: a process count,
//! `gossamer run`, Slurm or Open MPI), `HELLO_CRASH_RANK=r` (rank r exits with status 3
//! after start), `HELLO_SLEEP_MS` (rank 0 stays that long before ending).

use std::time::{Duration, Instant};

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn gsm_main() {
    let topo = gossamer::topology();
    let n = topo.threads();
    let fibers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |()| {
                    let (rank, host, thread) =
                        (gossamer::rack::rank(), gossamer::rack::host_name(), gossamer::current_thread().unwrap());
                    println!("hello from rank {rank} on host {host}, thread {thread}");
                    rank
                },
                (),
            )
        })
        .collect();
    for f in fibers {
        f.join().expect("a fiber panicked");
    }
    if let Some(r) = env_num("HELLO_CRASH_RANK") {
        let r = r as usize;
        assert!(r < topo.processes.len(), "HELLO_CRASH_RANK={r}: no such rank");
        let h = gossamer::spawn_with::<_, ()>(
            topo.processes[r].start,
            |()| {
                eprintln!(
                    "rank {} on host {} exits with status 3",
                    gossamer::rack::rank(),
                    gossamer::rack::host_name()
                );
                gossamer::rack::exit_now(3);
            },
            (),
        );
        let _ = h.join();
    }
    if let Some(ms) = env_num("HELLO_SLEEP_MS") {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
            gossamer::yield_now();
        }
    }
    println!("hello_rack: {n} thread(s) over {} rank(s) on {} host(s)", topo.processes.len(), topo.hosts.len());
}

fn main() {
    // One thread per rank unless told otherwise. A malformed launcher
    // environment is reported by `gossamer::main` itself.
    let threads = match env_num("GOSSAMER_THREADS") {
        Some(t) => t as usize,
        None => gossamer::rack::planned_processes().unwrap_or(1),
    };
    gossamer::main(gsm_main, threads.max(1));
}
