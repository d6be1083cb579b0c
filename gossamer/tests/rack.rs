//! Multi-process programs, started as real processes: this test binary
//! re-runs itself with `GOSSAMER_SCENARIO` set, and the scenario calls
//! `gossamer::main`, which starts the other ranks (copies of this binary).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gossamer::Trust;

mod common;
use common::programs::{self, run_program, text};

// ---- the scenarios (run inside the spawned processes) ----------------------

static DROPS: AtomicUsize = AtomicUsize::new(0);

#[derive(serde::Serialize, serde::Deserialize)]
struct Counted(u32);
impl Drop for Counted {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

fn counters() {
    let topo = gossamer::topology();
    let n = topo.threads();
    assert_eq!((topo.processes.len(), n), (3, 6));
    let counters: Vec<Trust<u64>> = (0..n).map(|t| gossamer::entrust_on(t, 0u64)).collect();
    let fibers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |cs: Vec<Trust<u64>>| {
                    for _ in 0..300 {
                        for c in &cs {
                            c.apply_with(|v, ()| *v += 1, ());
                        }
                    }
                    (gossamer::rack::rank(), gossamer::rack::load_address())
                },
                counters.clone(),
            )
        })
        .collect();
    let mut bases = std::collections::BTreeMap::new();
    for f in fibers {
        let (rank, base) = f.join().unwrap();
        bases.insert(rank, base);
    }
    let totals: Vec<u64> = counters.iter().map(|c| c.apply_with(|v, ()| *v, ())).collect();
    assert!(totals.iter().all(|&t| t == 6 * 300), "{totals:?}");
    let distinct: std::collections::BTreeSet<_> = bases.values().collect();
    println!("SCENARIO counters ok: totals {totals:?}, load addresses {bases:x?}");
    assert_eq!(distinct.len(), 3, "each process loads the binary at its own address (ASLR)");
}

fn ordering() {
    // A log on rank 2; fibers on ranks 0 and 1 append with apply_then.
    let log = gossamer::entrust_on(5, Vec::<(u32, u32)>::new());
    let fibers: Vec<_> = [0usize, 2, 3]
        .iter()
        .map(|&t| {
            gossamer::spawn_with(
                t,
                move |(log, who): (Trust<Vec<(u32, u32)>>, u32)| {
                    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
                    for s in 0..2000u32 {
                        let seen = seen.clone();
                        let me = gossamer::current_thread();
                        log.apply_with_then(
                            |l, (who, s): (u32, u32)| {
                                l.push((who, s));
                                s
                            },
                            (who, s),
                            move |s| {
                                assert_eq!(gossamer::current_thread(), me, "callback on the issuing thread");
                                seen.borrow_mut().push(s)
                            },
                        );
                    }
                    log.apply_with(|_, ()| (), ());
                    let seen = seen.borrow();
                    seen.iter().enumerate().all(|(i, &s)| i as u32 == s) && seen.len() == 2000
                },
                (log.clone(), t as u32),
            )
        })
        .collect();
    for f in fibers {
        assert!(f.join().unwrap(), "callbacks ran in issue order");
    }
    let entries = log.apply_with(|l, ()| l.clone(), ());
    assert_eq!(entries.len(), 6000);
    let mut next = std::collections::HashMap::new();
    for (who, s) in entries {
        let n = next.entry(who).or_insert(0);
        assert_eq!(s, *n, "requests of one fiber ran in issue order");
        *n += 1;
    }
    println!("SCENARIO ordering ok");
}

fn refcount() {
    // The property lives on rank 1 (thread 2); trusts travel to every rank.
    let t = gossamer::entrust_on(2, Counted(7));
    let drops_on_rank1 = || gossamer::spawn_with(3, |()| DROPS.load(Ordering::SeqCst), ()).join().unwrap();
    let fibers: Vec<_> = (0..6)
        .map(|th| {
            gossamer::spawn_with(
                th,
                |t: Trust<Counted>| {
                    let c = t.clone();
                    let v = c.apply_with(|x, ()| x.0, ());
                    drop(t);
                    v
                },
                t.clone(),
            )
        })
        .collect();
    for f in fibers {
        assert_eq!(f.join().unwrap(), 7);
    }
    // Still held here: not dropped.
    assert_eq!(t.apply_with(|x, ()| x.0, ()), 7);
    assert_eq!(drops_on_rank1(), 0, "dropped while a trust remained");
    drop(t);
    let start = Instant::now();
    while drops_on_rank1() == 0 && start.elapsed() < Duration::from_secs(10) {
        gossamer::yield_now();
    }
    assert_eq!(drops_on_rank1(), 1, "the last drop drops the property exactly once");
    println!("SCENARIO refcount ok");
}

