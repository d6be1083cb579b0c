//! Runs every subcommand of the built `gossamer-bench` binary in a tiny
//! configuration and checks that it verifies its results, writes its
//! files, and fails with status 2 when its counts are deliberately wrong.
//! These are correctness checks only: nothing here asserts on timings.
//!
//! The runs are serialised (one lock for the whole file): the benchmarks
//! busy-poll, and several at once on a small machine would only slow each
//! other down.

#[path = "../../gossamer/tests/common/skip.rs"]
#[allow(dead_code)]
mod skip;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

/// Longest a single run may take before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(120);

static SERIAL: Mutex<()> = Mutex::new(());

/// A fresh, empty results folder for one test.
/// A fresh output folder for one test, removed when the test ends.
struct OutDir(PathBuf);

impl std::ops::Deref for OutDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn out_dir(name: &str) -> OutDir {
    let d = std::env::temp_dir().join(format!("gossamer-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    OutDir(d)
}

/// Runs the binary with `args`, killing it after [`TIMEOUT`].
fn bench(out: &Path, args: &[&str]) -> Output {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_gossamer-bench"))
        .arg("--out")
        .arg(out)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gossamer-bench");
    // Drain the pipes while waiting, so a chatty run cannot block on them.
    let mut so = child.stdout.take().expect("piped stdout");
    let mut se = child.stderr.take().expect("piped stderr");
    let so_reader = thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let se_reader = thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for gossamer-bench") {
            break st;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gossamer-bench {args:?} did not finish within {TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: so_reader.join().unwrap_or_default(), stderr: se_reader.join().unwrap_or_default() }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts success, the header, the verification line and the files.
fn check_ok(out_dir: &Path, o: &Output, files: &[&str]) {
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", o.status);
    assert!(stdout.contains("cores available"), "no machine line:\n{stdout}");
    assert!(stdout.contains("config:"), "no configuration line:\n{stdout}");
    assert!(stdout.contains("all results verified"), "no verification line:\n{stdout}");
    for f in files {
        let p = out_dir.join(f);
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "missing or empty {}", p.display());
    }
}

/// Asserts that the run failed verification (status 2).
fn check_mismatch(o: &Output) {
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "expected a verification failure\nstderr:\n{stderr}");
    assert!(stderr.contains("verification failed"), "{stderr}");
}

const TINY: &[&str] = &["--smoke", "--duration-ms", "10"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    TINY.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn demo_prints_every_row_with_ratio_and_verdict() {
    let d = out_dir("demo");
    let o = bench(&d, &args(&["demo"]));
    check_ok(&d, &o, &["demo.csv", "demo_run.txt"]);
    let stdout = text(&o.stdout);
    assert!(stdout.contains("Trust/best"), "no ratio column:\n{stdout}");
    // Three workloads, each at threads = cores and oversubscribed: six rows,
    // each with a ratio and a verdict that names the winner.
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| ["hot object", "many objects", "shared map"].iter().any(|w| l.starts_with(w)))
        .collect();
    assert_eq!(rows.len(), 6, "expected six rows:\n{stdout}");
    for r in &rows {
        let (_, after_form) = r.split_once("apply_then").unwrap_or_else(|| panic!("no Trust form in {r:?}"));
        let cells: Vec<&str> = after_form.split_whitespace().take(4).collect();
        for c in &cells[..3] {
            assert!(c.parse::<f64>().is_ok_and(|v| v > 0.0), "not three figures in {r:?}");
        }
        assert!(cells[3].strip_suffix('x').is_some_and(|v| v.parse::<f64>().is_ok()), "no ratio in {r:?}");
        // Then Adaptive<T> and its ratio to the faster lock.
        let adaptive: Vec<&str> = after_form.split_whitespace().skip(4).take(2).collect();
        assert!(adaptive[0].parse::<f64>().is_ok_and(|v| v > 0.0), "no Adaptive<T> figure in {r:?}");
        assert!(adaptive[1].strip_suffix('x').is_some_and(|v| v.parse::<f64>().is_ok()), "no Adaptive ratio in {r:?}");
        assert!(
            ["delegation wins: ", "a draw: ", "the lock wins: "].iter().any(|v| r.contains(v)),
            "no verdict in {r:?}"
        );
    }
    assert_eq!(rows.iter().filter(|r| r.contains("(over)")).count(), 3, "{stdout}");
    assert!(stdout.contains("benchmarks/README.md"), "no pointer to the full benchmark:\n{stdout}");
    let csv = std::fs::read_to_string(d.join("demo.csv")).expect("demo.csv");
    assert_eq!(csv.lines().count(), 1 + 6 * 4, "{csv}");
}

#[test]
fn faa_runs_and_verifies() {
    let d = out_dir("faa");
    let o = bench(&d, &args(&["faa", "--objects", "1,64"]));
    check_ok(&d, &o, &["faa_uniform.csv", "faa_uniform_summary.csv", "faa_uniform.png", "faa_zipf.csv", "faa_run.txt"]);
    let stdout = text(&o.stdout);
    for v in [
        "trust-apply",
        "trust-async",
        "trust-apply-ded",
        "trust-async-ded",
        "std-mutex",
        "parking-lot",
        "spin",
        "mcs",
        "trust-adaptive",
    ] {
        assert!(stdout.contains(v), "variant {v} missing:\n{stdout}");
    }
}

#[test]
fn dedicated_auto_runs_the_controller_and_verifies() {
    let d = out_dir("faa-auto");
    let o = bench(
        &d,
        &args(&["--dedicated", "auto", "faa", "--objects", "1,64", "--variants", "trust-async-ded,trust-apply-ded"]),
    );
    check_ok(&d, &o, &["faa_uniform.csv", "faa_zipf.csv", "faa_run.txt"]);
    assert!(text(&o.stdout).contains("dedicated=auto"), "{}", text(&o.stdout));
    // One line per measurement: 2 variants, 2 object counts, 2 distributions.
    assert_eq!(text(&o.stderr).matches("dedicated auto: k=").count(), 8, "{}", text(&o.stderr));
    let d = out_dir("map-auto");
    let o = bench(
        &d,
        &args(&["--dedicated", "auto", "map", "--sizes", "10", "--writes", "50", "--variants", "trust-async-ded"]),
    );
    check_ok(&d, &o, &["map_size_uniform.csv", "map_writes_zipf.csv"]);
    assert!(text(&o.stderr).contains("dedicated auto: k="), "{}", text(&o.stderr));
    let o = bench(&d, &args(&["--dedicated", "sometimes", "faa"]));
    assert!(!o.status.success() && text(&o.stderr).contains("neither a number nor `auto`"), "{}", text(&o.stderr));
}

#[test]
fn latency_runs_and_verifies() {
    let d = out_dir("latency");
    let o = bench(&d, &args(&["latency", "--loads", "0.5,4"]));
    check_ok(
        &d,
        &o,
        &[
            "latency_uniform_64.csv",
            "latency_uniform_64_summary.csv",
            "latency_uniform_64_mean.png",
            "latency_zipf_10000_p999.png",
        ],
    );
    assert!(text(&o.stdout).contains("p99.9"));
}

#[test]
fn map_runs_and_verifies() {
    let d = out_dir("map");
    let o = bench(&d, &args(&["map", "--sizes", "10,1000", "--writes", "0,50,100"]));
    check_ok(
        &d,
        &o,
        &["map_size_uniform.csv", "map_size_zipf_summary.csv", "map_writes_uniform.png", "map_writes_zipf.csv"],
    );
    let stdout = text(&o.stdout);
    for v in [
        "trust-apply",
        "trust-async",
        "trust-async-ded",
        "dashmap",
        "scc",
        "mutex-512",
        "parking-lot-512",
        "rwlock-512",
        "trust-adaptive",
    ] {
        assert!(stdout.contains(v), "variant {v} missing:\n{stdout}");
    }
}

#[test]
fn micro_runs_and_verifies() {
    let d = out_dir("micro");
    let o = bench(&d, &args(&["--no-plots", "micro", "--ops", "2000"]));
    check_ok(&d, &o, &["micro.csv", "micro_summary.csv"]);
    let stdout = text(&o.stdout);
    for f in ["fiber-yield", "apply-rtt", "trustee-async", "local-apply", "echo-copied-256", "idle-cpu", "wake-apply"] {
        assert!(stdout.contains(f), "figure {f} missing:\n{stdout}");
    }
    assert!(stdout.contains("echo floor at 256 B: copied ÷ moved"), "no floor ratio:\n{stdout}");
}

#[test]
fn tokio_runs_and_verifies() {
    let d = out_dir("tokio");
    let o = bench(&d, &args(&["tokio", "--objects", "1,64", "--tasks", "32", "--trustees", "2"]));
    check_ok(&d, &o, &["tokio.csv", "tokio_summary.csv", "tokio.png", "tokio_run.txt"]);
    let stdout = text(&o.stdout);
    for v in ["std-mutex", "tokio-mutex", "apply-async", "apply-async-window"] {
        assert!(stdout.contains(v), "variant {v} missing:\n{stdout}");
    }
}

#[test]
fn migrate_runs_and_verifies() {
    let d = out_dir("migrate");
    let o = bench(&d, &args(&["migrate", "--interval-us", "100"]));
    check_ok(&d, &o, &["migrate.csv", "migrate_run.txt"]);
    let stdout = text(&o.stdout);
    for v in ["mutex", "before", "during", "after", "hot-follow", "launch-stay", "launch-moved"] {
        assert!(stdout.contains(v), "phase {v} missing:\n{stdout}");
    }
}

#[test]
fn all_runs_every_benchmark() {
    // Each benchmark has its own test above; this one runs them all again.
    if !skip::full("every benchmark in a row") {
        return;
    }
    let d = out_dir("all");
    let o = bench(&d, &args(&["--no-plots", "all"]));
    check_ok(
        &d,
        &o,
        &[
            "faa_zipf_summary.csv",
            "latency_uniform_64_summary.csv",
            "map_writes_zipf_summary.csv",
            "micro_summary.csv",
            "tokio_summary.csv",
            "all_run.txt",
        ],
    );
}

#[test]
fn wrong_counts_fail_every_subcommand() {
    let d = out_dir("fault");
    for cmd in [
        vec!["faa", "--objects", "4", "--dist", "uniform", "--variants", "trust-async"],
        vec!["faa", "--objects", "4", "--dist", "zipf", "--variants", "mcs"],
        vec!["faa", "--objects", "4", "--dist", "uniform", "--variants", "trust-adaptive"],
        vec!["faa", "--objects", "4", "--dist", "uniform", "--variants", "trust-adaptive", "--policy", "delegate"],
        vec!["faa", "--objects", "4", "--dist", "zipf", "--variants", "trust-adaptive", "--policy", "lock"],
        vec!["latency", "--loads", "1", "--variants", "trust-async-ded"],
        vec!["latency", "--loads", "1", "--variants", "spin"],
        vec!["map", "--sizes", "100", "--writes", "50", "--dist", "uniform", "--variants", "trust-apply"],
        vec!["map", "--sizes", "100", "--writes", "50", "--dist", "zipf", "--variants", "scc"],
        vec!["map", "--sizes", "100", "--writes", "50", "--dist", "uniform", "--variants", "parking-lot-512"],
        vec!["map", "--sizes", "100", "--writes", "50", "--dist", "zipf", "--variants", "trust-adaptive"],
        vec![
            "map",
            "--sizes",
            "100",
            "--writes",
            "50",
            "--dist",
            "uniform",
            "--variants",
            "trust-adaptive",
            "--policy",
            "delegate",
        ],
        vec!["micro", "--ops", "100"],
        vec!["demo"],
        vec!["tokio", "--objects", "4", "--tasks", "8", "--variants", "apply-async"],
        vec!["tokio", "--objects", "4", "--tasks", "8", "--variants", "apply-async-window"],
        vec!["tokio", "--objects", "4", "--tasks", "8", "--variants", "std-mutex"],
        vec!["tokio", "--objects", "4", "--tasks", "8", "--variants", "tokio-mutex"],
        vec!["migrate"],
    ] {
        let mut a = args(&["--fault", "--no-plots"]);
        a.extend(cmd);
        check_mismatch(&bench(&d, &a));
    }
}

#[test]
fn bad_options_are_rejected() {
    let d = out_dir("bad");
    let o = bench(&d, &args(&["faa", "--variants", "no-such-variant"]));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("unknown variant"));
    let o = bench(&d, &args(&["--threads", "1", "faa"]));
    assert_eq!(o.status.code(), Some(1));
    let o = bench(&d, &args(&["faa", "--policy", "sometimes"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("possible values: adaptive, delegate, lock"), "{}", text(&o.stderr));
}
