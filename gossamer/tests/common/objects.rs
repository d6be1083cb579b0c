//! Bodies that exercise `gossamer::objects` over every thread of the
//! running program (one process, several, or several hosts): each checks
//! exact results and panics on any difference.

use gossamer::objects::{channel_on, mpmc_channel_on, ring, Barrier, MultiReceiver, Receiver, RingReader, Sender};
use gossamer::Trust;

/// Every thread, every phase: bumps a counter on every thread with
/// `apply_then` (not waited for), then meets the others at the barrier;
/// after it, every counter holds exactly what all threads sent so far (the
/// barrier's transitive semantics).
pub fn barrier_phases(phases: u64) {
    let n = gossamer::threads();
    let barrier = Barrier::new();
    let counters: Vec<Trust<u64>> = (0..n).map(|t| gossamer::entrust_on(t, 0u64)).collect();
    let fibers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |(b, cs, phases): (Barrier, Vec<Trust<u64>>, u64)| {
                    let n = cs.len() as u64;
                    for phase in 1..=phases {
                        for c in &cs {
                            c.apply_with_then(|v, ()| *v += 1, (), |()| {});
                        }
                        assert_eq!(b.wait(), 2 * phase - 1);
                        for c in &cs {
                            let v = c.apply_with(|v, ()| *v, ());
                            assert_eq!(v, phase * n, "a bump issued before the barrier was not done after it");
                        }
                        assert_eq!(b.wait(), 2 * phase);
                    }
                },
                (barrier.clone(), counters.clone(), phases),
            )
        })
        .collect();
    for f in fibers {
        f.join().unwrap();
    }
    for c in &counters {
        assert_eq!(c.apply_with(|v, ()| *v, ()), phases * n as u64);
    }
}

/// Producers on every thread send tagged numbers through one MPSC channel
/// whose queue is on `queue_thread`; one consumer there checks that each
/// producer's items come in order and that all come exactly once.
pub fn mpsc_exact(queue_thread: usize, per_producer: u64, capacity: usize) {
    let n = gossamer::threads();
    let (tx, rx) = channel_on::<(u64, u64)>(queue_thread, capacity);
    let consumer = gossamer::spawn_with(
        queue_thread,
        |(rx, n, per): (Receiver<(u64, u64)>, u64, u64)| {
            let mut next = vec![0u64; n as usize];
            let mut count = 0;
            while let Ok((who, i)) = rx.recv() {
                assert_eq!(next[who as usize], i, "items of one producer arrive in order");
                next[who as usize] += 1;
                count += 1;
            }
            assert!(next.iter().all(|&k| k == per), "{next:?}");
            count
        },
        (rx, n as u64, per_producer),
    );
    let producers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |(tx, who, per): (Sender<(u64, u64)>, u64, u64)| {
                    for i in 0..per {
                        tx.send((who, i)).unwrap();
                    }
                },
                (tx.clone(), t as u64, per_producer),
            )
        })
        .collect();
    drop(tx);
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(consumer.join().unwrap(), n as u64 * per_producer);
}

/// Producers and consumers on every thread share one MPMC channel: every
/// item is received exactly once.
pub fn mpmc_exact(queue_thread: usize, per_producer: u64, capacity: usize) {
    let n = gossamer::threads();
    let (tx, rx) = mpmc_channel_on::<u64>(queue_thread, capacity);
    let consumers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |rx: MultiReceiver<u64>| {
                    let mut got = Vec::new();
                    while let Ok(v) = rx.recv() {
                        got.push(v);
                    }
                    got
                },
                rx.clone(),
            )
        })
        .collect();
    drop(rx);
    let producers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |(tx, who, per): (Sender<u64>, u64, u64)| {
                    for i in 0..per {
                        tx.send(who * 1_000_000 + i).unwrap();
                    }
                },
                (tx.clone(), t as u64, per_producer),
            )
        })
        .collect();
    drop(tx);
    for p in producers {
        p.join().unwrap();
    }
    let mut all: Vec<u64> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
    all.sort_unstable();
    let mut want: Vec<u64> = (0..n as u64).flat_map(|w| (0..per_producer).map(move |i| w * 1_000_000 + i)).collect();
    want.sort_unstable();
    assert_eq!(all, want, "every item received exactly once");
}

