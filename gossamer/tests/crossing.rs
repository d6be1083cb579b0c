//! What may cross into another process, and what is refused there: real
//! multi-process programs (this test binary re-runs itself with
//! `GOSSAMER_SCENARIO` set; `gossamer::main` starts the other ranks).
//!
//! * Only code given as a `fn` crosses: a generic closure (`apply`,
//!   `apply_then`, `try_apply_then`, `apply_async`, `launch`,
//!   `launch_then`) whose trustee is in another process is refused in the
//!   caller, before any byte is sent — whatever it captures (`&'static
//!   str`, `&'static [u8]`, a `fn` pointer, `Option<&'static T>`, a `Copy`
//!   struct holding a reference, plain numbers, or nothing at all): the
//!   trustee's process is unharmed and keeps serving. The `fn` forms
//!   (`apply_with`, `launch_with`, `spawn_with`, ...) run there; a
//!   capturing closure in them is a compile error (`tests/ui/crossing_*`).
//! * Data travels as `apply_with` / `spawn_with` arguments: random plain
//!   values arrive byte-exact.
//! * Strict mode (`GOSSAMER_STRICT`) makes one process refuse the same
//!   captures and values, with the same messages: the `captures` and
//!   `bad_values` scenarios run there too.
//!
//! With the `nightly` feature, closures capturing references do not even
//! compile (`NoRef`); those cases are left out there, and the rest must
//! still be refused at the process boundary: both rules agree on what may
//! cross.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use gossamer::Trust;
use proptest::prelude::*;

mod common;
use common::programs::{run_program, scenario, text};

// ---- the scenarios (run inside the spawned processes) ----------------------

/// The program of the report, verbatim: a `&'static str` captured by a
/// closure whose trustee is in rank 1.
#[cfg(not(feature = "nightly"))]
fn verbatim() {
    let last = gossamer::topology().threads() - 1;
    let counter = gossamer::entrust_on(last, 0u64);
    let word: &'static str = if std::env::args().count() > 100 { "never" } else { "greeting-from-rank-0" };
    let n = counter.apply(move |c| {
        *c += 1;
        word.len() as u64
    });
    println!("{n}");
}

#[derive(Clone, Copy)]
#[cfg_attr(feature = "nightly", allow(dead_code))]
struct Labelled {
    label: &'static str,
    weight: u32,
}

fn answer() -> u64 {
    42
}

static TABLE: [u8; 4] = [1, 2, 3, 4];
static NUMBER: u64 = 9;

