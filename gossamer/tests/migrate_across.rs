//! A property that moves while other processes use it: a real
//! two-process program (this test binary re-runs itself with
//! `GOSSAMER_SCENARIO` set; `gossamer::main` starts the other rank), and
//! the same program in one process in strict mode.
//!
//! Rank 0 owns a tally on trustee 0 and moves it between its trustees 0
//! and 1 over and over. Fibers on rank 1 hold trusts to it (sent with
//! `spawn_with`) and issue every `fn` form that crosses processes
//! (`apply_with`, `apply_with_then`, `try_apply_with_then`,
//! `apply_with_async`), while a fiber on rank 0 issues closures. Each
//! request carries its client's sequence number: the tally counts every
//! request once and notes any that arrives out of its client's order. At
//! the end the totals are exact, nothing ran out of order, each client's
//! callbacks ran in issue order, and the value is dropped exactly once
//! after the last trust, remote ones included.
//!
//! A second program launches from rank 1 (`launch_with`) on a latched
//! counter of rank 0 that moves between rounds: each launch runs where the
//! value is, and every one runs once.
//!
//! A third moves the tally once before rank 1's clients start: each client
//! thread learns where the value went from its first relayed request and
//! sends the rest there by its route, so that only a few requests are
//! relayed (`gossamer::stats`), with the same totals and order. A fourth
//! mixes launches into those routed requests: a launch starts at the
//! origin, yet runs after the requests its client sent by the route.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gossamer::Trust;

mod common;
use common::programs::{passed, run_program, scenario};
use common::tally::{Tally, DROPS};

/// Two processes (real, or simulated in strict mode) of 2 threads each.
const GROUPS: usize = 2;
const THREADS: usize = 4;
/// Client fibers per thread of rank 1.
const FIBERS: usize = 2;
/// Requests per client fiber.
const OPS: u64 = 1500;
/// Rank 1's clients, and one more on rank 0.
const CLIENTS: usize = 2 * FIBERS + 1;
const LOCAL: u32 = (CLIENTS - 1) as u32;

/// Set once every client is done: the moves stop.
static STOP: AtomicBool = AtomicBool::new(false);

/// One client in another process: every form that crosses, in turn; the
/// callbacks note the sequence numbers they get, which must come in order.
fn remote_client((tally, client): (Trust<Tally>, u32)) -> u64 {
    let called = Rc::new(RefCell::new(Vec::new()));
    for seq in 0..OPS {
        let c = called.clone();
        match seq % 4 {
            0 => assert_eq!(tally.apply_with(Tally::add, (client, seq)), seq),
            1 => tally.apply_with_then(Tally::add, (client, seq), move |s| c.borrow_mut().push(s)),
            2 => tally.try_apply_with_then(Tally::add, (client, seq), move |r| c.borrow_mut().push(r.expect("ran"))),
            _ => assert_eq!(gossamer::block_on(tally.apply_with_async(Tally::add, (client, seq))), seq),
        }
        if seq % 32 == 0 {
            gossamer::yield_now();
        }
    }
    // Waits behind this fiber's earlier requests: all have run.
    let seen = tally.apply_with(|t, c: u32| t.next[c as usize], client);
    assert_eq!(seen, OPS, "client {client}: its last request was the last one counted");
    let called = called.borrow();
    assert_eq!(called.len() as u64, OPS / 2, "client {client}: callbacks missing");
    assert!(called.windows(2).all(|w| w[0] < w[1]), "client {client}: callbacks out of issue order");
    OPS
}

/// The client in the owner's process, with closures.
fn local_client(tally: &Trust<Tally>) -> u64 {
    for seq in 0..OPS {
        if seq % 2 == 0 {
            tally.apply(move |t| t.add((LOCAL, seq)));
        } else {
            tally.apply_then(move |t| t.add((LOCAL, seq)), |_| {});
        }
        if seq % 32 == 0 {
            gossamer::yield_now();
        }
    }
    OPS
}

fn moves() {
    let topo = gossamer::topology();
    assert_eq!(topo.threads(), THREADS);
    let per = THREADS / GROUPS;
    let tally = gossamer::trustee(0).entrust(Tally::new(CLIENTS));
    let mover = {
        let t = tally.clone();
        gossamer::spawn_on(1, move || {
            let mut n = 0u64;
            while !STOP.load(Ordering::SeqCst) {
                t.migrate_to(gossamer::trustee((n % 2) as usize));
                n += 1;
                gossamer::yield_now();
            }
            n
        })
    };
    let remote: Vec<_> = (0..FIBERS * 2)
        .map(|i| gossamer::spawn_with(per + i % per, remote_client, (tally.clone(), i as u32)))
        .collect();
    let local = {
        let t = tally.clone();
        gossamer::spawn_on(1, move || local_client(&t))
    };
    let mut sent = local.join().expect("the client in the owner's process failed");
    for h in remote {
        sent += h.join().expect("a client in another process failed");
    }
    STOP.store(true, Ordering::SeqCst);
    let moved = mover.join().expect("the mover failed");
    let (total, misordered, next) = tally.apply(|t| (t.total, t.misordered, t.next.clone()));
    assert_eq!(sent, CLIENTS as u64 * OPS);
    assert_eq!(total, sent, "every request counted exactly once");
    assert_eq!(misordered, 0, "requests out of their client's order");
    assert!(next.iter().all(|&n| n == OPS), "{next:?}");
    assert!(moved >= 10, "only {moved} moves: the test lost its point");
    println!("TOTAL {total} of {sent}, misordered {misordered}, moves {moved}");
    // The value goes once, after the last trust: the remote ones went with
    // their fibers (their drops are requests to the first trustee).
    assert_eq!(DROPS.load(Ordering::SeqCst), 0);
    drop(tally);
    common::yield_until(Duration::from_secs(20), || DROPS.load(Ordering::SeqCst) != 0);
    assert_eq!(DROPS.load(Ordering::SeqCst), 1, "dropped once, after the last trust");
    println!("SCENARIO moves ok");
}

