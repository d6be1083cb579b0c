//! The building blocks of `gossamer::objects` — data-affine spawn, barrier,
//! channels, broadcast ring, shared read-only values — within one process (many threads), across
//! three processes (this test binary re-runs itself with
//! `GOSSAMER_SCENARIO` set; `gossamer::main` starts the other ranks), under
//! random schedules (proptest), and when a participant process dies (the
//! program ends with an error naming it, no hang).

use std::process::Command;
use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};

use gossamer::objects::{
    channel, mpmc_channel, ring, Barrier, MultiReceiver, RingReader, Sender, Shared, TryRecvError,
};
use gossamer::Trust;
use proptest::prelude::*;

mod common;
use common::objects::*;
use common::programs::{self, run_program, text};
use common::{rt, strict_rt, within};

// ---- within one process ----------------------------------------------------
//
// In strict mode (every worker its own simulated process) wherever the test
// itself only uses what crosses processes; the two tests that start fibers
// with capturing closures (`spawn_on`) run as one plain process.

#[test]
fn spawn_to_runs_where_the_property_lives() {
    within(60, || strict_rt(4).block_on(spawn_to_everywhere));
}

#[test]
fn barrier_over_many_threads_is_exact_and_transitive() {
    within(120, || strict_rt(6).block_on(|| barrier_phases(20)));
}

#[test]
fn barrier_over_a_subset_of_threads() {
    within(60, || {
        strict_rt(4).block_on(|| {
            let b = Barrier::over([1, 3]);
            assert_eq!(b.threads(), &[1, 3]);
            let f = gossamer::spawn_with(1, |b: Barrier| (0..50).fold(0, |_, _| b.wait()), b.clone());
            let g = gossamer::spawn_with(3, |b: Barrier| (0..50).fold(0, |_, _| b.wait()), b.clone());
            assert_eq!((f.join().unwrap(), g.join().unwrap()), (50, 50));
            // Thread 0 is not a participant.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.wait()));
            assert!(r.is_err());
        })
    });
}

#[test]
fn mpsc_channel_delivers_every_item_in_producer_order() {
    within(120, || strict_rt(4).block_on(|| mpsc_exact(0, 500, 3)));
}

#[test]
fn mpmc_channel_delivers_every_item_exactly_once() {
    within(120, || strict_rt(4).block_on(|| mpmc_exact(2, 500, 5)));
}

#[test]
fn channel_closes_when_one_side_is_gone() {
    within(60, || {
        rt(2).block_on(|| {
            let (tx, rx) = channel::<u32>(2);
            assert_eq!(tx.try_send(1), Ok(None));
            assert_eq!(tx.try_send(2), Ok(None));
            assert_eq!(tx.try_send(3), Ok(Some(3)), "full at its capacity");
            assert_eq!(rx.try_recv(), Ok(1));
            drop(tx);
            assert_eq!(rx.recv(), Ok(2));
            // The senders' side closes asynchronously: wait for it.
            let start = std::time::Instant::now();
            loop {
                match rx.try_recv() {
                    Err(TryRecvError::Disconnected) => break,
                    Err(TryRecvError::Empty) => gossamer::yield_now(),
                    Ok(v) => panic!("unexpected {v}"),
                }
                assert!(start.elapsed() < Duration::from_secs(20));
            }
            assert!(rx.recv().is_err());

            // A sender blocked on a full queue is released, with its value,
            // when the receivers go.
            let (tx, rx) = mpmc_channel::<u32>(1);
            let rx2 = rx.clone();
            assert_eq!(tx.try_send(1), Ok(None));
            let r = gossamer::spawn_on(1, move || tx.send(2));
            for _ in 0..100 {
                gossamer::yield_now();
            }
            assert!(!r.is_finished(), "the sender waits while the queue is full");
            drop(rx);
            drop(rx2);
            assert_eq!(r.join().unwrap().unwrap_err().0, 2);
        })
    });
}

#[test]
fn recv_suspends_the_fiber_not_the_thread() {
    within(60, || {
        strict_rt(1).block_on(|| {
            // One thread: the consumer waits while a producer fiber on the
            // same thread fills the queue.
            let (tx, rx) = channel::<u64>(1);
            let consumer = gossamer::spawn(move || (0..100).map(|_| rx.recv().unwrap()).sum::<u64>());
            for i in 0..100 {
                tx.send(i).unwrap();
            }
            assert_eq!(consumer.join().unwrap(), 4950);
        })
    });
}