fn payload() {
    let store = gossamer::entrust_on(4, Vec::<Vec<u8>>::new());
    let blob: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    let t0 = Instant::now();
    let n = store.apply_with(
        |s, b| {
            s.push(b);
            s.len()
        },
        blob.clone(),
    );
    let put = t0.elapsed();
    assert_eq!(n, 1);
    let t0 = Instant::now();
    let back: Vec<u8> = store.apply_with(|s, ()| s[0].clone(), ());
    let get = t0.elapsed();
    assert_eq!(back, blob);
    // A remote panic reaches the caller with its message.
    let r = catch_unwind(AssertUnwindSafe(|| store.apply_with(|_, ()| -> u8 { panic!("remote failure") }, ())));
    let msg = r.unwrap_err().downcast::<String>().map(|s| *s).unwrap_or_default();
    assert!(msg.contains("remote failure"), "{msg}");
    println!("SCENARIO payload ok: 1 MiB argument in {put:?}, 1 MiB result in {get:?}");
}

/// Arguments and results larger than the bulk area between two processes
/// (`GOSSAMER_BULK_BYTES` is set small by the test): they travel in chunks.
fn huge() {
    let store = gossamer::entrust_on(5, Vec::<u8>::new());
    for size in [1usize << 20, 64 << 20] {
        let blob: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
        let t0 = Instant::now();
        let n = store.apply_with(
            |s, b: Vec<u8>| {
                *s = b;
                s.len()
            },
            blob.clone(),
        );
        let put = t0.elapsed();
        assert_eq!(n, size);
        let t0 = Instant::now();
        let back: Vec<u8> = store.apply_with(|s, ()| s.clone(), ());
        let get = t0.elapsed();
        assert!(back == blob, "the {size}-byte result came back intact");
        println!("HUGE {size} bytes: argument {put:?}, result {get:?}");
    }
    println!("SCENARIO huge ok");
}

/// A value that goes through serde: a byte field copied as a byte string,
/// and a field serialized element by element.
#[derive(serde::Serialize, serde::Deserialize, Clone, PartialEq, Debug)]
struct Framed {
    tag: u32,
    #[serde(with = "serde_bytes")]
    body: Vec<u8>,
    nums: Vec<u16>,
}

