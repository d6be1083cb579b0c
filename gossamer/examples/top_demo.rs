//! A small program to watch with `gossamer top`: fibers on every worker
//! hammer a few counters (one much hotter than the others) and a table,
//! with waiting `apply`s and asynchronous `apply_then`s.
//!
//! ```text
//! cargo run --release --example top_demo -- 60 &       # runs 60 s
//! cargo run --release -p gossamer-cli -- top --pid $!   # or --socket PATH
//! ```
//!
//! It serves `gossamer top` (as `GOSSAMER_TOP=1` would) and prints the
//! socket's path. With `--deadlock`, two launched closures also deadlock on
//! each other's latches, for `gossamer top --stuck` (or `kill -USR1`) to
//! show; shutdown then abandons them. With `--stdin`, it also stops when
//! its standard input closes (as tests use it). With `--adaptive`, the
//! fibers also add to two adaptive counters (see `gossamer top
//! --set-policy`), whose totals it checks at the end. With `--follow`, the
//! fibers on worker 1 also add to a counter entrusted to trustee 0 with
//! the `Follow` migration policy, which moves it to trustee 1 (see
//! `gossamer top --set-follow`); its total is checked at the end too.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gossamer::{Adaptive, FollowParams, Latch, MigrationPolicy, Trust};

static STOP: AtomicBool = AtomicBool::new(false);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs: u64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(30);
    let deadlock = args.iter().any(|a| a == "--deadlock");
    let adaptive = args.iter().any(|a| a == "--adaptive");
    let follow = args.iter().any(|a| a == "--follow");
    if args.iter().any(|a| a == "--stdin") {
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            STOP.store(true, Ordering::Relaxed);
        });
    }
    let rt = gossamer::Runtime::builder()
        .workers(2)
        .top_socket(true)
        .dump_on_sigusr1(true)
        .shutdown_timeout(Duration::from_secs(1))
        .build()
        .expect("runtime");
    match rt.top_socket_path() {
        Some(p) => println!("top socket: {}", p.display()),
        None => println!("top socket: none (see the log)"),
    }
    let _ = std::io::stdout().flush();

    let counters: Vec<Trust<u64>> = (0..4).map(|i| rt.trustee(i % 2).entrust(0)).collect();
    let table: Trust<HashMap<u64, String>> = rt.trustee(1).entrust(HashMap::new());
    let adaptives: Vec<Adaptive<u64>> =
        if adaptive { (0..2).map(|i| rt.trustee(i).entrust_adaptive(0)).collect() } else { Vec::new() };
    let follower: Option<Trust<u64>> = follow.then(|| {
        let t = rt.trustee(0).entrust(0);
        let params = FollowParams { window: 64, ..FollowParams::default() };
        let t2 = t.clone();
        rt.block_on(move || t2.set_migration_policy(MigrationPolicy::Follow(params))).expect("follow");
        println!("follow {}", t.profile_id());
        t
    });
    let _ = std::io::stdout().flush();
    let mut fibers = Vec::new();
    for f in 0..8u64 {
        let (counters, table, adaptives) = (counters.clone(), table.clone(), adaptives.clone());
        let follower = follower.clone().filter(|_| f % 2 == 1);
        fibers.push(rt.spawn_on((f % 2) as usize, move || {
            let mut i = 0u64;
            let mut added = 0u64;
            let mut followed = 0u64;
            while !STOP.load(Ordering::Relaxed) {
                // Counter 0 gets 7 of every 10 requests.
                let c = &counters[if i % 10 < 7 { 0 } else { 1 + (i % 3) as usize }];
                c.apply(|v| *v += 1);
                if i % 16 == 0 {
                    table.apply_with_then(|t, k: u64| t.insert(k % 1024, format!("{k}")).is_some(), i, |_| {});
                }
                if let Some(a) = adaptives.get((i % 2) as usize) {
                    if i % 4 < 2 {
                        a.apply(|v| *v += 1);
                    } else {
                        a.apply_then(|v| *v += 1, |()| {});
                    }
                    added += 1;
                }
                if let Some(t) = &follower {
                    t.apply(|v| *v += 1);
                    followed += 1;
                }
                i += 1;
            }
            // A waiting call runs after this fiber's earlier requests: once
            // it returns, every add of this fiber has been made.
            for a in &adaptives {
                a.apply(|v| *v);
            }
            if let Some(t) = &follower {
                t.apply(|v| *v);
            }
            (i, added, followed)
        }));
    }
    if deadlock {
        let a = rt.trustee(0).entrust(Latch::new(0u32));
        let b = rt.trustee(1).entrust(Latch::new(0u32));
        let (a1, b1) = (a.clone(), b.clone());
        rt.spawn_on(0, move || a1.launch_with(|_, b: Trust<Latch<u32>>| b.launch(|v| *v), b1));
        rt.spawn_on(1, move || b.launch_with(|_, a: Trust<Latch<u32>>| a.launch(|v| *v), a));
    }
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end && !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    STOP.store(true, Ordering::Relaxed);
    let (mut issued, mut added, mut followed) = (0, 0, 0);
    for h in fibers {
        let (i, a, f) = h.join().expect("fiber");
        issued += i;
        added += a;
        followed += f;
    }
    println!("{issued} applies issued");
    if adaptive {
        for a in &adaptives {
            println!("adaptive {} policy {:?} mode {:?}", a.profile_id(), a.policy(), a.mode());
        }
        let total: u64 = rt.block_on(move || adaptives.iter().map(|a| a.apply(|v| *v)).sum());
        println!("adaptive adds {added}, counted {total}, exact: {}", added == total);
    }
    if let Some(t) = follower {
        let (total, place) = rt.block_on(move || t.apply(|v| (*v, gossamer::current_thread())));
        println!("follow adds {followed}, counted {total}, exact: {}, on trustee {place:?}", followed == total);
    }
    let report = rt.shutdown();
    println!("shutdown clean: {}", report.clean);
}
