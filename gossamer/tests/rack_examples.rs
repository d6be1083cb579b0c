//! The multi-process examples run as their documentation says, started
//! with a process count alone.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::example;
use common::programs::{run_program, text};

/// A process count and nothing else, with no launcher variables inherited.
fn with_processes(bin: PathBuf, n: usize) -> Command {
    let mut cmd = Command::new(bin);
    for v in ["GOSSAMER_THREADS", "GOSSAMER_RANK", "GOSSAMER_SIZE", "GOSSAMER_RENDEZVOUS", "OMPI_COMM_WORLD_SIZE"] {
        cmd.env_remove(v);
    }
    cmd.env("GOSSAMER_PROCESSES", n.to_string());
    cmd
}

#[test]
fn hello_rack_gives_each_process_one_thread() {
    let Some(bin) = example("hello_rack") else { return };
    let (out, _) = run_program(with_processes(bin, 2), Duration::from_secs(120));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("hello_rack: 2 thread(s) over 2 rank(s)"), "{t}");
    assert!(t.contains("hello from rank 1"), "{t}");
}

#[test]
fn a_rank_started_by_mpirun_without_a_rendezvous_is_told_what_to_set() {
    let Some(bin) = example("hello_rack") else { return };
    let mut cmd = Command::new(bin);
    for v in ["GOSSAMER_RANK", "GOSSAMER_SIZE", "GOSSAMER_RENDEZVOUS", "GOSSAMER_PROCESSES", "SLURM_PROCID"] {
        cmd.env_remove(v);
    }
    cmd.env("OMPI_COMM_WORLD_RANK", "0").env("OMPI_COMM_WORLD_SIZE", "2").env("GOSSAMER_HOST", "node7");
    let (out, _) = run_program(cmd, Duration::from_secs(60));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("GOSSAMER_RENDEZVOUS"), "{t}");
    assert!(t.contains("mpirun -x GOSSAMER_RENDEZVOUS=node7:7000"), "suggests a value: {t}");
}

#[test]
fn more_processes_than_threads_names_the_fix() {
    // table2b asks for 4 threads over the whole program.
    let Some(bin) = example("table2b") else { return };
    let (out, _) = run_program(with_processes(bin, 5), Duration::from_secs(60));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("4 threads cannot be spread over 5 processes"), "{t}");
    assert!(t.contains("planned_processes"), "names the fix: {t}");
}

/// The examples written for a rack keep its rules in one process in strict
/// mode (every worker its own simulated process): what passes here does
/// not fail on two processes for a capture or a local-only call. (An
/// example written for one process, such as `micro`, fails here.)
#[test]
fn rack_examples_keep_every_rule_in_one_strict_process() {
    for name in ["hello_rack", "rack_counters", "objects", "table2b"] {
        let Some(bin) = example(name) else { return };
        let mut cmd = with_processes(bin, 1);
        cmd.env("GOSSAMER_THREADS", "3").env("GOSSAMER_STRICT", "1");
        let (out, _) = run_program(cmd, Duration::from_secs(120));
        let t = text(&out);
        assert!(out.status.success(), "{name} in strict mode: {t}");
    }
}

/// The echo example's two modes that the fabric benchmark
/// (`scripts/fabric-hosts.sh`) runs across hosts, here over two processes
/// of one host: round trips one at a time, echoes that all cross, and
/// payloads that cross one way. Each
/// checks its own count (every echo served once) and says so in its line.
#[test]
fn echo_round_trips_and_crossing_echoes_run_over_two_processes() {
    let Some(bin) = example("echo") else { return };
    for (mode, word) in [("ECHO_RTT", "RTT "), ("ECHO_TARGETS", "ECHO "), ("ECHO_FLOW", "ECHO ")] {
        let mut cmd = with_processes(bin.clone(), 2);
        cmd.env("ECHO_THREADS", "2").env("ECHO_MILLIS", "100").env("ECHO_SIZE", "4096");
        match mode {
            "ECHO_RTT" => cmd.env(mode, "1"),
            "ECHO_TARGETS" => cmd.env(mode, "remote"),
            _ => cmd.env("ECHO_TARGETS", "remote").env(mode, "one-way"),
        };
        let (out, _) = run_program(cmd, Duration::from_secs(120));
        let t = text(&out);
        assert!(out.status.success(), "{mode}: {t}");
        let line = t.lines().find(|l| l.starts_with(word)).unwrap_or_else(|| panic!("{mode}: no {word}line: {t}"));
        assert!(line.contains(" processes=2 ") && line.contains(" size=4096 "), "{line}");
        if mode == "ECHO_RTT" {
            assert!(line.contains(" to=1 "), "the round trips go to the other process: {line}");
        } else {
            let flow = if mode == "ECHO_FLOW" { " flow=one-way " } else { " flow=echo " };
            assert!(line.contains(" targets=remote ") && line.contains(flow), "{line}");
        }
    }
}