/// The message of the panic `f` raised in this (the calling) process.
fn refusal(f: impl FnOnce()) -> String {
    let p = catch_unwind(AssertUnwindSafe(f)).expect_err("the call was not refused");
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

fn refused(what: &str, f: impl FnOnce()) {
    let m = refusal(f);
    assert!(
        m.contains("captures") && m.contains("another process") && m.contains("apply_with"),
        "{what}: the refusal names the rule and the fix: {m}"
    );
    println!("REFUSED {what}: {}", m.lines().next().unwrap_or_default());
}

fn captures() {
    let far = gossamer::topology().threads() - 1; // on rank 2
    let counter = gossamer::entrust_on(far, 0u64);
    let word: &'static str = if std::env::args().count() > 100 { "never" } else { "greeting" };
    let bytes: &'static [u8] = &TABLE;
    let code: fn() -> u64 = answer;
    let maybe: Option<&'static u64> = Some(&NUMBER);
    let labelled = Labelled { label: word, weight: 3 };
    let plain = 5u64;

    #[cfg(not(feature = "nightly"))]
    refuse_references(&counter, word, bytes, maybe, labelled);
    refused("fn pointer via apply", || {
        counter.apply(move |c| *c += code());
    });
    refused("a plain u64 via apply", || {
        counter.apply(move |c| *c += plain);
    });
    // Even a closure that captures nothing: a generic closure's type cannot
    // say so (a zero-sized capture looks the same), only a `fn` can.
    refused("nothing via apply", || {
        counter.apply(|c| *c += 1);
    });
    refused("fn pointer via try_apply_then", || {
        counter.try_apply_then(move |c| *c += code(), |_| ());
    });
    refused("nothing via apply_async", || {
        drop(counter.apply_async(|c| *c));
    });
    // `launch` crosses under the same rule: a generic closure is refused in
    // the caller, the `fn` form (`launch_with`) runs there.
    let latch: Trust<gossamer::Latch<u64>> =
        gossamer::spawn_with(far, |()| gossamer::local_trustee().entrust(gossamer::Latch::new(0u64)), ())
            .join()
            .unwrap();
    refused("a plain u64 via launch", || {
        latch.launch(move |v| *v += plain);
    });
    refused("a plain u64 via launch_then", || {
        latch.launch_then(move |v| *v += plain, |()| ());
    });
    assert_eq!(latch.launch_with(|v, ()| *v, ()), 0, "no refused launch ran");
    assert_eq!(latch.launch_with(std::mem::replace, 4), 0);

    // Nothing ran, nothing broke: the trustee's process still serves, and
    // the same updates succeed written as the rule says.
    assert_eq!(counter.apply_with(|c, ()| *c, ()), 0, "no refused closure ran");
    let n = counter.apply_with(
        |c, (word, bytes, maybe, weight): (String, Vec<u8>, Option<u64>, u32)| {
            *c += word.len() as u64 + bytes.iter().map(|&b| b as u64).sum::<u64>() + maybe.unwrap_or(0) + weight as u64;
            *c
        },
        (word.to_string(), bytes.to_vec(), maybe.copied(), labelled.weight),
    );
    assert_eq!(n, 8 + 10 + 9 + 3);
    let len =
        gossamer::spawn_with(far, |w: String| (gossamer::rack::rank(), w.len()), word.to_string()).join().unwrap();
    assert_eq!(len, (gossamer::topology().rank_of(far), 8));
    println!("SCENARIO captures ok");
}

/// Closures capturing references: refused at run time on stable (on
/// nightly they do not compile). In the `fn` forms (`apply_with`,
/// `spawn_with`, ...) they do not compile either: see `tests/ui/crossing_*`.
#[cfg(not(feature = "nightly"))]
fn refuse_references(
    counter: &Trust<u64>,
    word: &'static str,
    bytes: &'static [u8],
    maybe: Option<&'static u64>,
    labelled: Labelled,
) {
    refused("&'static str via apply", || {
        counter.apply(move |c| *c += word.len() as u64);
    });
    refused("&'static [u8] via apply", || {
        counter.apply(move |c| *c += bytes[0] as u64);
    });
    refused("Option<&'static u64> via apply", || {
        counter.apply(move |c| *c += maybe.copied().unwrap_or(0));
    });
    refused("Copy struct holding a reference via apply", || {
        counter.apply(move |c| *c += labelled.label.len() as u64 + labelled.weight as u64);
    });
    refused("&'static str via apply_then", || {
        counter.apply_then(move |c| *c += word.len() as u64, |_| ());
    });
}

/// A value with the kinds of plain data users pass.
type Plain = (u8, i16, u32, i64, u128, bool, char, [u16; 5], Option<i32>, (f64, f32));

fn plain_value() -> impl Strategy<Value = Plain> {
    (
        any::<u8>(),
        any::<i16>(),
        any::<u32>(),
        any::<i64>(),
        any::<u128>(),
        any::<bool>(),
        any::<char>(),
        any::<[u16; 5]>(),
        any::<Option<i32>>(),
        (any::<f64>(), any::<f32>()),
    )
}

fn bits(v: &Plain) -> Vec<u8> {
    // Byte-exact, NaN payloads included: compare the floats' bits.
    let mut b = format!("{:?}", (v.0, v.1, v.2, v.3, v.4, v.5, v.6, v.7, v.8)).into_bytes();
    b.extend_from_slice(&v.9 .0.to_bits().to_le_bytes());
    b.extend_from_slice(&v.9 .1.to_bits().to_le_bytes());
    b
}

fn plain_data() {
    let far = gossamer::topology().threads() - 1;
    let log = gossamer::entrust_on(far, Vec::<Vec<u8>>::new());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 300, ..ProptestConfig::default() });
    runner
        .run(&(plain_value(), any::<Vec<u8>>(), ".{0,40}"), |(v, blob, s)| {
            let sent = bits(&v);
            // There: recorded as the trustee sees it; back: the value itself.
            let (seen, back): (Vec<u8>, (Plain, Vec<u8>, String)) = log.apply_with(
                |l, (v, blob, s): (Plain, Vec<u8>, String)| {
                    let seen = bits(&v);
                    l.push(seen.clone());
                    (seen, (v, blob, s))
                },
                (v, blob.clone(), s.clone()),
            );
            prop_assert_eq!(&seen, &sent);
            prop_assert_eq!(bits(&back.0), sent.clone());
            prop_assert_eq!(&back.1, &blob);
            prop_assert_eq!(&back.2, &s);
            let (rank, got) =
                gossamer::spawn_with(far, |v: Plain| (gossamer::rack::rank(), bits(&v)), v).join().unwrap();
            prop_assert_eq!(rank, gossamer::topology().rank_of(far));
            prop_assert_eq!(got, sent);
            Ok(())
        })
        .unwrap();
    let n = log.apply_with(|l, ()| l.len(), ());
    println!("SCENARIO plain_data ok: {n} random values crossed byte-exact");
}

