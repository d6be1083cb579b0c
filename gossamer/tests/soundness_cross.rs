//! What may cross a process boundary, tried as an adversarial user would,
//! with safe code only: real multi-process programs (this test binary
//! re-runs itself with `GOSSAMER_SCENARIO` set; `gossamer::main` starts the
//! other ranks).
//!
//! * A closure capturing a zero-sized `Copy + Send` proof made in this
//!   process is not "capturing nothing": generic closures are refused for a
//!   trustee in another process, in the caller, and the `fn` forms do not
//!   compile with it (`tests/ui/crossing_captures_zst_proof.rs`).
//! * A user's `Serialize` that yields while gossamer encodes its message
//!   cannot mix two fibers' messages, nor leave the encoding context open
//!   for a later `postcard` or `serde_json` call to write a trust.
//! * Values that cross are copied: the sender's original is dropped once,
//!   by the time the call returns, and the receiver's copy once, where it
//!   ends; a trust in an argument crosses as a true move. A panic in the
//!   original's `Drop` reaches the caller after the call is complete.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use gossamer::Trust;

mod common;
use common::programs::{run_program, scenario, text};

// ---- the scenarios (run inside the spawned processes) ----------------------

/// A library whose zero-sized token proves that `init` ran in this process.
mod library {
    use std::sync::OnceLock;

    static STATE: OnceLock<u64> = OnceLock::new();

    /// Proof that `init` ran in the process that holds it.
    #[derive(Clone, Copy)]
    pub struct Initialised(());

    pub fn init() -> Initialised {
        STATE.get_or_init(|| 42);
        Initialised(())
    }

    impl Initialised {
        /// A real library would skip the check on the strength of the
        /// proof (an unchecked read): conjured in another process, that is
        /// a wild read. Checked here, so that the test sees it instead.
        pub fn state(self) -> u64 {
            *STATE.get().expect("the proof of initialisation is false in this process")
        }
    }
}

/// The message of the panic `f` raised in this (the calling) process.
fn refusal(f: impl FnOnce()) -> String {
    let p = catch_unwind(AssertUnwindSafe(f)).expect_err("the call was not refused");
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

fn refused(what: &str, f: impl FnOnce()) {
    let m = refusal(f);
    assert!(
        m.contains("another process") && m.contains("only code given as a `fn`") && m.contains("apply_with"),
        "{what}: the refusal names the rule and the fix: {m}"
    );
    println!("REFUSED {what}");
}

fn zst_proof() {
    let far = gossamer::topology().threads() - 1; // on rank 2
    let counter = gossamer::entrust_on(far, 0u64);
    let proof = library::init();
    assert_eq!(std::mem::size_of_val(&proof), 0);
    assert_eq!(counter.apply_with(|c, ()| *c, ()), 0);
    refused("a zero-sized proof via apply", || {
        counter.apply(move |c| {
            *c += 1;
            proof.state()
        });
    });
    refused("a zero-sized proof via apply_then", || {
        counter.apply_then(
            move |c| {
                *c += 1;
                proof.state()
            },
            |_| (),
        );
    });
    let latch: Trust<gossamer::Latch<u64>> =
        gossamer::spawn_with(far, |()| gossamer::local_trustee().entrust(gossamer::Latch::new(0u64)), ())
            .join()
            .unwrap();
    refused("a zero-sized proof via launch", || {
        latch.launch(move |v| *v += proof.state());
    });
    // Nothing ran there; the proof's data crosses as an argument instead,
    // and the trustee's process, which never ran `init`, keeps serving.
    assert_eq!(counter.apply_with(|c, ()| *c, ()), 0, "a refused closure ran in the trustee's process");
    assert_eq!(latch.launch_with(|v, ()| *v, ()), 0, "a refused launch ran");
    let n = counter.apply_with(
        |c, state: u64| {
            *c += state;
            *c
        },
        proof.state(),
    );
    assert_eq!(n, 42);
    println!("SCENARIO zst_proof ok");
}

/// Serializes as a number after yielding to the thread's other fibers.
struct Yielder(u64);

impl serde::Serialize for Yielder {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        for _ in 0..4 {
            gossamer::yield_now();
        }
        s.serialize_u64(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Yielder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64::deserialize(d).map(Yielder)
    }
}

/// Serializes a trust with `serde_json` from inside gossamer's encoding of
/// the message that carries it, and says whether that worked.
struct Snoop(Trust<u64>);

static SNOOPED: AtomicU64 = AtomicU64::new(0);

impl serde::Serialize for Snoop {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if serde_json::to_string(&self.0).is_ok() {
            SNOOPED.fetch_add(1, Ordering::Relaxed);
        }
        serde::Serialize::serialize(&self.0, s)
    }
}