/// Rank 1's clients of a tally that moved once: few of their requests are
/// relayed by its first cell; the rest go by their threads' routes.
fn routes() {
    let per = THREADS / GROUPS;
    let tally = gossamer::trustee(0).entrust(Tally::new(CLIENTS));
    tally.migrate_to(gossamer::trustee(1));
    let before = gossamer::stats().relayed_requests;
    let remote: Vec<_> = (0..FIBERS * 2)
        .map(|i| gossamer::spawn_with(per + i % per, remote_client, (tally.clone(), i as u32)))
        .collect();
    let mut sent = 0;
    for h in remote {
        sent += h.join().expect("a client in another process failed");
    }
    let relayed = gossamer::stats().relayed_requests - before;
    let (total, misordered) = tally.apply(|t| (t.total, t.misordered));
    assert_eq!(total, sent, "every request counted exactly once");
    assert_eq!(misordered, 0, "requests out of their client's order");
    // Each client thread's requests in flight before its first relayed
    // result came back are relayed, and none after: a few per thread.
    println!("RELAYED {relayed} of {sent}");
    assert!(relayed > 0, "the tally moved: the first requests are relayed");
    assert!(relayed < sent / 20, "{relayed} of {sent} requests relayed: the clients kept no route");
    assert_eq!(DROPS.load(Ordering::SeqCst), 0);
    drop(tally);
    // The last trust gone, the first cell asks rank 1's threads for their
    // routes back before anything is freed.
    common::yield_until(Duration::from_secs(20), || DROPS.load(Ordering::SeqCst) != 0);
    assert_eq!(DROPS.load(Ordering::SeqCst), 1, "dropped once, after the last trust");
    println!("SCENARIO routes ok");
}

/// Launches from rank 1 (`launch_with`, the form that crosses) on a
/// latched counter of rank 0 that moved: each runs where the value is.
fn launches() {
    let per = THREADS / GROUPS;
    let counter = gossamer::trustee(0).entrust(gossamer::Latch::new(0u64));
    for (round, to) in [1usize, 0, 1].into_iter().enumerate() {
        counter.migrate_to(gossamer::trustee(to));
        let clients: Vec<_> = (0..2)
            .map(|i| {
                gossamer::spawn_with(
                    per + i,
                    |c: Trust<gossamer::Latch<u64>>| {
                        (0..50)
                            .map(|_| {
                                c.launch_with(
                                    |v, ()| {
                                        gossamer::yield_now(); // may block: it is a launch
                                        *v += 1;
                                        gossamer::current_thread().unwrap()
                                    },
                                    (),
                                )
                            })
                            .collect::<Vec<usize>>()
                    },
                    counter.clone(),
                )
            })
            .collect();
        for h in clients {
            let ran_on = h.join().expect("a launching client in another process failed");
            assert!(ran_on.iter().all(|&t| t == to), "round {round}: launches ran on {ran_on:?}, the value is on {to}");
        }
    }
    assert_eq!(counter.launch(|v| *v), 300, "every launch ran exactly once");
    println!("SCENARIO launches ok");
}

/// The one client, in another process, of a latched tally that moved:
/// runs of `apply_with_then` (sent by the thread's route once it has one),
/// each followed by launches (which start at the origin): a
/// `launch_with_then` or a `launch_with`, then a `launch_with`. (One
/// client only: a request that reaches the value while a launch of
/// another client holds the latch is refused, whatever the order.)
fn routed_launcher(tally: Trust<gossamer::Latch<Tally>>) -> u64 {
    let client = 0;
    for seq in 0..4 * OPS {
        let a = (client, seq);
        match seq % 8 {
            6 if seq / 8 % 2 == 0 => tally.launch_with_then(Tally::add, a, |_| ()),
            6 | 7 => drop(tally.launch_with(Tally::add, a)),
            _ => tally.apply_with_then(|l, a| l.get_mut().add(a), a, |_| ()),
        }
    }
    // Runs after every request above.
    tally.launch_with(|_, ()| (), ());
    4 * OPS
}

