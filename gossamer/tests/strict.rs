//! Strict mode (`Builder::strict`, `GOSSAMER_STRICT`): one process keeps
//! every rule of a program of many. The same program is run three ways —
//! one plain process, one process in strict mode, and two real processes —
//! and strict mode must report exactly what two processes report, where
//! the plain process lets everything through. (This test binary re-runs
//! itself with `GOSSAMER_SCENARIO` set; `gossamer::main` starts the ranks.)

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::time::Duration;

mod common;
use common::programs::{run_program, text};

// ---- the program (rank 0 runs it; thread 1 is rank 1's, or the other
// simulated process's) ------------------------------------------------------

/// Runs `f` and prints one line: its result, or the first line of the
/// panic it raised in this (the calling) thread.
fn outcome<R: std::fmt::Debug>(what: &str, f: impl FnOnce() -> R) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => println!("RULE {what}: ok {r:?}"),
        Err(p) => {
            let m = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            println!("RULE {what}: refused {}", m.lines().next().unwrap_or_default());
        }
    }
}

/// A result that cannot be serialized.
#[derive(Debug)]
struct StaysHome;
impl serde::Serialize for StaysHome {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("this value stays home"))
    }
}
impl<'de> serde::Deserialize<'de> for StaysHome {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Ok(StaysHome)
    }
}

/// An argument that serializes but does not decode.
#[derive(Debug)]
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

fn rules() {
    let far = gossamer::topology().threads() - 1;
    let step = if std::env::args().count() > 100 { 0 } else { 5u64 };
    let counter = gossamer::entrust_on(far, 0u64);
    outcome("apply_with to the far thread", || {
        counter.apply_with(
            |c, s| {
                *c += s;
                *c
            },
            step,
        )
    });
    outcome("apply capturing a number", || {
        counter.apply(move |c| {
            *c += step;
            *c
        })
    });
    outcome("apply capturing nothing", || counter.apply(|c| *c));
    outcome("apply_then capturing a number", || counter.apply_then(move |c| *c += step, |_| ()));
    outcome("apply_async capturing nothing", || drop(counter.apply_async(|c| *c)));
    outcome("spawn_on the far thread", || gossamer::spawn_on(far, move || step).join().unwrap());
    outcome("spawn_with the far thread", || gossamer::spawn_with(far, |s: u64| s * 2, step).join().unwrap());
    outcome("entrust through the far trustee", || drop(gossamer::trustee(far).entrust(step)));
    outcome("a result that cannot be serialized", || counter.apply_with(|_, ()| StaysHome, ()));
    outcome("an argument that does not decode", || counter.apply_with(|c, _: Undecodable| *c, Undecodable));
    outcome("spawn_with an argument that does not decode", || {
        gossamer::spawn_with(far, |_: Undecodable| 1u8, Undecodable).join().map_err(|e| e.to_string())
    });
    outcome("spawn_with a result that cannot be serialized", || {
        gossamer::spawn_with(far, |()| StaysHome, ()).join().map_err(|e| e.to_string())
    });
    outcome("a trust as an argument", || {
        let near = gossamer::local_trustee().entrust(7u64);
        gossamer::spawn_with(far, |t: gossamer::Trust<u64>| t.apply_with(|v, ()| *v + 1, ()), near).join().unwrap()
    });
    let latch = gossamer::spawn_with(far, |()| gossamer::local_trustee().entrust(gossamer::Latch::new(1u64)), ())
        .join()
        .unwrap();
    outcome("launch capturing a number", || latch.launch(move |v| *v + step));
    outcome("launch_with", || latch.launch_with(|v, s: u64| *v + s, step));
    outcome("the counter at the end", || counter.apply_with(|c, ()| *c, ()));
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let f: fn() = match s.as_str() {
        "rules" => rules,
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, 2);
}

// ---- the tests -------------------------------------------------------------

/// The program's `RULE` lines, as it ran with `processes` processes and
/// `GOSSAMER_STRICT` set to `strict` (unset if `None`).
fn run(processes: usize, strict: Option<&str>) -> Vec<String> {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["scenario_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env("GOSSAMER_SCENARIO", "rules")
        .env("GOSSAMER_PROCESSES", processes.to_string())
        .env_remove("GOSSAMER_RANK")
        .env_remove("GOSSAMER_SIZE")
        .env_remove("GOSSAMER_STRICT");
    if let Some(s) = strict {
        cmd.env("GOSSAMER_STRICT", s);
    }
    let (out, _) = run_program(cmd, Duration::from_secs(120));
    let all = text(&out);
    assert!(out.status.success(), "the program failed:\n{all}");
    let lines: Vec<String> = all.lines().filter_map(|l| l.find("RULE ").map(|i| l[i..].to_string())).collect();
    assert_eq!(lines.len(), 16, "every step reported:\n{all}");
    lines
}

#[test]
fn strict_mode_reports_exactly_what_two_processes_report() {
    let plain = run(1, None);
    let strict = run(1, Some("2"));
    let two = run(2, None);
    assert_eq!(strict, two, "strict mode and two processes disagree");
    // The plain process lets through what two processes refuse.
    let refused = |v: &[String]| v.iter().filter(|l| l.contains(": refused ")).count();
    assert!(refused(&plain) < refused(&two), "plain:\n{}\ntwo:\n{}", plain.join("\n"), two.join("\n"));
    for step in ["apply capturing a number", "spawn_on the far thread", "launch capturing a number"] {
        let line = |v: &[String]| v.iter().find(|l| l.contains(step)).cloned().unwrap_or_default();
        assert!(line(&plain).contains(": ok "), "{}", line(&plain));
        assert!(line(&strict).contains(": refused "), "{}", line(&strict));
    }
    // The refusals name their fix.
    let capture = strict.iter().find(|l| l.contains("apply capturing a number")).unwrap();
    assert!(capture.contains("apply_with"), "{capture}");
    let spawn = strict.iter().find(|l| l.contains("spawn_on the far thread")).unwrap();
    assert!(spawn.contains("spawn_with"), "{spawn}");
}

#[test]
fn the_builder_switches_strict_mode_on_and_one_means_every_worker_alone() {
    for n in [1usize, 3] {
        let rt = gossamer::Runtime::builder().workers(3).strict(n).build().unwrap();
        rt.block_on(move || {
            let step = 2u64;
            for far in 1..3 {
                let t = gossamer::entrust_on(far, 1u64);
                assert_eq!(t.apply_with(|c, s| *c + s, step), 3);
                let r = catch_unwind(AssertUnwindSafe(|| t.apply(move |c| *c + step)));
                assert!(r.is_err(), "strict({n}): a capturing closure to thread {far} was let through");
            }
            // Own thread: the local shortcut, no boundary.
            let own = gossamer::local_trustee().entrust(1u64);
            assert_eq!(own.apply(move |c| *c + step), 3);
            // `entrust` places within the caller's simulated process.
            let placed = gossamer::entrust(0u64);
            assert_eq!(placed.trustee().index(), 0);
        });
    }
    // Off: everything within the process is allowed.
    let rt = gossamer::Runtime::builder().workers(2).strict(0).build().unwrap();
    rt.block_on(|| {
        let t = gossamer::entrust_on(1, 1u64);
        let step = 2u64;
        assert_eq!(t.apply(move |c| *c + step), 3);
    });
}
