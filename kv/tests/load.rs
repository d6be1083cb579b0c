//! The load generator against a running server, and its side-by-side
//! comparison with memcached (when installed), in short runs.

mod common;

use std::process::Command;
use std::time::Duration;

use common::Proc;

fn load_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gossamer-kv-load"))
}

fn output_within(mut cmd: Command, limit: Duration) -> std::process::Output {
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let id = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(limit);
        // SAFETY: signalling a child we started; harmless if it has exited.
        unsafe { libc::kill(id as i32, libc::SIGKILL) };
    });
    let out = child.wait_with_output().unwrap();
    drop(watchdog);
    out
}

#[test]
fn run_reports_throughput_and_csv() {
    let p = Proc::kv(&["-t", "2"]);
    let dir = std::env::temp_dir().join(format!("gossamer-kv-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("run.csv");
    let _ = std::fs::remove_file(&csv);
    let mut cmd = load_bin();
    cmd.args([
        "run",
        "--server",
        &p.addr.to_string(),
        "--keys",
        "1000",
        "--dist",
        "zipf",
        "--duration",
        "0.5",
        "--warmup",
        "0.1",
    ]);
    cmd.args(["--threads", "2", "--conns", "2", "--depth", "8", "--csv", csv.to_str().unwrap()]);
    let out = output_within(cmd, Duration::from_secs(60));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("label,server,"));
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let ops: u64 = row[11].parse().unwrap();
    let hit_ratio: f64 = row[13].parse().unwrap();
    let errors: u64 = row[14].parse().unwrap();
    assert!(ops > 100, "{row:?}");
    assert!(hit_ratio > 0.99, "prefilled keys must hit: {row:?}");
    assert_eq!(errors, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compare_runs_both_servers() {
    if Proc::memcached(&[]).is_none() {
        common::skip::skip(common::skip::MEMCACHED, common::skip::MEMCACHED_VAR);
        return;
    }
    let mut cmd = load_bin();
    cmd.args(["compare", "--runs", "1", "--duration", "0.3", "--warmup", "0.1", "--keys", "1000", "--memory-mb", "64"]);
    cmd.args(["--threads", "1", "--conns", "2", "--depth", "4", "--kv-bin", env!("CARGO_BIN_EXE_gossamer-kv")]);
    let out = output_within(cmd, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for row in ["| 1000 uniform | 1% |", "| 1000 uniform | 10% |", "| 1000 zipf | 1% |", "| 1000 zipf | 10% |"] {
        assert!(stdout.contains(row), "missing {row} in\n{stdout}");
    }
}
