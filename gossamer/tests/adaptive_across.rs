//! An adaptive property used from other processes: real three-process
//! programs (this test binary re-runs itself with `GOSSAMER_SCENARIO` set;
//! `gossamer::main` starts the other ranks), and the same program in one
//! process in strict mode.
//!
//! Rank 0 owns an adaptive tally. Fibers on ranks 1 and 2 get handles to
//! it through `spawn_with` and hammer it with the `fn` forms (`apply_with`,
//! `apply_with_then`, `try_apply_with_then`, `apply_with_async`), which
//! are delegated to the trustee; meanwhile fibers on rank 0 use it in place
//! or delegated through their own handles, and one of them flips its policy
//! through delegate, lock and adaptive; one handle also comes back from
//! rank 1 to rank 0, where it delegates. Each request carries its client's
//! sequence number: the tally counts every request once and notes any that
//! arrives out of its client's order. At the end the totals are exact, no
//! request ran out of order, and the value is dropped exactly once after
//! the last handle, remote ones included.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::Duration;

use gossamer::{Adaptive, Mode, Policy};

mod common;
use common::programs::{passed, run_program, scenario};
use common::tally::{Tally, DROPS};

/// Groups of threads that are one process (real, or simulated in strict
/// mode): 3 of 2 threads each.
const GROUPS: usize = 3;
const THREADS: usize = 6;
/// Fibers per thread that use the tally.
const FIBERS: usize = 2;
/// Requests per client fiber.
const OPS: u64 = 2000;
const CLIENTS: usize = THREADS * FIBERS;
/// The client that uses a handle sent back to the owner's process.
const RETURNED: u32 = CLIENTS as u32;

/// One client in another process: every form that crosses, in turn.
fn remote_client((tally, client): (Adaptive<Tally>, u32)) -> (u32, u64) {
    assert_eq!(tally.mode(), Mode::Delegate, "a handle in another process always delegates");
    let mut sent = 0u64;
    for seq in 0..OPS {
        match seq % 4 {
            0 => {
                tally.apply_with(Tally::add, (client, seq));
            }
            1 => tally.apply_with_then(Tally::add, (client, seq), |s| assert!(s < OPS)),
            2 => tally.try_apply_with_then(Tally::add, (client, seq), |r| assert!(r.is_ok_and(|s| s < OPS))),
            _ => drop(tally.apply_with_async(Tally::add, (client, seq))),
        }
        sent += 1;
    }
    // A generic closure does not cross: refused here, before anything is
    // sent, as for a `Trust`.
    if client as usize == FIBERS * 2 {
        let p = catch_unwind(AssertUnwindSafe(|| tally.apply(|t| t.total))).expect_err("a closure crossed");
        let m = p.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(m.contains("apply_with"), "the refusal names the fix: {m}");
        println!("REFUSED apply on a remote handle: {}", m.lines().next().unwrap_or_default());
        // The policy is the trustee's to tell, and to set from here too.
        let p = tally.policy();
        tally.set_policy(p);
        // A handle sent back to the owner's process delegates there too.
        sent += gossamer::spawn_with(1, returned_client, (tally.clone(), RETURNED)).join().expect("returned client");
    }
    // Waits behind this fiber's earlier requests: all have run.
    let seen = tally.apply_with(|t, c: u32| t.next[c as usize], client);
    assert_eq!(seen, OPS, "client {client}: its last request was the last one counted");
    (client, sent)
}

/// A client in the owner's process whose handle came from another process:
/// it delegates every call, closures included (they stay in the process).
fn returned_client((tally, client): (Adaptive<Tally>, u32)) -> u64 {
    assert_eq!(tally.mode(), Mode::Delegate);
    for seq in 0..OPS {
        if seq % 2 == 0 {
            tally.apply(move |t| t.add((client, seq)));
        } else {
            tally.apply_with_then(Tally::add, (client, seq), |s| assert!(s < OPS));
        }
    }
    let seen = tally.apply(move |t| t.next[client as usize]);
    assert_eq!(seen, OPS, "client {client}: its last request was the last one counted");
    OPS
}

