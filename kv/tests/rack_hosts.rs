//! gossamer-kv as one program over two simulated hosts (network namespaces
//! joined by a bridge, UCX over TCP between them): each host's process
//! listens on its own address, and a YCSB client inside one host, talking
//! to both processes, reads every record it loaded and gets no error.
//! Needs root and UCX; skips loudly without them, and fails instead with
//! `GOSSAMER_REQUIRE_NETNS=1` / `GOSSAMER_REQUIRE_UCX=1` (CI sets both).

#[path = "../../gossamer/tests/common/netns.rs"]
mod netns;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The ranks of the program, killed on drop.
struct Ranks(Vec<Child>);

impl Drop for Ranks {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_bounded(c: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(s) = c.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn ycsb_over_two_simulated_hosts() {
    if !netns::ucx_or_skip() {
        return;
    }
    let Some(rack) = netns::sim_rack_or_skip(2) else { return };
    let kv = Path::new(env!("CARGO_BIN_EXE_gossamer-kv"));
    let rendezvous = format!("{}:{}", rack.addr(0), 20000 + std::process::id() % 20000);
    let mut ranks = Ranks(Vec::new());
    for r in 0..2 {
        let mut cmd = rack.command(r, kv);
        cmd.args(["-t", "1", "-p", "11311", "-l", &rack.addr(r).to_string()])
            .env("GOSSAMER_RANK", r.to_string())
            .env("GOSSAMER_SIZE", "2")
            .env("GOSSAMER_RENDEZVOUS", &rendezvous)
            .env("GOSSAMER_SECRET", format!("kv-test-{}", std::process::id()))
            .env_remove("GOSSAMER_SECRET_FILE")
            .env("GOSSAMER_SILENCE_MS", "6000")
            .env_remove("GOSSAMER_PROCESSES")
            .stdin(Stdio::null())
            .stdout(if r == 0 { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::inherit());
        ranks.0.push(cmd.spawn().expect("start a rank"));
    }
    // Rank 0 prints every process's address.
    let stdout = ranks.0[0].stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut addrs = Vec::new();
    while addrs.len() < 2 {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("rank 0 reports the addresses");
        let (head, addr) = line.rsplit_once(' ').unwrap();
        assert!(head.starts_with("gossamer-kv rank "), "{line:?}");
        addrs.push(addr.to_string());
    }
    assert_eq!(addrs, [format!("{}:11311", rack.addr(0)), format!("{}:11312", rack.addr(1))]);

    let before = rack.fabric_bytes(1).unwrap();
    for workload in ["c", "d"] {
        let mut load = rack.command(0, Path::new(env!("CARGO_BIN_EXE_gossamer-kv-load")));
        load.args(["ycsb", "--workload", workload, "--records", "3000", "--duration", "1"])
            .args(["--threads", "1", "--conns", "2", "--depth", "4"])
            .args(["--server", &addrs[0], "--server", &addrs[1]])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = load.spawn().unwrap();
        let status = wait_bounded(&mut child, Duration::from_secs(60)).unwrap_or_else(|| {
            let _ = child.kill();
            panic!("YCSB {workload} did not finish");
        });
        let out = child.wait_with_output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(status.success(), "YCSB {workload} over two hosts: {status}\n{text}");
        assert!(text.contains("hits 100.00%") && text.contains("errors 0"), "{text}");
    }
    let after = rack.fabric_bytes(1).unwrap();
    assert!(after.sent > before.sent + 100_000, "host 1 sent only {} bytes", after.sent - before.sent);

    // SIGTERM to rank 1 stops the whole program cleanly.
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(ranks.0[1].id() as i32, libc::SIGTERM) }, 0);
    for (r, c) in ranks.0.iter_mut().enumerate() {
        let status = wait_bounded(c, Duration::from_secs(20)).unwrap_or_else(|| panic!("rank {r} did not stop"));
        assert!(status.success(), "rank {r}: {status}");
    }
}