/// A small deterministic generator (xorshift).
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Sizes around the boundaries: empty, the slot, the bulk area (set to
/// 64 KiB by the test, so the largest cross in chunks), and in between.
fn payload_size(x: &mut u64) -> usize {
    const EDGES: [usize; 8] = [0, 1, 639, 641, 1024, 65_535, 65_537, 200_000];
    match next(x) % 4 {
        0 => EDGES[(next(x) % 8) as usize],
        1 => (next(x) % 2048) as usize,
        2 => (next(x) % 70_000) as usize,
        _ => (next(x) % 300_000) as usize,
    }
}

fn bytes(x: &mut u64, n: usize) -> Vec<u8> {
    (0..n).map(|_| next(x) as u8).collect()
}

/// Every thread sends payloads of random sizes and contents to random
/// threads, as `Vec<u8>`, `String` and a serde struct, many at once; each
/// trustee answers with a different value derived from it (so both
/// directions carry their own bytes), and the sender checks every answer.
fn mixed() {
    use std::cell::Cell;
    use std::rc::Rc;
    let n = gossamer::topology().threads();
    let sinks: Vec<Trust<u64>> = (0..n).map(|t| gossamer::entrust_on(t, 0u64)).collect();
    let fibers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |(sinks, seed): (Vec<Trust<u64>>, u64)| {
                    let mut x = seed | 1;
                    let (done, bad) = (Rc::new(Cell::new(0u32)), Rc::new(Cell::new(0u32)));
                    const EACH: u32 = 60;
                    for i in 0..EACH {
                        let to = &sinks[(next(&mut x) % sinks.len() as u64) as usize];
                        let size = payload_size(&mut x);
                        let (d, b) = (done.clone(), bad.clone());
                        let check = move |ok: bool| {
                            d.set(d.get() + 1);
                            if !ok {
                                b.set(b.get() + 1);
                            }
                        };
                        match i % 3 {
                            0 => {
                                let v = bytes(&mut x, size);
                                let want: Vec<u8> = v.iter().rev().map(|b| b ^ 0x5a).collect();
                                to.apply_with_then(
                                    |c, v: Vec<u8>| {
                                        *c += 1;
                                        v.iter().rev().map(|b| b ^ 0x5a).collect::<Vec<u8>>()
                                    },
                                    v,
                                    move |back| check(back == want),
                                );
                            }
                            1 => {
                                let s: String = (0..size / 3)
                                    .map(|_| ['a', 'é', '世', '\n'][(next(&mut x) % 4) as usize])
                                    .collect();
                                let want = format!("{}{}", s.chars().rev().collect::<String>(), s.len());
                                to.apply_with_then(
                                    |c, s: String| {
                                        *c += 1;
                                        format!("{}{}", s.chars().rev().collect::<String>(), s.len())
                                    },
                                    s,
                                    move |back| check(back == want),
                                );
                            }
                            _ => {
                                let f = Framed {
                                    tag: next(&mut x) as u32,
                                    body: bytes(&mut x, size),
                                    nums: (0..size % 500).map(|_| next(&mut x) as u16).collect(),
                                };
                                let mut want = f.clone();
                                want.tag = want.tag.wrapping_add(1);
                                want.body.reverse();
                                want.nums.push(7);
                                to.apply_with_then(
                                    |c, mut f: Framed| {
                                        *c += 1;
                                        f.tag = f.tag.wrapping_add(1);
                                        f.body.reverse();
                                        f.nums.push(7);
                                        f
                                    },
                                    f,
                                    move |back| check(back == want),
                                );
                            }
                        }
                        // Many in flight, not unbounded.
                        while i + 1 - done.get() > 16 {
                            gossamer::yield_now();
                        }
                    }
                    while done.get() < EACH {
                        gossamer::yield_now();
                    }
                    (done.get(), bad.get())
                },
                (sinks.clone(), 0x9e37_79b9_7f4a_7c15 ^ (t as u64 * 7919)),
            )
        })
        .collect();
    let (mut all, mut bad) = (0, 0);
    for f in fibers {
        let (d, b) = f.join().expect("a sender fiber failed");
        all += d;
        bad += b;
    }
    let served: u64 = sinks.iter().map(|s| s.apply_with(|c, ()| *c, ())).sum();
    assert_eq!(bad, 0, "{bad} of {all} answers came back wrong");
    assert_eq!(served, u64::from(all));
    println!("SCENARIO mixed ok: {all} payloads both ways");
}

/// One pair's large transfer does not stall another pair that shares its
/// trustee: while thread 0 sends 64 MiB to a property on thread 4 and
/// takes 64 MiB back, thread 2 (another process) keeps making small round
/// trips to another property on thread 4.
fn nostall() {
    let big = gossamer::entrust_on(4, Vec::<u8>::new());
    let small = gossamer::entrust_on(4, 0u64);
    let started = gossamer::entrust_on(0, false);
    let finished = gossamer::entrust_on(2, false);
    let other = gossamer::spawn_with(
        2,
        |(small, started, finished): (Trust<u64>, Trust<bool>, Trust<bool>)| {
            started.apply_with(|s, ()| *s = true, ());
            let mut trips = 0u64;
            // `finished` lives on this thread: reading it is local.
            while !finished.apply_with(|f, ()| *f, ()) {
                small.apply_with(|x, ()| *x += 1, ());
                trips += 1;
            }
            trips
        },
        (small.clone(), started.clone(), finished.clone()),
    );
    while !started.apply_with(|s, ()| *s, ()) {
        gossamer::yield_now();
    }
    let blob: Vec<u8> = (0..64usize << 20).map(|i| (i % 241) as u8).collect();
    let t0 = Instant::now();
    let n = big.apply_with(
        |s, b: Vec<u8>| {
            *s = b;
            s.len()
        },
        blob,
    );
    let back: Vec<u8> = big.apply_with(|s, ()| s.clone(), ());
    let took = t0.elapsed();
    finished.apply_with(|f, ()| *f = true, ());
    let trips = other.join().expect("the small client failed");
    assert_eq!((n, back.len()), (64 << 20, 64 << 20));
    assert_eq!(small.apply_with(|x, ()| *x, ()), trips);
    assert!(trips >= 3, "only {trips} small round trips during the {took:?} of the large transfer");
    println!("SCENARIO nostall ok: {trips} small round trips during {took:?} of 2 x 64 MiB");
}