#[test]
fn ring_delivers_every_message_to_every_reader_in_order() {
    within(120, || strict_rt(4).block_on(|| ring_exact(400, 4, 300)));
}

#[test]
fn ring_writer_waits_for_the_slowest_reader() {
    within(60, || {
        strict_rt(2).block_on(|| {
            let (mut w, mut ends) = ring::<u64>(&[1], 3);
            let reader = ends.pop().unwrap();
            // Nobody reads yet: the writer fills the inbox, then waits.
            let writer = gossamer::spawn(move || {
                for i in 0..10 {
                    w.write(i);
                }
            });
            for _ in 0..200 {
                gossamer::yield_now();
            }
            assert!(!writer.is_finished(), "the writer stopped at the capacity");
            let r = gossamer::spawn_with(
                1,
                |mut r: RingReader<u64>| std::iter::from_fn(|| r.read()).collect::<Vec<_>>(),
                reader,
            );
            writer.join().unwrap();
            assert_eq!(r.join().unwrap(), (0..10).collect::<Vec<_>>());
        })
    });
}

// ---- random schedules --------------------------------------------------------

/// What each fiber of the random schedule gets: both channel ends, the
/// barrier, its yields per item, items per phase, phases and its own id.
type Worker = (Sender<(u64, u64)>, MultiReceiver<(u64, u64)>, Barrier, u8, u64, u64, u64);

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Channels and barrier under random capacities, producer counts and
    /// yields between operations: results stay exact.
    #[test]
    fn random_schedules_keep_channels_and_barriers_exact(
        capacity in 1usize..5,
        yields in proptest::collection::vec(0u8..4, 4),
        per in 1u64..60,
        phases in 1u64..6,
    ) {
        within(120, move || strict_rt(4).block_on(move || {
            let (tx, rx) = mpmc_channel::<(u64, u64)>(capacity);
            let b = Barrier::new();
            let fibers: Vec<_> = (0..4usize)
                .map(|t| gossamer::spawn_with(
                    t,
                    |(tx, rx, b, y, per, phases, who): Worker| {
                        let mut got = Vec::new();
                        for phase in 0..phases {
                            for i in 0..per {
                                tx.send((who, phase * per + i)).unwrap();
                                for _ in 0..y { gossamer::yield_now(); }
                                if let Ok(v) = rx.try_recv() { got.push(v); }
                            }
                            b.wait();
                        }
                        drop(tx);
                        while let Ok(v) = rx.recv() { got.push(v); }
                        got
                    },
                    (tx.clone(), rx.clone(), b.clone(), yields[t], per, phases, t as u64),
                ))
                .collect();
            drop((tx, rx));
            let mut all: Vec<(u64, u64)> = fibers.into_iter().flat_map(|f| f.join().unwrap()).collect();
            all.sort_unstable();
            let want: Vec<(u64, u64)> = (0..4).flat_map(|w| (0..phases * per).map(move |i| (w, i))).collect();
            assert_eq!(all, want);
        }));
    }

    /// The ring under random capacities and message sizes.
    #[test]
    fn random_ring_schedules_deliver_everything(capacity in 1usize..6, messages in 0u64..80, max_len in 0usize..200) {
        within(120, move || strict_rt(3).block_on(move || ring_exact(messages, capacity, max_len)));
    }
}

// ---- shared read-only values -----------------------------------------------

/// Drops of `Tracked` values in this process.
static TRACKED_DROPS: AtomicUsize = AtomicUsize::new(0);

