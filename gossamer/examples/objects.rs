//! Every object of `gossamer::objects` in one program, which runs
//! unchanged in one process or several:
//!
//! `cargo run --example objects` or
//! `GOSSAMER_PROCESSES=3 cargo run --example objects`
//!
//! * `spawn_to`: a fiber started where a histogram lives fills it with the
//!   local shortcut;
//! * a `Barrier` over every thread separates two phases;
//! * an MPSC `channel`: every thread sends its share of work results to a
//!   collector on thread 0;
//! * a broadcast `ring`: thread 0 sends lines of text of any length to every
//!   other thread, which each count them.

use gossamer::objects::{channel, ring, Barrier, RingReader, Sender};

fn gsm_main() {
    let n = gossamer::threads();
    let processes = gossamer::topology().processes.len();
    println!("{processes} processes, {n} threads");

    // spawn_to: run where the data is.
    let histogram = gossamer::entrust_on(n - 1, vec![0u64; 10]);
    let filled = gossamer::spawn_to(&histogram, |h| {
        for i in 0..10_000u64 {
            h.apply_with(|h, i| h[(i * 7 % 10) as usize] += 1, i); // no message: the local shortcut
        }
        gossamer::current_thread().unwrap()
    });
    println!(
        "histogram filled on thread {}: {:?}",
        filled.join().unwrap(),
        histogram.apply_with(|h, ()| h.clone(), ())
    );

    // Barrier + channel: each thread squares its numbers, meets the others,
    // then reports its sum to thread 0.
    let barrier = Barrier::new();
    let (tx, rx) = channel::<(usize, u64)>(8);
    let workers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |(b, tx, t, n): (Barrier, Sender<(usize, u64)>, usize, usize)| {
                    let sum: u64 = (0..1000u64).filter(|i| *i as usize % n == t).map(|i| i * i).sum();
                    b.wait(); // phase 1 over everywhere
                    tx.send((t, sum)).unwrap();
                },
                (barrier.clone(), tx.clone(), t, n),
            )
        })
        .collect();
    drop(tx);
    let mut total = 0;
    while let Ok((t, s)) = rx.recv() {
        println!("thread {t} sent {s}");
        total += s;
    }
    workers.into_iter().for_each(|w| w.join().unwrap());
    assert_eq!(total, (0..1000u64).map(|i| i * i).sum::<u64>());
    println!("sum of squares below 1000: {total}");

    // Broadcast ring to every other thread.
    if n > 1 {
        let readers: Vec<usize> = (1..n).collect();
        let (mut writer, ends) = ring::<String>(&readers, 16);
        let counters: Vec<_> = ends
            .into_iter()
            .map(|r| {
                gossamer::spawn_with(
                    r.inbox_thread(),
                    |mut r: RingReader<String>| {
                        let (mut lines, mut bytes) = (0, 0);
                        while let Some(line) = r.read() {
                            lines += 1;
                            bytes += line.len();
                        }
                        (gossamer::current_thread().unwrap(), lines, bytes)
                    },
                    r,
                )
            })
            .collect();
        for i in 0..100 {
            writer.write("word ".repeat(i));
        }
        drop(writer);
        for c in counters {
            let (t, lines, bytes) = c.join().unwrap();
            println!("thread {t} read {lines} lines, {bytes} bytes");
        }
    }
}

fn main() {
    gossamer::main(gsm_main, 4);
}