fn crash() {
    // Rank 2 dies in the middle of the program.
    let h = gossamer::spawn_with::<_, ()>(
        4,
        |()| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
            println!("CRASH_AT {}", now.as_nanos());
            std::process::exit(7);
        },
        (),
    );
    let _ = h.join();
    unreachable!("the program should have stopped");
}

fn killed() {
    let _ = gossamer::spawn_with::<_, ()>(
        2,
        |()| {
            // SAFETY: sends SIGKILL to this very process.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        },
        (),
    )
    .join();
    unreachable!("the program should have stopped");
}

/// `launch` on trustees in other processes, as within one: the closure
/// holds the latch while it blocks (fibers of every process launching
/// increments that yield between read and write lose none), may use other
/// trusts, and its result, its `then` and its panic come back.
fn launch() {
    use gossamer::Latch;
    let latch: Trust<Latch<u64>> =
        gossamer::spawn_with(4, |()| gossamer::local_trustee().entrust(Latch::new(0u64)), ()).join().unwrap();
    let other = gossamer::entrust_on(2, 0u64);
    // Threads 0, 1 (this process), 2, 3 (another) and 5 (the latch's own
    // process, another thread).
    let fibers: Vec<_> = [0usize, 1, 2, 3, 5]
        .iter()
        .map(|&t| {
            gossamer::spawn_with(
                t,
                |(latch, other): (Trust<Latch<u64>>, Trust<u64>)| {
                    for _ in 0..20 {
                        latch.launch_with(
                            |v, other: Trust<u64>| {
                                let before = *v;
                                other.apply_with(|o, ()| *o += 1, ());
                                gossamer::yield_now();
                                *v = before + 1;
                            },
                            other.clone(),
                        );
                    }
                },
                (latch.clone(), other.clone()),
            )
        })
        .collect();
    for f in fibers {
        f.join().unwrap();
    }
    assert_eq!(latch.launch_with(|v, ()| *v, ()), 100, "an update was lost: the latch was not held");
    assert_eq!(other.apply_with(|o, ()| *o, ()), 100);

    let got = std::rc::Rc::new(std::cell::Cell::new(None));
    let g = got.clone();
    latch.launch_with_then(
        |v, ()| {
            *v += 1;
            *v
        },
        (),
        move |n| g.set(Some(n)),
    );
    let t0 = Instant::now();
    while got.get().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "launch_then never called back");
        gossamer::yield_now();
    }
    assert_eq!(got.get(), Some(101));

    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        latch.launch_with(|_, ()| -> u64 { panic!("the launched closure gives up") }, ())
    }))
    .expect_err("the panic did not come back");
    let m = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(m.contains("gives up"), "{m}");
    assert_eq!(latch.launch_with(|v, k: u64| *v + k, 1), 102, "the latch was not released after the panic");
    println!("SCENARIO launch ok");
}

fn leader_panics() {
    let _t = gossamer::entrust_on(3, 0u64);
    panic!("rank 0 gives up");
}