/// A value whose drops are counted.
#[derive(serde::Serialize, serde::Deserialize)]
struct Tracked {
    data: Vec<u64>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        TRACKED_DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

fn tracked(n: u64) -> Tracked {
    Tracked { data: (0..n).collect() }
}

/// Waits (yielding) until this process has counted `n` drops.
fn await_drops(n: usize) {
    let t0 = std::time::Instant::now();
    while TRACKED_DROPS.load(Ordering::SeqCst) < n {
        assert!(t0.elapsed() < Duration::from_secs(30), "the value was never dropped");
        gossamer::yield_now();
    }
    assert_eq!(TRACKED_DROPS.load(Ordering::SeqCst), n, "dropped more than once");
}

#[test]
fn shared_values_are_read_in_place_by_every_thread_and_dropped_once() {
    within(60, || {
        let before = TRACKED_DROPS.load(Ordering::SeqCst);
        rt(4).block_on(move || {
            let s = Shared::new(tracked(10_000));
            let addr = s.get() as *const Tracked as usize;
            let readers: Vec<_> = (0..4)
                .map(|t| {
                    let s = s.clone();
                    gossamer::spawn_on(t, move || {
                        (s.get() as *const Tracked as usize, s.get().data.iter().sum::<u64>())
                    })
                })
                .collect();
            for r in readers {
                let (at, sum) = r.join().unwrap();
                assert_eq!(at, addr, "a thread read a copy");
                assert_eq!(sum, 49_995_000);
            }
            assert_eq!(TRACKED_DROPS.load(Ordering::SeqCst), before, "dropped while handles live");
            drop(s);
            await_drops(before + 1);
        });
    });
}

// ---- across three processes ------------------------------------------------

/// A value published on rank 0: read on every process; two handles that
/// reach rank 1 separately share one replica there; rank 1's replica goes
/// with its last handle, the original with the last handle anywhere.
fn shared_across() {
    const N: u64 = 200_000;
    let sum = N * (N - 1) / 2;
    let s = Shared::new(tracked(N));
    let (same, got, rank) = gossamer::spawn_with(
        2,
        |(a, b): (Shared<Tracked>, Shared<Tracked>)| {
            let (pa, pb) = (a.get() as *const Tracked, b.get() as *const Tracked);
            (std::ptr::eq(pa, pb), a.get().data.iter().sum::<u64>(), gossamer::rack::rank())
        },
        (s.clone(), s.clone()),
    )
    .join()
    .unwrap();
    assert_eq!(rank, 1);
    assert!(same, "two handles in one process hold two replicas");
    assert_eq!(got, sum);
    // Thread 3 is rank 1 too: its replica went with the handles above.
    let drops = gossamer::spawn_with(3, |()| TRACKED_DROPS.load(Ordering::SeqCst), ()).join().unwrap();
    assert_eq!(drops, 1, "rank 1 keeps its replica after its last handle");
    // Every thread of every process reads it.
    let readers: Vec<_> = (0..6)
        .map(|t| gossamer::spawn_with(t, |s: Shared<Tracked>| s.get().data.iter().sum::<u64>(), s.clone()))
        .collect();
    for r in readers {
        assert_eq!(r.join().unwrap(), sum);
    }
    assert_eq!(TRACKED_DROPS.load(Ordering::SeqCst), 0, "the original went while a handle lives");
    drop(s);
    await_drops(1);
    println!("SCENARIO shared ok");
}

fn across() {
    let topo = gossamer::topology();
    assert_eq!((topo.processes.len(), topo.threads()), (3, 6));
    spawn_to_everywhere();
    // Code crosses as a `fn` (a capturing closure does not compile, see
    // tests/ui/crossing_spawn_to_captures.rs); data goes as the argument.
    let far = gossamer::entrust_on(5, 1u64);
    let k = std::env::args().count() as u64;
    let ok = gossamer::spawn_with(
        far.trustee().index(),
        |(c, k): (Trust<u64>, u64)| c.apply_with(|v, ()| *v, ()) + k,
        (far.clone(), k),
    );
    assert_eq!(ok.join().unwrap(), 1 + k);
    barrier_phases(10);
    // Queues on rank 2; producers and consumers everywhere.
    mpsc_exact(5, 200, 4);
    mpmc_exact(4, 200, 3);
    // MPSC with the queue here: remote producers, local consumer.
    mpsc_exact(0, 200, 2);
    ring_exact(300, 4, 2000);
    ring_large();
    println!("SCENARIO across ok");
}

/// Rank 2 dies while every other thread waits at a barrier with it.
fn barrier_fate() {
    let b = Barrier::new();
    let waiters: Vec<_> = (0..5).map(|t| gossamer::spawn_with(t, |b: Barrier| b.wait(), b.clone())).collect();
    let _ = gossamer::spawn_with::<_, ()>(5, |_b: Barrier| std::process::exit(9), b.clone());
    for w in waiters {
        let _ = w.join();
    }
    unreachable!("the program should have stopped");
}

/// Rank 2 dies inside a closure launched there from rank 0, which waits
/// for its result.
fn launch_fate() {
    let latch: Trust<gossamer::Latch<u64>> =
        gossamer::spawn_with(4, |()| gossamer::local_trustee().entrust(gossamer::Latch::new(0u64)), ()).join().unwrap();
    latch.launch_with::<(), ()>(|_, ()| std::process::exit(11), ());
    unreachable!("the program should have stopped");
}

/// A value published on rank 2, which dies before rank 0's first read.
fn shared_fate() {
    let s: Shared<Vec<u64>> = gossamer::spawn_with(4, |()| Shared::new(vec![1u64; 1000]), ()).join().unwrap();
    let _ = gossamer::spawn_with::<_, ()>(5, |()| std::process::exit(12), ());
    let _ = s.get().len();
    unreachable!("the program should have stopped");
}

/// Rank 1 dies holding the only sender while rank 0 waits in `recv`.
fn channel_fate() {
    let (tx, rx) = channel::<u64>(2);
    let _ = gossamer::spawn_with::<_, ()>(
        2,
        |tx: Sender<u64>| {
            tx.send(1).unwrap();
            std::process::exit(11);
        },
        tx,
    );
    while rx.recv().is_ok() {}
    unreachable!("the program should have stopped");
}

/// Rank 1 dies while the writer waits for its reader's credit.
fn ring_fate() {
    let (mut w, mut ends) = ring::<Vec<u8>>(&[1, 3], 2);
    let slow = ends.pop().unwrap();
    let _ = gossamer::spawn_with::<_, ()>(
        3,
        |mut r: RingReader<Vec<u8>>| {
            r.read();
            std::process::exit(13);
        },
        slow,
    );
    let _keep = ends;
    for i in 0..1000u32 {
        w.write(i.to_le_bytes().to_vec());
    }
    unreachable!("the program should have stopped");
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        "across" => across,
        "shared" => shared_across,
        "barrier_fate" => barrier_fate,
        "launch_fate" => launch_fate,
        "shared_fate" => shared_fate,
        "channel_fate" => channel_fate,
        "ring_fate" => ring_fate,
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, 6);
    common::assert_no_thread_left("rank 0");
}

