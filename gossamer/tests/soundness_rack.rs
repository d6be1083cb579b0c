//! Soundness across processes: what safe code does with trusts and results
//! that cross processes must end in a correct result or a prompt, clear
//! failure — never a panic inside the runtime, an abort or a silent hang.
//! Each scenario runs as a real program of two processes (this test binary
//! re-run with `GOSSAMER_SCENARIO` set, as in `tests/rack.rs`).
//!
//! The decoders of what another process wrote (slot contents, record
//! lengths, bulk offsets) are pinned by the library's unit tests
//! (`channel::record`, `channel::slot`, `channel::remote_slot`), which run
//! under Miri as well.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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

/// Drops of `Counted` values in the process of thread 2 (rank 1).
fn drops_on_rank1() -> usize {
    gossamer::spawn_with(2, |()| DROPS.load(Ordering::SeqCst), ()).join().unwrap()
}

/// Waits (yielding the fiber) for a plain thread to end.
fn join_plain<R>(h: std::thread::JoinHandle<R>) -> std::thread::Result<R> {
    let start = Instant::now();
    while !h.is_finished() {
        assert!(start.elapsed() < Duration::from_secs(30), "a plain thread did not finish");
        gossamer::yield_now();
    }
    h.join()
}

/// A trust to a property in another process, cloned and dropped on plain
/// threads outside the runtime, and dropped while such a thread unwinds.
fn plain_threads() {
    let t = gossamer::entrust_on(3, Counted(5));
    let a = t.clone();
    let r = join_plain(std::thread::spawn(move || {
        let b = a.clone();
        let c = b.clone();
        drop(a);
        drop(b);
        drop(c);
    }));
    assert!(r.is_ok(), "cloning and dropping on a plain thread panicked");
    let held = t.clone();
    let r = join_plain(std::thread::spawn(move || {
        let _held = held;
        panic!("the plain thread gives up while holding a trust");
    }));
    assert!(r.is_err(), "the plain thread's own panic comes back");
    assert_eq!(t.apply_with(|c, ()| c.0, ()), 5, "the property is intact");
    assert_eq!(drops_on_rank1(), 0, "dropped while a trust remained");
    // The last trust goes on a plain thread too: the property is dropped once.
    let r = join_plain(std::thread::spawn(move || drop(t)));
    assert!(r.is_ok());
    let start = Instant::now();
    while drops_on_rank1() == 0 && start.elapsed() < Duration::from_secs(20) {
        gossamer::yield_now();
    }
    assert_eq!(drops_on_rank1(), 1, "the property is dropped exactly once, after its last trust");
    println!("SCENARIO plain_threads ok");
}

/// Many small requests to another process in one batch: each one a
/// record of two words (cached code, nothing captured, no argument), whose
/// answers take more room than the requests did.
fn many_small() {
    let t = gossamer::entrust_on(2, 0u64);
    for _ in 0..300 {
        t.apply_with_then(|v, ()| *v += 1, (), |_| {});
    }
    assert_eq!(t.apply_with(|v, ()| *v, ()), 300);
    println!("SCENARIO many_small ok");
}

/// A type whose bytes never decode: its `Deserialize` always refuses.
#[derive(Debug)]
struct Undecodable;

impl serde::Serialize for Undecodable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(7)
    }
}

impl<'de> serde::Deserialize<'de> for Undecodable {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom("this type never decodes"))
    }
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// An undecodable result, caught: a panic in the waiting fiber that names
/// the type; the program goes on.
fn undecodable_caught() {
    let t = gossamer::entrust_on(2, 0u64);
    let p = catch_unwind(AssertUnwindSafe(|| t.apply_with(|_, ()| Undecodable, ())))
        .expect_err("the result cannot have decoded");
    let m = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(m.contains("Undecodable") && m.contains("decode"), "the panic names the type and the cause: {m}");
    // The trustee and the pair keep working.
    assert_eq!(t.apply_with(|v, ()| *v + 1, ()), 1);
    println!("SCENARIO undecodable_caught ok");
}

/// An undecodable result, not caught: the program ends at once.
fn undecodable_uncaught() {
    let t = gossamer::entrust_on(2, 0u64);
    println!("PANIC_AT {}", now_nanos());
    let _ = t.apply_with(|_, ()| Undecodable, ());
    unreachable!("the result cannot have decoded");
}

/// A panic in the program's main function.
fn main_panics() {
    let _t = gossamer::entrust_on(3, 0u64);
    println!("PANIC_AT {}", now_nanos());
    panic!("the main function gives up");
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        "plain_threads" => plain_threads,
        "undecodable_caught" => undecodable_caught,
        "undecodable_uncaught" => undecodable_uncaught,
        "main_panics" => main_panics,
        "many_small" => many_small,
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, 4);
}

// ---- the tests (run the scenarios as programs) ------------------------------

fn scenario(name: &str) -> Command {
    programs::scenario(name, 2)
}

fn expect_ok(name: &str) {
    let (out, _) = run_program(scenario(name), Duration::from_secs(120));
    programs::passed(&out, name);
}

/// Runs a scenario that fails; returns its output and how long it took
/// from the moment it printed `PANIC_AT` to its end.
fn expect_prompt_failure(name: &str) -> (String, Duration) {
    // No backtrace: symbolising one takes seconds under a sanitizer, and
    // what is measured is how soon the program stops.
    let mut cmd = scenario(name);
    cmd.env("RUST_BACKTRACE", "0");
    let (out, _) = run_program(cmd, Duration::from_secs(120));
    let end = now_nanos();
    let t = text(&out);
    assert!(!out.status.success(), "scenario {name} should have failed:\n{t}");
    let at: u128 = t
        .lines()
        .find_map(|l| l.split("PANIC_AT ").nth(1))
        .unwrap_or_else(|| panic!("no PANIC_AT in:\n{t}"))
        .trim()
        .parse()
        .unwrap();
    (t, Duration::from_nanos((end - at) as u64))
}

/// Generous against a loaded machine, and well under the shutdown
/// timeout (10 s) that a failing program once waited for; under a
/// sanitizer (CI sets `GOSSAMER_SANITIZER`), whose processes start and
/// end several times slower, still under it.
fn prompt() -> Duration {
    Duration::from_secs(if std::env::var_os("GOSSAMER_SANITIZER").is_some() { 9 } else { 5 })
}

#[test]
fn a_trust_to_another_process_is_cloned_and_dropped_on_plain_threads() {
    expect_ok("plain_threads");
}

#[test]
fn a_full_batch_of_minimal_requests_to_another_process_gets_every_answer() {
    expect_ok("many_small");
}

#[test]
fn an_undecodable_result_panics_in_the_waiting_fiber_naming_its_type() {
    expect_ok("undecodable_caught");
}

#[test]
fn an_uncaught_undecodable_result_ends_the_program_at_once_with_a_message() {
    let (t, took) = expect_prompt_failure("undecodable_uncaught");
    assert!(t.contains("Undecodable") && t.contains("rank 0"), "the failure names the type and the rank:\n{t}");
    assert!(took < prompt(), "the program took {took:?} to end after the failure:\n{t}");
}

#[test]
fn a_panic_in_main_ends_a_program_of_two_processes_at_once() {
    let (t, took) = expect_prompt_failure("main_panics");
    assert!(t.contains("the main function gives up") && t.contains("rank 0"), "{t}");
    assert!(took < prompt(), "the program took {took:?} to end after the panic:\n{t}");
}