impl<'de> serde::Deserialize<'de> for Snoop {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Trust::deserialize(d).map(Snoop)
    }
}

fn yielding_serialize() {
    let far = gossamer::topology().threads() - 1;
    let counter = gossamer::entrust_on(far, 0u64);
    let here = gossamer::current_thread().unwrap();
    // Two fibers of this thread, each sending a message whose argument
    // yields while it is serialized and carries a trust.
    let fibers: Vec<_> = (1..=2u64)
        .map(|k| {
            let counter = counter.clone();
            gossamer::spawn_on(here, move || {
                let carried = counter.clone();
                catch_unwind(AssertUnwindSafe(|| {
                    counter.apply_with(
                        |c, (y, t): (Yielder, Trust<u64>)| {
                            *c += y.0;
                            t.is_local()
                        },
                        (Yielder(k), carried),
                    )
                }))
                .map_err(|p| p.downcast_ref::<String>().cloned().unwrap_or_default())
            })
        })
        .collect();
    for f in fibers {
        let r = f.join().unwrap();
        assert_eq!(r, Ok(true), "a message whose argument yields while it is serialized was refused or mixed");
    }
    assert_eq!(counter.apply_with(|c, ()| *c, ()), 3);
    // No context was left open on this thread, nor in another fiber.
    assert!(postcard::to_stdvec(&counter).is_err(), "a Trust was serialized with postcard outside gossamer");
    assert!(serde_json::to_string(&counter).is_err(), "a Trust was serialized with serde_json outside gossamer");
    let json = gossamer::spawn_on(here, {
        let counter = counter.clone();
        move || serde_json::to_string(&counter).is_err() && postcard::to_stdvec(&counter).is_err()
    });
    assert!(json.join().unwrap(), "a Trust was serialized outside gossamer in another fiber");
    // Nor inside gossamer's own encoding with another serializer.
    let back = counter.apply_with(|_, s: Snoop| s.0.is_local(), Snoop(counter.clone()));
    assert!(back);
    assert_eq!(SNOOPED.load(Ordering::Relaxed), 0, "serde_json wrote a Trust inside gossamer's encoding");
    println!("SCENARIO yielding_serialize ok");
}

/// Counts its drops, per process.
#[derive(serde::Serialize, serde::Deserialize)]
struct Noted(u64);

static DROPS: AtomicU64 = AtomicU64::new(0);