/// Serializes fine, refuses to be deserialized (on the trustee).
struct Undecodable;
impl serde::Serialize for Undecodable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(1)
    }
}
impl<'de> serde::Deserialize<'de> for Undecodable {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom("never"))
    }
}

/// A result that cannot be serialized (on the trustee).
struct Unsendable;
impl serde::Serialize for Unsendable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("this value stays home"))
    }
}
impl<'de> serde::Deserialize<'de> for Unsendable {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Ok(Unsendable)
    }
}

/// Written as a made-up trust token, read as a real `Trust<u64>`: a
/// forged address in safe code.
struct Forged(#[allow(dead_code)] Trust<u64>);
impl serde::Serialize for Forged {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(4)?;
        t.serialize_element(&5u32)?;
        t.serialize_element(&0xdead_beef_u64)?;
        t.serialize_element(&1u64)?;
        t.serialize_element(&0u64)?;
        t.end()
    }
}
impl<'de> serde::Deserialize<'de> for Forged {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Trust::deserialize(d).map(Forged)
    }
}

fn bad_values() {
    let far = gossamer::topology().threads() - 1;
    let counter = gossamer::entrust_on(far, 0u64);
    let add = |c: &mut u64, v: Vec<u8>| {
        *c += v.len() as u64;
        *c
    };
    // Larger than the bulk area (GOSSAMER_BULK_BYTES): it travels in
    // chunks, and the pair's code cache stays in step around them, so the
    // very same closure then runs correctly.
    assert_eq!(counter.apply_with(add, vec![0u8; 1 << 20]), 1 << 20);
    assert_eq!(counter.apply_with(add, vec![0u8; 3]), (1 << 20) + 3);
    assert_eq!(counter.apply_with(add, vec![0u8; 4]), (1 << 20) + 7);
    // An argument the trustee cannot decode: the caller's panic.
    let m = refusal(|| {
        counter.apply_with(|c, _: Undecodable| *c, Undecodable);
    });
    assert!(m.contains("malformed value"), "{m}");
    // A result the trustee cannot encode: the caller's panic.
    let m = refusal(|| {
        counter.apply_with(|_, ()| Unsendable, ());
    });
    assert!(m.contains("cannot serialize a value for another process"), "{m}");
    let e = gossamer::spawn_with(far, |()| Unsendable, ()).join().map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("cannot serialize a value for another process"), "{e}");
    // A forged trust token: refused where it is decoded, reported here.
    let m = refusal(|| {
        counter.apply_with(|c, _: Forged| *c, Forged(counter.clone()));
    });
    assert!(m.contains("forged"), "{m}");
    let e = gossamer::spawn_with(far, |_: Forged| 0u8, Forged(counter.clone())).join().unwrap_err();
    assert!(e.to_string().contains("forged"), "{e}");
    // The trustee's process served on through all of it.
    assert_eq!(counter.apply_with(|c, ()| *c, ()), (1 << 20) + 7);
    println!("SCENARIO bad_values ok");
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        #[cfg(not(feature = "nightly"))]
        "verbatim" => verbatim,
        "captures" => captures,
        "plain_data" => plain_data,
        "bad_values" => bad_values,
        other => panic!("unknown scenario {other}"),
    };
    let threads = if s == "verbatim" { 2 } else { 6 };
    gossamer::main(f, threads);
}