fn small() {
    let t = gossamer::entrust_on(1, 40u64);
    assert_eq!(t.apply_with(|v, ()| *v + 2, ()), 42);
    // No rank keeps the program's secret in its environment, so nothing it
    // starts inherits it: checked here (rank 0) and on the last rank.
    assert_eq!(secret_seen_here(), ["unset", "unset"]);
    let last = gossamer::entrust_on(5, ());
    assert_eq!(last.apply_with(|_, ()| secret_seen_here(), ()), ["unset", "unset"]);
    println!("SCENARIO small ok");
}

/// `GOSSAMER_SECRET` as this process sees it and as a child it starts does.
fn secret_seen_here() -> [String; 2] {
    let own = std::env::var("GOSSAMER_SECRET").unwrap_or_else(|_| "unset".into());
    let child = Command::new("sh").args(["-c", "printf %s \"${GOSSAMER_SECRET-unset}\""]).output().unwrap();
    [own, String::from_utf8_lossy(&child.stdout).into_owned()]
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        "counters" => counters,
        "ordering" => ordering,
        "refcount" => refcount,
        "payload" => payload,
        "crash" => crash,
        "huge" => huge,
        "mixed" => mixed,
        "nostall" => nostall,
        "launch" => launch,
        "killed" => killed,
        "leader_panics" => leader_panics,
        "small" => small,
        "mismatch" => || unreachable!("never started"),
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, 6);
    common::assert_no_thread_left("rank 0");
}

// ---- the tests (run the scenarios as programs) ------------------------------

fn scenario(name: &str) -> Command {
    programs::scenario(name, 3)
}

fn expect_ok(name: &str) -> String {
    let (out, _) = run_program(scenario(name), Duration::from_secs(120));
    programs::passed(&out, name)
}

#[test]
fn three_processes_times_two_threads_count_exactly_and_load_at_different_addresses() {
    expect_ok("counters");
}

#[test]
fn launch_holds_the_latch_across_processes() {
    expect_ok("launch");
}

#[test]
fn apply_then_keeps_issue_order_across_processes() {
    expect_ok("ordering");
}

#[test]
fn trusts_travel_between_processes_and_the_property_drops_once() {
    expect_ok("refcount");
}

#[test]
fn megabyte_payloads_cross_processes() {
    let t = expect_ok("payload");
    println!("{}", t.lines().find(|l| l.contains("SCENARIO payload")).unwrap_or_default());
}

#[test]
fn payloads_larger_than_the_bulk_area_cross_in_chunks_both_ways() {
    let mut cmd = scenario("huge");
    // Copying 64 MiB in a debug build keeps a thread busy for a while on a
    // loaded machine: a long silence limit, so that it is not taken for hung.
    cmd.env("GOSSAMER_BULK_BYTES", (1 << 20).to_string()).env("GOSSAMER_SILENCE_MS", "20000");
    let (out, _) = run_program(cmd, Duration::from_secs(300));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO huge ok"), "{t}");
    println!("{}", t.lines().filter(|l| l.starts_with("HUGE")).collect::<Vec<_>>().join("\n"));
}

#[test]
fn random_payloads_cross_byte_exact_both_ways_under_concurrency() {
    let mut cmd = scenario("mixed");
    // A small bulk area, so that the largest payloads cross in chunks; a
    // long silence limit, since debug builds of six busy threads share the
    // test machine's cores.
    cmd.env("GOSSAMER_BULK_BYTES", (64 << 10).to_string()).env("GOSSAMER_SILENCE_MS", "20000");
    let (out, _) = run_program(cmd, Duration::from_secs(300));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO mixed ok"), "{t}");
}

#[test]
fn a_large_transfer_does_not_stall_another_pair() {
    let mut cmd = scenario("nostall");
    cmd.env("GOSSAMER_BULK_BYTES", (1 << 20).to_string()).env("GOSSAMER_SILENCE_MS", "20000");
    let (out, _) = run_program(cmd, Duration::from_secs(300));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO nostall ok"), "{t}");
    println!("{}", t.lines().find(|l| l.contains("SCENARIO nostall")).unwrap_or_default());
}

#[test]
fn a_crashing_rank_stops_the_whole_program_and_is_named() {
    let (out, took) = run_program(scenario("crash"), Duration::from_secs(60));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("rank 2 failed") && t.contains("status 7"), "the failure names the rank and the cause:\n{t}");
    if let Some(at) = t.lines().find_map(|l| l.split("CRASH_AT ").nth(1)) {
        let at: u128 = at.trim().parse().unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        println!(
            "crash to exit of the whole program: at most {:?} (whole run {took:?})",
            Duration::from_nanos((now - at) as u64)
        );
    }
}