fn scenario(name: &str) -> Command {
    let mut cmd = programs::scenario(name, 3);
    cmd.env("GOSSAMER_SILENCE_MS", "20000");
    cmd
}

#[test]
fn every_object_is_exact_across_three_processes() {
    let (out, _) = run_program(scenario("across"), Duration::from_secs(300));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO across ok"), "{t}");
}

#[test]
fn shared_values_replicate_once_per_process_and_drop_everywhere() {
    let (out, _) = run_program(scenario("shared"), Duration::from_secs(300));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO shared ok"), "{t}");
}

/// Runs a fate scenario: the program must fail, naming the rank that died
/// and its exit status.
fn expect_rank_failed(name: &str, rank: usize, status: i32) {
    let (out, _) = run_program(scenario(name), Duration::from_secs(60));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains(&format!("rank {rank} failed")) && t.contains(&format!("status {status}")), "{t}");
}

#[test]
fn a_participant_dying_at_a_barrier_ends_the_program_with_its_rank() {
    expect_rank_failed("barrier_fate", 2, 9);
}

#[test]
fn a_process_dying_in_a_launched_closure_ends_the_launcher_with_its_rank() {
    expect_rank_failed("launch_fate", 2, 11);
}

#[test]
fn a_shared_values_home_dying_ends_a_first_read_with_its_rank() {
    expect_rank_failed("shared_fate", 2, 12);
}

#[test]
fn a_sender_process_dying_ends_a_waiting_receiver_with_its_rank() {
    expect_rank_failed("channel_fate", 1, 11);
}

#[test]
fn a_reader_process_dying_ends_a_waiting_writer_with_its_rank() {
    expect_rank_failed("ring_fate", 1, 13);
}