// ---- the tests (run the scenarios as programs) ------------------------------

#[test]
#[cfg(not(feature = "nightly"))]
fn the_reported_program_fails_in_the_caller_with_the_rule_never_by_a_signal() {
    for run in 0..3 {
        let (out, _) = run_program(scenario("verbatim", 2), Duration::from_secs(60));
        let t = text(&out);
        assert!(!out.status.success(), "run {run}: the program must not succeed:\n{t}");
        assert!(!t.contains("signal"), "run {run}: no process may die of a signal:\n{t}");
        assert!(!t.contains("rank 1 failed"), "run {run}: the trustee's process is unharmed:\n{t}");
        assert!(
            t.contains("16 bytes of captures")
                && t.contains("(thread 1) is in another process")
                && t.contains("apply_with"),
            "run {run}: the caller's panic names the rule and the fix:\n{t}"
        );
    }
}

#[test]
fn every_capturing_closure_is_refused_across_processes_and_the_trustee_serves_on() {
    let (out, _) = run_program(scenario("captures", 3), Duration::from_secs(120));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO captures ok"), "{t}");
    let expected = if cfg!(feature = "nightly") { 7 } else { 12 };
    assert_eq!(t.matches("REFUSED ").count(), expected, "{t}");
}

/// The same scenario in one process in strict mode: every capture is
/// refused in every form, with the same messages, between simulated
/// processes.
#[test]
fn every_capturing_closure_is_refused_the_same_way_in_strict_mode() {
    let mut cmd = scenario("captures", 1);
    cmd.env("GOSSAMER_STRICT", "3");
    let (out, _) = run_program(cmd, Duration::from_secs(120));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO captures ok"), "{t}");
    let expected = if cfg!(feature = "nightly") { 7 } else { 12 };
    assert_eq!(t.matches("REFUSED ").count(), expected, "{t}");
}

#[test]
fn random_plain_values_cross_processes_byte_exact() {
    let (out, _) = run_program(scenario("plain_data", 3), Duration::from_secs(180));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO plain_data ok"), "{t}");
}

#[test]
fn values_that_cannot_cross_fail_in_the_caller_and_the_trustee_serves_on() {
    let mut cmd = scenario("bad_values", 3);
    cmd.env("GOSSAMER_BULK_BYTES", "65536");
    let (out, _) = run_program(cmd, Duration::from_secs(120));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO bad_values ok"), "{t}");
}

/// The same scenario in one process in strict mode (every worker a
/// simulated process of its own): every value that cannot cross fails the
/// same way, in the same place, as across three real processes.
#[test]
fn values_that_cannot_cross_fail_the_same_way_in_strict_mode() {
    let mut cmd = scenario("bad_values", 1);
    cmd.env("GOSSAMER_BULK_BYTES", "65536").env("GOSSAMER_STRICT", "1");
    let (out, _) = run_program(cmd, Duration::from_secs(120));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("SCENARIO bad_values ok"), "{t}");
}
