//! Randomly generated programs over one, two and three processes, checked
//! against a model: every delegated closure's effect seen exactly once,
//! every `then` callback run once, every property dropped exactly once on
//! its trustee (after its last trust, or at shutdown).
//!
//! A failing case shrinks to a short list of operations (see
//! `common/generated/program.rs` for what each means). Programs over
//! several processes run as real processes: this test binary re-runs
//! itself with the program in `GOSSAMER_GENERATED`, as `tests/rack.rs`
//! does with its scenarios.

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};

mod common;
#[path = "common/generated/mod.rs"]
mod generated;

use common::programs::{run_program, text};
use generated::program::{decode, encode, program, Program};
use generated::property::{clear_dropped, dropped, Record};
use generated::run::{check_records, drive, quiet_planned_panics, WAIT};

// ---- one process: the program runs in this test's process ------------------

fn run_in_this_process(p: Program) {
    quiet_planned_panics();
    clear_dropped();
    common::within(60, move || {
        let rt = gossamer::Runtime::builder().workers(p.threads_per_process).build().expect("runtime");
        let prog = p.clone();
        let (model, kept) = rt.block_on(move || drive(&prog));
        if p.explicit_shutdown {
            let report = rt.shutdown();
            assert!(report.clean, "shutdown was not clean: {report:?}");
        } else {
            drop(rt);
        }
        // Trusts that outlive their runtime are inert: dropping them does
        // nothing more.
        drop(kept);
        check_records(&dropped(), &model, p.keep_at_end);
    });
}

/// `n` cases, or `PROPTEST_CASES` when set (for longer runs by hand).
fn cases(n: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(n);
    // No regression files: a failure prints its shrunk program.
    Config { cases, failure_persistence: None, max_shrink_iters: 200, ..Config::default() }
}

proptest! {
    #![proptest_config(cases(256))]
    #[test]
    fn one_process_programs_match_the_model(p in program(3, 60)) {
        run_in_this_process(p);
    }
}

// ---- several processes: the program runs as a program of its own ----------

static PROGRAM: OnceLock<Program> = OnceLock::new();

fn gsm_main() {
    let p = PROGRAM.get().expect("the program");
    let (model, kept) = drive(p);
    if kept.is_empty() {
        // Every trust is gone: each property must be dropped once, by its
        // trustee, wherever that is.
        let topo = gossamer::topology();
        let firsts: Vec<usize> = topo.processes.iter().map(|r| r.start).collect();
        let start = std::time::Instant::now();
        let records = loop {
            let mut all: Vec<Record> = Vec::new();
            for &t in &firsts {
                all.extend(gossamer::spawn_with(t, |()| dropped(), ()).join().expect("reading a rank's drops"));
            }
            let done = model.props.keys().all(|id| all.iter().any(|r| r.id == *id));
            if done || start.elapsed() > WAIT {
                break all;
            }
            gossamer::yield_now();
        };
        check_records(&records, &model, false);
    }
    // Kept handles were checked by `drive`; they are dropped now, as the
    // program ends.
    drop(kept);
    println!("GENERATED ok");
}

#[test]
fn generated_entry() {
    let Ok(s) = std::env::var("GOSSAMER_GENERATED") else { return };
    let p = decode(&s);
    let threads = p.threads_per_process * gossamer::rack::planned_processes().expect("process count");
    quiet_planned_panics();
    assert!(PROGRAM.set(p).is_ok(), "one program per process");
    gossamer::main(gsm_main, threads);
}

fn run_as_processes(procs: usize, p: &Program) -> Result<(), TestCaseError> {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "generated_entry", "--nocapture", "--test-threads=1"])
        .env("GOSSAMER_GENERATED", encode(p))
        .env("GOSSAMER_PROCESSES", procs.to_string())
        .env_remove("GOSSAMER_RANK")
        .env_remove("GOSSAMER_SIZE");
    let (out, _) = run_program(cmd, Duration::from_secs(90));
    let t = text(&out);
    prop_assert!(out.status.success() && t.contains("GENERATED ok"), "the program failed ({}):\n{t}", out.status);
    Ok(())
}

proptest! {
    #![proptest_config(cases(12))]
    #[test]
    fn two_process_programs_match_the_model(p in program(2, 30)) {
        run_as_processes(2, &p)?;
    }

    #[test]
    fn three_process_programs_match_the_model(p in program(2, 30)) {
        run_as_processes(3, &p)?;
    }
}