impl Drop for Noted {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

fn drops_at(thread: usize) -> u64 {
    gossamer::spawn_with(thread, |()| DROPS.load(Ordering::SeqCst), ()).join().unwrap()
}

/// Waits (bounded) until thread `thread`'s process has counted `n` drops.
fn await_drops(thread: usize, n: u64) {
    let start = Instant::now();
    while drops_at(thread) < n {
        assert!(start.elapsed() < Duration::from_secs(20), "the copy was never dropped there");
        gossamer::yield_now();
    }
    assert_eq!(drops_at(thread), n, "dropped more than once there");
}

fn copies() {
    let far = gossamer::topology().threads() - 1;
    // `entrust_on`: the original is dropped here once, by the time the call
    // returns; the copy there is the property, dropped once after its last
    // trust.
    let t = gossamer::entrust_on(far, Noted(1));
    assert_eq!(DROPS.load(Ordering::SeqCst), 1, "entrust_on: the sender's original");
    assert_eq!(drops_at(far), 0, "the property is alive");
    // `apply_with`: the argument's original here, its copy there.
    assert_eq!(t.apply_with(|n, m: Noted| n.0 + m.0, Noted(2)), 3);
    assert_eq!(DROPS.load(Ordering::SeqCst), 2, "apply_with: the sender's original");
    assert_eq!(drops_at(far), 1, "apply_with: the trustee's copy");
    // `apply_with_then`: the same, without waiting.
    let done = std::rc::Rc::new(std::cell::Cell::new(false));
    let d = done.clone();
    t.apply_with_then(|n, m: Noted| n.0 + m.0, Noted(3), move |v| d.set(v == 4));
    assert_eq!(DROPS.load(Ordering::SeqCst), 3, "apply_with_then: the sender's original, at once");
    let start = Instant::now();
    while !done.get() {
        assert!(start.elapsed() < Duration::from_secs(20), "the callback never ran");
        gossamer::yield_now();
    }
    await_drops(far, 2);
    // `spawn_with`: the same for its argument.
    assert_eq!(gossamer::spawn_with(far, |m: Noted| m.0, Noted(4)).join().unwrap(), 4);
    assert_eq!(DROPS.load(Ordering::SeqCst), 4, "spawn_with: the sender's original");
    await_drops(far, 3);
    // A trust in an argument crosses as a true move: the property outlives
    // the sender's original and is dropped once, after the last trust.
    let kept = gossamer::spawn_with(far, |t: Trust<Noted>| t, t.clone()).join().unwrap();
    drop(t);
    assert_eq!(kept.apply_with(|n, ()| n.0, ()), 1, "the property outlived the moved trust");
    assert_eq!(drops_at(far), 3);
    drop(kept);
    await_drops(far, 4);
    assert_eq!(DROPS.load(Ordering::SeqCst), 4, "nothing more was dropped here");
    println!("SCENARIO copies ok");
}

/// Panics when the sender's original is dropped (the copy rebuilt in the
/// receiver does not: the flag does not travel).
#[derive(serde::Serialize, serde::Deserialize)]
struct Grumpy(u64, #[serde(skip)] bool);

impl Drop for Grumpy {
    fn drop(&mut self) {
        if self.1 && !std::thread::panicking() {
            panic!("the grumpy original was dropped");
        }
    }
}

fn panicking_drop() {
    let far = gossamer::topology().threads() - 1;
    // The panic of the original's `Drop` reaches the caller once the call
    // is complete; nothing of the call is left pointing at its stack.
    let m = refusal(|| drop(gossamer::entrust_on(far, Grumpy(7, true))));
    assert!(m.contains("grumpy original"), "{m}");
    let counter = gossamer::entrust_on(far, 0u64);
    let m = refusal(|| {
        counter.apply_with(|c, g: Grumpy| *c += g.0, Grumpy(5, true));
    });
    assert!(m.contains("grumpy original"), "{m}");
    assert_eq!(counter.apply_with(|c, ()| *c, ()), 5, "the call completed before its panic");
    let seen = std::rc::Rc::new(std::cell::Cell::new(0));
    let s = seen.clone();
    let m = refusal(|| counter.apply_with_then(|c, g: Grumpy| *c + g.0, Grumpy(1, true), move |v| s.set(v)));
    assert!(m.contains("grumpy original"), "{m}");
    // The fiber, its thread and the pair go on as before.
    for _ in 0..200 {
        counter.apply_with(|c, n: u64| *c += n, 1);
    }
    assert_eq!(counter.apply_with(|c, ()| *c, ()), 205);
    assert_eq!(seen.get(), 6, "the callback of the request whose original panicked ran");
    // Results too: the trustee's original is dropped after it is sent, and
    // a panic there is reported on the trustee, which serves on.
    let g = counter.apply_with(|c, ()| Grumpy(*c, true), ());
    assert_eq!((g.0, g.1), (205, false));
    let g = gossamer::spawn_with(far, |()| Grumpy(3, true), ()).join().unwrap();
    assert_eq!((g.0, g.1), (3, false));
    assert_eq!(counter.apply_with(|c, ()| *c, ()), 205);
    println!("SCENARIO panicking_drop ok");
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        "zst_proof" => zst_proof,
        "yielding_serialize" => yielding_serialize,
        "copies" => copies,
        "panicking_drop" => panicking_drop,
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, 6);
}

// ---- the tests (run the scenarios as programs) ------------------------------

fn passes(name: &str) -> String {
    static ONE_AT_A_TIME: OnceLock<std::sync::Mutex<()>> = OnceLock::new();
    let _g = ONE_AT_A_TIME.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let (out, _) = run_program(scenario(name, 3), Duration::from_secs(120));
    let t = text(&out);
    assert!(!t.contains("signal"), "no process may die of a signal:\n{t}");
    assert!(out.status.success(), "{t}");
    assert!(t.contains(&format!("SCENARIO {name} ok")), "{t}");
    t
}

#[test]
fn a_closure_capturing_a_zero_sized_proof_is_refused_in_the_caller_and_never_runs_there() {
    let t = passes("zst_proof");
    assert_eq!(t.matches("REFUSED ").count(), 3, "{t}");
}

#[test]
fn a_serialize_that_yields_neither_mixes_messages_nor_leaves_the_context_open() {
    passes("yielding_serialize");
}

#[test]
fn values_that_cross_are_copies_dropped_once_on_each_side_and_trusts_move() {
    passes("copies");
}

#[test]
fn a_panic_in_the_drop_of_a_sent_original_reaches_the_caller_after_the_call() {
    passes("panicking_drop");
}