#[test]
fn a_rank_killed_by_a_signal_is_named_with_its_signal() {
    let (out, _) = run_program(scenario("killed"), Duration::from_secs(60));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("rank 1 failed") && t.contains("signal 9"), "{t}");
}

#[test]
fn a_panic_in_rank_0_takes_the_other_ranks_down() {
    let (out, _) = run_program(scenario("leader_panics"), Duration::from_secs(60));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("rank 0 gives up"), "{t}");
}

/// Starts each rank by hand, as Slurm's `srun` would, with its variables.
fn external_ranks(exe: &std::path::Path, size: usize, scenario: &str, sock: &std::path::Path) -> Vec<Command> {
    (0..size)
        .map(|r| {
            let mut c = Command::new(exe);
            c.args(["--exact", "scenario_entry", "--nocapture", "--test-threads=1"])
                .env("GOSSAMER_SCENARIO", scenario)
                .env("SLURM_PROCID", r.to_string())
                .env("SLURM_NTASKS", size.to_string())
                .env("GOSSAMER_RENDEZVOUS", sock)
                .env("GOSSAMER_SECRET", "external-ranks-test-secret")
                .env_remove("GOSSAMER_SECRET_FILE")
                .env_remove("GOSSAMER_PROCESSES")
                .env_remove("GOSSAMER_RANK")
                .env_remove("GOSSAMER_SIZE");
            c
        })
        .collect()
}

#[test]
fn ranks_started_by_an_external_launcher_form_one_program() {
    let dir = std::env::temp_dir().join(format!("gossamer-slurm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("rendezvous.sock");
    let me = std::env::current_exe().unwrap();
    let mut cmds = external_ranks(&me, 2, "small", &sock);
    let rank1 = cmds.pop().unwrap();
    let h = std::thread::spawn(move || run_program(rank1, Duration::from_secs(60)));
    let (out0, _) = run_program(cmds.pop().unwrap(), Duration::from_secs(60));
    let (out1, _) = h.join().unwrap();
    assert!(out0.status.success(), "{}", text(&out0));
    assert!(out1.status.success(), "{}", text(&out1));
    assert!(text(&out0).contains("SCENARIO small ok"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rank_running_a_different_binary_is_refused() {
    // Rank 1 runs a copy of this binary with a byte appended: same code,
    // different file, as when a host has a stale build.
    let dir = std::env::temp_dir().join(format!("gossamer-mismatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let other = dir.join("other");
    let mut bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    bytes.push(0);
    std::fs::write(&other, bytes).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let sock = dir.join("rendezvous.sock");
    let rank = |exe: &std::path::Path, r: usize| {
        let mut c = Command::new(exe);
        c.args(["--exact", "scenario_entry", "--nocapture", "--test-threads=1"])
            .env("GOSSAMER_SCENARIO", "mismatch")
            .env("GOSSAMER_RANK", r.to_string())
            .env("GOSSAMER_SIZE", "2")
            .env("GOSSAMER_RENDEZVOUS", &sock)
            .env("GOSSAMER_SECRET", "mismatch-test-secret")
            .env_remove("GOSSAMER_SECRET_FILE")
            .env_remove("GOSSAMER_PROCESSES");
        c
    };
    let me = std::env::current_exe().unwrap();
    let h = std::thread::spawn({
        let c = rank(&other, 1);
        move || run_program(c, Duration::from_secs(60))
    });
    let (out0, _) = run_program(rank(&me, 0), Duration::from_secs(60));
    let (out1, _) = h.join().unwrap();
    let (t0, t1) = (text(&out0), text(&out1));
    assert!(!out0.status.success() && !out1.status.success(), "{t0}\n{t1}");
    assert!(t0.contains("rank 1") && t0.contains("different binary"), "{t0}");
    assert!(t1.contains("refused"), "{t1}");
    let _ = std::fs::remove_dir_all(&dir);
}