/// A ring from the calling thread to every other thread: each reader reads
/// every message, in order, byte-exact, sizes from 0 to `max_len`.
pub fn ring_exact(messages: u64, capacity: usize, max_len: usize) {
    let me = gossamer::current_thread().unwrap();
    let readers: Vec<usize> = (0..gossamer::threads()).filter(|&t| t != me).collect();
    let (mut writer, ends) = ring::<Vec<u8>>(&readers, capacity);
    let fibers: Vec<_> = ends
        .into_iter()
        .map(|end| {
            let t = end.inbox_thread();
            gossamer::spawn_with(
                t,
                |(mut r, max_len): (RingReader<Vec<u8>>, usize)| {
                    let mut i = 0u64;
                    while let Some(m) = r.read() {
                        assert_eq!(m, message(i, max_len), "message {i} read once, in order, byte-exact");
                        i += 1;
                    }
                    i
                },
                (end, max_len),
            )
        })
        .collect();
    for i in 0..messages {
        writer.write(message(i, max_len));
    }
    drop(writer);
    for f in fibers {
        assert_eq!(f.join().unwrap(), messages);
    }
}

/// A ring whose messages are larger than a slot and than the default bulk
/// area's share: a few of about 1 MiB to every other thread.
pub fn ring_large() {
    let me = gossamer::current_thread().unwrap();
    let readers: Vec<usize> = (0..gossamer::threads()).filter(|&t| t != me).collect();
    let (mut writer, ends) = ring::<Vec<u8>>(&readers, 2);
    let fibers: Vec<_> = ends
        .into_iter()
        .map(|end| {
            gossamer::spawn_with(
                end.inbox_thread(),
                |mut r: RingReader<Vec<u8>>| {
                    let mut i = 0u64;
                    while let Some(m) = r.read() {
                        assert_eq!(m, big(i), "large message {i}");
                        i += 1;
                    }
                    i
                },
                end,
            )
        })
        .collect();
    for i in 0..5 {
        writer.write(big(i));
    }
    drop(writer);
    for f in fibers {
        assert_eq!(f.join().unwrap(), 5);
    }
}

pub fn big(i: u64) -> Vec<u8> {
    (0..(1 << 20) + i as usize * 4099).map(|k| (k as u64 * 31 + i) as u8).collect()
}

pub fn message(i: u64, max_len: usize) -> Vec<u8> {
    let len = (i as usize * 7919) % (max_len + 1);
    (0..len).map(|k| (i as usize + k) as u8).collect()
}

/// `spawn_to` runs on the trustee of every thread's counter, and its
/// applies take the local shortcut there.
pub fn spawn_to_everywhere() {
    let n = gossamer::threads();
    let counters: Vec<Trust<u64>> = (0..n).map(|t| gossamer::entrust_on(t, 0u64)).collect();
    let fibers: Vec<_> = counters
        .iter()
        .map(|c| {
            gossamer::spawn_to(c, |c| {
                assert!(c.is_local());
                for _ in 0..1000 {
                    c.apply_with(|v, ()| *v += 1, ());
                }
                (gossamer::current_thread().unwrap(), c.trustee().index())
            })
        })
        .collect();
    for f in fibers {
        let (ran_on, trustee) = f.join().unwrap();
        assert_eq!(ran_on, trustee);
    }
    let last = &counters[n - 1];
    let with = gossamer::spawn_with(
        last.trustee().index(),
        |(c, add): (Trust<u64>, Vec<u64>)| {
            for a in add {
                c.apply_with(|v, a| *v += a, a);
            }
            c.apply_with(|v, ()| *v, ())
        },
        (last.clone(), vec![1, 2, 3]),
    );
    assert_eq!(with.join().unwrap(), 1006);
    for c in &counters[..n - 1] {
        assert_eq!(c.apply_with(|v, ()| *v, ()), 1000);
    }
}