/// Launches from rank 1 mixed into requests sent by routes (see
/// `routed_launcher`): every one runs once, in its client's order.
fn routed_launches() {
    let per = THREADS / GROUPS;
    let tally = gossamer::trustee(0).entrust(gossamer::Latch::new(Tally::new(1)));
    tally.migrate_to(gossamer::trustee(1));
    let before = gossamer::stats().relayed_requests;
    let sent = gossamer::spawn_with(per, routed_launcher, tally.clone())
        .join()
        .expect("the client in another process failed (a request refused: a launch overtook it)");
    let relayed = gossamer::stats().relayed_requests - before;
    let (total, misordered) = tally.launch(|t| (t.total, t.misordered));
    assert_eq!(total, sent, "every request counted exactly once");
    assert_eq!(misordered, 0, "requests out of their client's order");
    println!("RELAYED {relayed} of {sent}");
    // In strict mode, where the processes are simulated, a client of
    // another one keeps no route: its requests are all relayed.
    if std::env::var_os("GOSSAMER_STRICT").is_none() {
        assert!(relayed < sent / 20, "{relayed} of {sent} requests relayed: the clients kept no route");
    }
    drop(tally);
    common::yield_until(Duration::from_secs(20), || DROPS.load(Ordering::SeqCst) != 0);
    assert_eq!(DROPS.load(Ordering::SeqCst), 1, "dropped once, after the last trust");
    println!("SCENARIO routed_launches ok");
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        "moves" => moves,
        "launches" => launches,
        "routes" => routes,
        "routed_launches" => routed_launches,
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, THREADS);
}

#[test]
fn other_processes_keep_using_a_property_while_it_moves() {
    let (out, _) = run_program(scenario("moves", GROUPS), Duration::from_secs(180));
    passed(&out, "moves");
}

/// The same program in one process whose workers form two simulated
/// processes.
#[test]
fn the_same_in_strict_mode() {
    let mut cmd = scenario("moves", 1);
    cmd.env("GOSSAMER_STRICT", GROUPS.to_string());
    let (out, _) = run_program(cmd, Duration::from_secs(180));
    passed(&out, "moves");
}

#[test]
fn launches_from_another_process_follow_the_property() {
    let (out, _) = run_program(scenario("launches", GROUPS), Duration::from_secs(120));
    passed(&out, "launches");
}

#[test]
fn other_processes_send_by_routes_to_a_property_that_moved() {
    let (out, _) = run_program(scenario("routes", GROUPS), Duration::from_secs(120));
    passed(&out, "routes");
}

#[test]
fn launches_from_another_process_run_after_its_routed_requests() {
    let (out, _) = run_program(scenario("routed_launches", GROUPS), Duration::from_secs(120));
    passed(&out, "routed_launches");
}

#[test]
fn routed_launches_in_strict_mode() {
    let mut cmd = scenario("routed_launches", 1);
    cmd.env("GOSSAMER_STRICT", GROUPS.to_string());
    let (out, _) = run_program(cmd, Duration::from_secs(120));
    passed(&out, "routed_launches");
}

/// Runs scenario `name` over two hosts (host names only, on this
/// machine): each rank started as an external launcher would, bytes
/// between them through UCX over TCP, hints and route messages included.
/// Rank 0's output.
fn over_two_hosts(name: &str) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let rendezvous = format!("127.0.0.1:{port}");
    let mut ranks: Vec<_> = (0..GROUPS)
        .map(|r| {
            let mut c = scenario(name, GROUPS);
            c.env_remove("GOSSAMER_PROCESSES")
                .env_remove("GOSSAMER_SECRET_FILE")
                .env("GOSSAMER_HOST", format!("h{r}"))
                .env("UCX_TLS", "tcp")
                .env("GOSSAMER_SILENCE_MS", "6000")
                .env("GOSSAMER_RANK", r.to_string())
                .env("GOSSAMER_SIZE", GROUPS.to_string())
                .env("GOSSAMER_RENDEZVOUS", &rendezvous)
                .env("GOSSAMER_SECRET", format!("migrate-test-{}", std::process::id()));
            c
        })
        .collect();
    let rank0 = ranks.remove(0);
    let others: Vec<_> =
        ranks.into_iter().map(|c| std::thread::spawn(move || run_program(c, Duration::from_secs(180)).0)).collect();
    let (out, _) = run_program(rank0, Duration::from_secs(180));
    let t = passed(&out, name);
    for h in others {
        let o = h.join().unwrap();
        assert!(o.status.success(), "rank 1 of {name} failed:\n{}", common::programs::text(&o));
    }
    t
}

/// Routes from another host: the hints, and the messages that ask for a
/// route back and give it back, cross the fabric.
#[test]
fn routes_cross_hosts_too() {
    if common::netns::ucx_or_skip() {
        let t = over_two_hosts("routes");
        assert!(t.contains("RELAYED"), "{t}");
    }
}

/// Launches from another host behind requests sent there by its route.
#[test]
fn routed_launches_cross_hosts_too() {
    if common::netns::ucx_or_skip() {
        over_two_hosts("routed_launches");
    }
}

/// Clients on another host of a property that keeps moving: requests sent
/// by stale routes reach records, which relay them and tell where the
/// value went.
#[test]
fn moves_with_clients_on_another_host() {
    if common::netns::ucx_or_skip() {
        over_two_hosts("moves");
    }
}