/// One client in the owner's process; client 0 also flips the policy.
fn local_client(tally: &Adaptive<Tally>, client: u32) -> u64 {
    let policies = [Policy::Delegate, Policy::Lock, Policy::Adaptive];
    for seq in 0..OPS {
        if client == 0 && seq % 50 == 0 {
            tally.set_policy(policies[(seq / 50) as usize % 3]);
        }
        match seq % 3 {
            0 => {
                tally.apply(move |t| t.add((client, seq)));
            }
            1 => tally.apply_then(move |t| t.add((client, seq)), |s| assert!(s < OPS)),
            _ => tally.apply_with_then(Tally::add, (client, seq), |s| assert!(s < OPS)),
        }
        if seq % 16 == 0 {
            gossamer::yield_now();
        }
    }
    let seen = tally.apply(move |t| t.next[client as usize]);
    assert_eq!(seen, OPS, "client {client}: its last request was the last one counted");
    OPS
}

fn hammer() {
    let topo = gossamer::topology();
    assert_eq!(topo.threads(), THREADS);
    let per = THREADS / GROUPS;
    if topo.processes.len() > 1 {
        assert!((0..THREADS).all(|t| topo.rank_of(t) == t / per), "{topo:?}");
    }
    let tally = gossamer::trustee(0).entrust_adaptive(Tally::new(CLIENTS + 1));
    let mut local = Vec::new();
    let mut remote = Vec::new();
    for t in 0..THREADS {
        for f in 0..FIBERS {
            let client = (t * FIBERS + f) as u32;
            if t / per == 0 {
                let a = tally.clone();
                local.push(gossamer::spawn_on(t, move || local_client(&a, client)));
            } else {
                remote.push(gossamer::spawn_with(t, remote_client, (tally.clone(), client)));
            }
        }
    }
    let mut sent = 0;
    for h in local {
        sent += h.join().expect("a client in the owner's process failed");
    }
    for h in remote {
        let (client, n) = h.join().expect("a client in another process failed");
        assert!(client as usize >= per * FIBERS);
        sent += n;
    }
    let (total, misordered, next) = tally.apply(|t| (t.total, t.misordered, t.next.clone()));
    assert_eq!(sent, (CLIENTS as u64 + 1) * OPS);
    assert_eq!(total, sent, "every request counted exactly once");
    assert_eq!(misordered, 0, "requests out of their client's order");
    assert!(next.iter().all(|&n| n == OPS), "{next:?}");
    println!("TOTAL {total} of {sent}, misordered {misordered}, mode at the end {:?}", tally.mode());

    // The value goes once, after the last handle: the remote ones went
    // with their fibers (their drops are requests to the trustee).
    assert_eq!(DROPS.load(Ordering::SeqCst), 0);
    drop(tally);
    common::yield_until(Duration::from_secs(20), || DROPS.load(Ordering::SeqCst) != 0);
    assert_eq!(DROPS.load(Ordering::SeqCst), 1, "dropped once, after the last handle");
    println!("SCENARIO hammer ok");
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        "hammer" => hammer,
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, THREADS);
}

fn check(out: &std::process::Output) {
    let t = passed(out, "hammer");
    assert_eq!(t.matches("REFUSED apply on a remote handle").count(), 1, "{t}");
}

#[test]
fn other_processes_hammer_an_adaptive_property_while_its_owner_flips_the_policy() {
    let (out, _) = run_program(scenario("hammer", GROUPS), Duration::from_secs(180));
    check(&out);
}

/// The same program in one process whose workers form three simulated
/// processes: every rule of the boundary holds, in one address space.
#[test]
fn the_same_in_strict_mode() {
    let mut cmd = scenario("hammer", 1);
    cmd.env("GOSSAMER_STRICT", GROUPS.to_string());
    let (out, _) = run_program(cmd, Duration::from_secs(180));
    check(&out);
}
