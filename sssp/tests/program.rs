//! The `gossamer-sssp` binary as users run it: exact distances against the
//! sequential Dijkstra in one and three processes, a wrong result failing
//! the run, the edge-list file, and a run across simulated hosts.

#[path = "../../gossamer/tests/common/netns.rs"]
mod netns;
// Shared with gossamer's own tests, which use more of it than this one.
#[allow(dead_code)]
#[path = "../../gossamer/tests/common/programs.rs"]
mod programs;

use std::process::Command;
use std::time::Duration;

use netns::ucx_or_skip;
use programs::{run_program, text};

const TIMEOUT: Duration = Duration::from_secs(180);

fn exe() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gossamer-sssp"));
    // Strict: within each process, every worker is its own simulated
    // process, so one process keeps the rules that several do.
    c.env_remove("GOSSAMER_PROCESSES").env("GOSSAMER_SILENCE_MS", "10000").env("GOSSAMER_STRICT", "1");
    c
}

/// Runs a search and checks that every root's distances equal Dijkstra's
/// (the binary compares them exactly and validates all of them).
fn exact(processes: usize, threads: usize, extra: &[&str]) -> String {
    let mut c = exe();
    c.args(["run", "--roots", "3", "--baselines", "dijkstra", "--quiet"])
        .args(["--threads", &threads.to_string(), "--processes", &processes.to_string()])
        .args(extra);
    let (out, _) = run_program(c, TIMEOUT);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert_eq!(t.matches("distances agree").count(), 3, "{t}");
    assert!(t.contains(&format!("result,gossamer,{processes},{threads},")), "{t}");
    t
}

#[test]
fn one_process_matches_dijkstra() {
    exact(1, 2, &["--scale", "10"]);
}

#[test]
fn three_processes_match_dijkstra() {
    let t = exact(3, 3, &["--scale", "10", "--edgefactor", "8"]);
    assert!(t.contains("3 threads in 3 processes"), "{t}");
}

#[test]
fn a_wrong_result_fails_the_run() {
    let mut c = exe();
    c.args(["run", "--scale", "8", "--roots", "1", "--threads", "2", "--baselines", "none", "--quiet", "--corrupt"]);
    let (out, _) = run_program(c, TIMEOUT);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("validation of the search from"), "{t}");
}

#[test]
fn a_graph_file_gives_the_same_searches() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("g.edges");
    let mut c = exe();
    c.args(["generate", "--scale", "9", "--edgefactor", "8", "--seed", "5", "--out"]).arg(&file);
    let (out, _) = run_program(c, TIMEOUT);
    assert!(out.status.success(), "{}", text(&out));
    let medians = |t: &str| -> Vec<String> {
        t.lines().filter(|l| l.starts_with("root ")).map(|l| l.split(':').next().unwrap().to_string()).collect()
    };
    let from_file = exact(2, 2, &["--graph", file.to_str().unwrap()]);
    let generated = exact(1, 2, &["--scale", "9", "--edgefactor", "8", "--seed", "5"]);
    // Same graph, same root choice: the same roots were searched.
    assert_eq!(medians(&from_file), medians(&generated));
}

#[test]
fn simulated_hosts_match_dijkstra() {
    const HOSTS: usize = 2;
    if !ucx_or_skip() {
        return;
    }
    let Some(rack) = netns::sim_rack_or_skip(HOSTS) else { return };
    let before: Vec<_> = (0..HOSTS).map(|h| rack.fabric_bytes(h).unwrap()).collect();
    let rendezvous = format!("{}:{}", rack.addr(0), 21000 + (std::process::id() % 20000));
    let ranks = HOSTS;
    let cmds: Vec<Command> = (0..ranks)
        .map(|r| {
            let mut c = rack.command(r % HOSTS, std::path::Path::new(env!("CARGO_BIN_EXE_gossamer-sssp")));
            c.args(["run", "--scale", "10", "--roots", "2", "--threads", "4", "--baselines", "dijkstra", "--quiet"])
                .env("GOSSAMER_RANK", r.to_string())
                .env("GOSSAMER_SIZE", ranks.to_string())
                .env("GOSSAMER_RENDEZVOUS", &rendezvous)
                .env("GOSSAMER_SECRET", format!("sssp-test-{}", std::process::id()))
                .env_remove("GOSSAMER_SECRET_FILE")
                .env("GOSSAMER_SILENCE_MS", "10000")
                .env_remove("GOSSAMER_PROCESSES");
            c
        })
        .collect();
    let mut cmds = cmds.into_iter();
    let first = cmds.next().unwrap();
    let others: Vec<_> = cmds.map(|c| std::thread::spawn(move || run_program(c, TIMEOUT).0)).collect();
    let out = run_program(first, TIMEOUT).0;
    let rest: Vec<_> = others.into_iter().map(|h| h.join().unwrap()).collect();
    let t = text(&out);
    assert!(out.status.success(), "{t}\n{}", rest.iter().map(text).collect::<Vec<_>>().join("\n"));
    for o in &rest {
        assert!(o.status.success(), "{}", text(o));
    }
    assert!(t.contains("on 2 hosts"), "{t}");
    assert_eq!(t.matches("distances agree").count(), 2, "{t}");
    for (h, before) in before.iter().enumerate() {
        let after = rack.fabric_bytes(h).unwrap();
        assert!(after.sent > before.sent + 100_000, "host {h} sent {before:?} -> {after:?}");
    }
}
