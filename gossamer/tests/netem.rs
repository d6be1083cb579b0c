//! Programs over simulated hosts through a bad network: links with delay
//! and loss, a host whose link goes down without a word (no FIN, no RST),
//! and a partition that heals within the heartbeat window.
//!
//! * Under 2 ms of delay and 1 % loss on every link, the echo example and
//!   `gossamer-sssp` over 2 hosts finish with exact results, and no host is
//!   taken for lost.
//! * A host whose link goes down stops the whole program within 2 s (the
//!   heartbeat window, 1.5 s, and a little): every surviving host names the
//!   lost one (rank, host, address), and every process exits by itself.
//! * A link that is down for 300 ms, less than the window, is survived: the
//!   program finishes with exact counts.
//!
//! The processes are this test binary re-executed with `GOSSAMER_SCENARIO`
//! (see [`scenario_entry`]), the echo example and `gossamer-sssp`. Heavy
//! tests: they need `GOSSAMER_FULL_TESTS=1`, root (network namespaces) and
//! UCX, and say SKIPPED otherwise (`GOSSAMER_REQUIRE_NETNS=1` and
//! `GOSSAMER_REQUIRE_UCX=1` make that a failure, as in CI).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gossamer::Trust;

mod common;
use common::netem::{self, BadNetwork};
use common::netns::{self, ucx_or_skip, SimRack};
use common::programs::{run_program, survivors, text};

/// Worker threads per process in the scenarios.
const THREADS_PER_RANK: usize = 2;
/// The bad network of the issue: one-way delay, and loss in each direction.
const DELAY: Duration = Duration::from_millis(2);
const LOSS_PERCENT: f64 = 1.0;
/// The promise: a lost host stops the program within this long.
const DETECT: Duration = Duration::from_secs(2);
const TIMEOUT: Duration = Duration::from_secs(240);

// ---- the scenarios (run inside the spawned processes) ----------------------

/// Every thread increments a counter on every thread, one blocking apply at
/// a time, for `COUNT_MILLIS`; then the counters must add up to the
/// increments made.
fn count() {
    let millis: u64 = std::env::var("COUNT_MILLIS").ok().and_then(|v| v.parse().ok()).unwrap_or(3000);
    let n = gossamer::threads();
    let counters: Vec<Trust<u64>> = (0..n).map(|t| gossamer::entrust_on(t, 0u64)).collect();
    let start = Instant::now();
    let fibers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with(
                t,
                |(cs, millis): (Vec<Trust<u64>>, u64)| {
                    let end = Instant::now() + Duration::from_millis(millis);
                    let mut made = 0u64;
                    while Instant::now() < end {
                        for c in &cs {
                            c.apply_with(|v, ()| *v += 1, ());
                            made += 1;
                        }
                    }
                    made
                },
                (counters.clone(), millis),
            )
        })
        .collect();
    let made: u64 = fibers.into_iter().map(|f| f.join().unwrap()).sum();
    let counted: u64 = counters.iter().map(|c| c.apply_with(|v, ()| *v, ())).sum();
    assert_eq!(counted, made, "every increment counted once");
    println!("SCENARIO count ok: {made} increments in {:.2} s", start.elapsed().as_secs_f64());
}

/// Says BUSY, then keeps every thread busy with requests to every other
/// thread until the program is stopped from outside.
fn busy() {
    let n = gossamer::threads();
    let counters: Vec<Trust<u64>> = (0..n).map(|t| gossamer::entrust_on(t, 0u64)).collect();
    let fibers: Vec<_> = (0..n)
        .map(|t| {
            gossamer::spawn_with::<_, ()>(
                t,
                |cs: Vec<Trust<u64>>| loop {
                    for c in &cs {
                        c.apply_with(|v, ()| *v += 1, ());
                    }
                },
                counters.clone(),
            )
        })
        .collect();
    println!("BUSY");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    for f in fibers {
        let _ = f.join();
    }
    unreachable!("the busy fibers never end");
}

#[test]
fn scenario_entry() {
    let Ok(s) = std::env::var("GOSSAMER_SCENARIO") else { return };
    let ranks: usize = std::env::var("GOSSAMER_SIZE").unwrap().parse().unwrap();
    let f: fn() = match s.as_str() {
        "count" => count,
        "busy" => busy,
        other => panic!("unknown scenario {other}"),
    };
    gossamer::main(f, ranks * THREADS_PER_RANK);
    common::assert_no_thread_left("rank 0");
}

// ---- starting programs over the rack -----------------------------------------

/// Whether programs over simulated hosts can run here; if not, a SKIPPED
/// line. Not under a sanitizer (CI sets GOSSAMER_SANITIZER), as for
/// tests/hosts.rs: there UCX is uninstrumented and a rank's start alone
/// takes seconds, beyond these tests' bounds; the plain run tests them.
/// One network test at a time: each runs a program over simulated hosts
/// and judges its timing against the heartbeat window, which a second
/// program competing for the same cores would distort.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn hosts_or_skip() -> bool {
    if std::env::var_os("GOSSAMER_SANITIZER").is_some() {
        common::skip::skipped("not run under a sanitizer: a program over simulated hosts (UCX), as tests/hosts.rs");
        return false;
    }
    ucx_or_skip()
}

/// A rack of `hosts` hosts where programs over hosts can run, or `None`
/// after a SKIPPED line.
fn rack_or_skip(hosts: usize) -> Option<SimRack> {
    if !hosts_or_skip() {
        return None;
    }
    netns::sim_rack_or_skip(hosts)
}

/// One command per rank of a program of `program` and `args` with one rank
/// per host of `rack`, started as a launcher would (rank, size, rendezvous
/// at host 0 and the secret in the environment), with the default
/// heartbeat window.
fn ranks(rack: &SimRack, program: &Path, args: &[&str], port: u16) -> Vec<Command> {
    let rendezvous = format!("{}:{port}", rack.addr(0));
    (0..rack.hosts())
        .map(|r| {
            let mut c = rack.command(r, program);
            c.args(args)
                .env("GOSSAMER_RANK", r.to_string())
                .env("GOSSAMER_SIZE", rack.hosts().to_string())
                .env("GOSSAMER_RENDEZVOUS", &rendezvous)
                .env("GOSSAMER_SECRET", format!("netem-test-{}", std::process::id()))
                .env_remove("GOSSAMER_SECRET_FILE")
                .env_remove("GOSSAMER_PROCESSES")
                .env_remove("GOSSAMER_SILENCE_MS");
            c
        })
        .collect()
}

/// A port for the rendezvous, different for each program of this test run.
fn port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    22000 + (std::process::id() % 10000) as u16 + NEXT.fetch_add(1, Ordering::Relaxed) * 10
}

/// This test binary running `scenario` as every rank.
fn scenario(rack: &SimRack, scenario: &str, extra: &[(&str, &str)]) -> Vec<Command> {
    let me = std::env::current_exe().unwrap();
    let mut cmds = ranks(rack, &me, &["--exact", "scenario_entry", "--nocapture", "--test-threads=1"], port());
    for c in &mut cmds {
        c.env("GOSSAMER_SCENARIO", scenario);
        for (k, v) in extra {
            c.env(k, v);
        }
    }
    cmds
}

/// Runs every rank to its end (bounded, none left behind); each rank's
/// output and status, and how long the whole program took.
fn run_all(cmds: Vec<Command>) -> (Vec<std::process::Output>, Duration) {
    let start = Instant::now();
    let handles: Vec<_> = cmds.into_iter().map(|c| std::thread::spawn(move || run_program(c, TIMEOUT).0)).collect();
    let outs: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    (outs, start.elapsed())
}

/// Every rank succeeded, and none took a host for lost; rank 0's output.
fn all_ok(outs: &[std::process::Output], what: &str) -> String {
    for (r, o) in outs.iter().enumerate() {
        let t = text(o);
        assert!(o.status.success(), "{what}: rank {r} failed:\n{t}");
        assert!(!t.contains("failed:") && !t.contains("is gone"), "{what}: rank {r} took a host for lost:\n{t}");
    }
    text(&outs[0])
}

/// `target/<profile>/NAME` of this workspace, built when missing or older
/// than this test (`cargo test -p gossamer` builds only this crate).
fn workspace_bin(package: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(|d| d.parent()).expect("target/<profile>/deps").join(name);
    let built = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if built(&bin).is_none_or(|b| built(&exe).is_some_and(|e| b < e)) {
        let mut cargo = Command::new(env!("CARGO"));
        cargo.current_dir(env!("CARGO_MANIFEST_DIR")).args(["build", "-p", package, "--bin", name]);
        if !cfg!(debug_assertions) {
            cargo.arg("--release");
        }
        let (out, _) = run_program(cargo, Duration::from_secs(900));
        assert!(out.status.success(), "cargo build -p {package} failed:\n{}", text(&out));
    }
    assert!(bin.is_file(), "{} is missing after the build", bin.display());
    bin
}

// ---- delay and loss --------------------------------------------------------------

/// The echo example over 2 hosts, then `gossamer-sssp` over 2 hosts, each
/// on a clean network and then under 2 ms of delay and 1 % loss: exact
/// results (echo checks that every echo was served once; the search checks
/// every distance against Dijkstra's) and no host taken for lost.
#[test]
fn echo_and_sssp_finish_exactly_through_delay_and_loss() {
    let _serial = one_at_a_time();
    if !hosts_or_skip() {
        return;
    }
    let Some(echo) = common::example("echo") else { return };
    let Some(rack) = netns::sim_rack_or_skip(2) else { return };
    let sssp = workspace_bin("gossamer-sssp", "gossamer-sssp");
    let echo_run = |what: &str| {
        let mut cmds = ranks(&rack, &echo, &[], port());
        for c in &mut cmds {
            c.env("ECHO_THREADS", "4").env("ECHO_SIZE", "1024").env("ECHO_MILLIS", "1500");
        }
        let (outs, took) = run_all(cmds);
        let t = all_ok(&outs, what);
        let line = t.lines().find(|l| l.starts_with("ECHO ")).unwrap_or_else(|| panic!("{what}: no ECHO line:\n{t}"));
        println!("{what}: {line} (program {took:.2?})");
    };
    let sssp_run = |what: &str| {
        let args = ["run", "--scale", "10", "--roots", "2", "--threads", "4", "--baselines", "dijkstra", "--quiet"];
        let (outs, took) = run_all(ranks(&rack, &sssp, &args, port()));
        let t = all_ok(&outs, what);
        assert!(t.contains("on 2 hosts"), "{what}:\n{t}");
        assert_eq!(t.matches("distances agree").count(), 2, "{what}: every search is exact:\n{t}");
        println!("{what}: 2 searches exact (program {took:.2?})");
    };
    echo_run("echo, clean network");
    sssp_run("sssp, clean network");
    let clean = netem::round_trip(&rack, 0, 1).unwrap();
    let bad = BadNetwork::impose(&rack, DELAY, LOSS_PERCENT).expect("delay and loss on the links");
    let slow = netem::round_trip(&rack, 0, 1).unwrap();
    println!(
        "delay {DELAY:?} and {LOSS_PERCENT} % loss on every link, by {}: round trip {clean:.2?} -> {slow:.2?}",
        bad.how()
    );
    assert!(slow >= 2 * DELAY, "a round trip crosses the delay twice: {slow:?}");
    echo_run("echo, delay and loss");
    sssp_run("sssp, delay and loss");
    if let Some((dropped, passed)) = bad.relay_counts() {
        println!("the relay dropped {dropped} frames and passed {passed}");
        assert!(dropped > 0 && passed > 100 * dropped / 5, "about 1 % lost: {dropped} of {}", dropped + passed);
    }
}

// ---- a link that goes down ----------------------------------------------------------

/// A program running on every host of `rack`, one rank per host, whose
/// processes are watched: started, then busy.
struct Running {
    children: Vec<Child>,
    exits: Vec<Option<Instant>>,
    stderr: Vec<std::thread::JoinHandle<String>>,
    tag: String,
}

impl Running {
    fn start(cmds: Vec<Command>) -> Running {
        let tag = format!("netem-{}-{:?}", std::process::id(), Instant::now());
        let mut children: Vec<Child> = cmds
            .into_iter()
            .map(|mut c| {
                c.env("GOSSAMER_TEST_TAG", &tag).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
                c.spawn().unwrap()
            })
            .collect();
        let (tx, rx) = mpsc::channel();
        let out = BufReader::new(children[0].stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stderr = children
            .iter_mut()
            .map(|c| {
                let mut err = c.stderr.take().unwrap();
                std::thread::spawn(move || {
                    let mut s = String::new();
                    let _ = err.read_to_string(&mut s);
                    s
                })
            })
            .collect();
        let n = children.len();
        let mut running = Running { children, exits: vec![None; n], stderr, tag };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(l) if l.contains("BUSY") => break,
                Ok(_) => {}
                Err(_) => {
                    let ended = running.children.iter_mut().any(|c| c.try_wait().unwrap().is_some());
                    assert!(!ended && Instant::now() < deadline, "the program did not start");
                }
            }
        }
        running
    }

    /// Waits up to `limit` for every process to exit by itself; then kills
    /// what is left. Each rank's stderr and how long after `since` it
    /// exited (`None`: it had to be killed).
    fn finish(mut self, since: Instant, limit: Duration) -> Vec<(String, Option<Duration>)> {
        while self.exits.iter().any(Option::is_none) && since.elapsed() < limit {
            for (c, e) in self.children.iter_mut().zip(&mut self.exits) {
                if e.is_none() && c.try_wait().unwrap().is_some() {
                    *e = Some(Instant::now());
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let errs: Vec<String> = self.stderr.drain(..).map(|h| h.join().unwrap()).collect();
        let left = Instant::now() + Duration::from_secs(5);
        while !survivors(&self.tag).is_empty() && Instant::now() < left {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(survivors(&self.tag), Vec::<u32>::new(), "processes left behind");
        errs.into_iter().zip(self.exits.iter().map(|e| e.map(|e| e - since))).collect()
    }
}

/// Cuts host `lost`'s link while a busy program runs over 3 hosts, and
/// checks that every process exits by itself, the surviving hosts' within
/// [`DETECT`], each naming the lost host's rank, host name and address.
fn cut_and_check(lost: usize) {
    let _serial = one_at_a_time();
    let Some(rack) = rack_or_skip(3) else { return };
    let running = Running::start(scenario(&rack, "busy", &[]));
    std::thread::sleep(Duration::from_millis(500));
    netem::link_down(&rack, lost).unwrap();
    let cut = Instant::now();
    let ranks = running.finish(cut, Duration::from_secs(20));
    let lost_addr = rack.addr(lost).to_string();
    for (r, (err, exit)) in ranks.iter().enumerate() {
        let Some(took) = exit else { panic!("rank {r} did not exit by itself:\n{err}") };
        let said = err.lines().find(|l| l.starts_with("gossamer:")).unwrap_or("(nothing)");
        println!("host h{lost}'s link down -> rank {r} (host h{r}) exited after {took:.2?}: {said}");
        if r == lost {
            continue; // cut off: it gives up on the others in its own time
        }
        assert!(*took <= DETECT, "rank {r} took {took:?} to stop the program:\n{err}");
        // The rank's own line, or rank 0's if it is rank 0.
        let named = err.lines().any(|l| {
            l.contains(&format!("rank {lost} ")) && l.contains(&format!("host h{lost}")) && l.contains(&lost_addr)
        });
        assert!(named, "rank {r} names rank {lost}, host h{lost} and {lost_addr}:\n{err}");
    }
}

#[test]
fn a_host_whose_link_goes_down_stops_the_program_within_two_seconds() {
    cut_and_check(2);
}

#[test]
fn rank_zeros_host_losing_its_link_stops_the_program_within_two_seconds() {
    cut_and_check(0);
}

// ---- a partition that heals ------------------------------------------------------------

/// A link down for 300 ms, well within the heartbeat window, twice during
/// a run of blocking requests between 2 hosts: the program finishes with
/// exact counts and nobody is taken for lost. The window is 3 s here
/// rather than the default 1.5 s: a 300 ms cut costs about 0.8 s of
/// silence (TCP's retransmission timer doubles from 200 ms), and on a
/// loaded test machine scheduling delays come on top; with a 250 ms window
/// the test fails, as it must.
#[test]
fn a_partition_that_heals_within_the_heartbeat_window_is_survived() {
    let _serial = one_at_a_time();
    let Some(rack) = rack_or_skip(2) else { return };
    let cmds = scenario(&rack, "count", &[("COUNT_MILLIS", "5000"), ("GOSSAMER_SILENCE_MS", "3000")]);
    let (tx, rx) = mpsc::channel();
    let program = std::thread::spawn(move || {
        let r = run_all(cmds);
        let _ = tx.send(());
        r
    });
    // Cut once the program runs (start-up takes a few seconds in a debug
    // build: wait for its requests to cross), and again later.
    let before = rack.fabric_bytes(1).unwrap().received;
    let start = Instant::now();
    while rack.fabric_bytes(1).unwrap().received < before + 200_000 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cuts = 0;
    for _ in 0..2 {
        if rx.try_recv().is_ok() {
            break;
        }
        netem::link_down(&rack, 1).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        netem::link_up(&rack, 1).unwrap();
        cuts += 1;
        std::thread::sleep(Duration::from_millis(1200));
    }
    let (outs, took) = program.join().unwrap();
    let t = all_ok(&outs, "counting across a partition");
    assert!(cuts == 2, "the program ended before both cuts:\n{t}");
    let at = t.find("SCENARIO count ok").unwrap_or_else(|| panic!("no result:\n{t}"));
    let line = t[at..].lines().next().unwrap_or_default();
    println!("{cuts} cuts of 300 ms: {line} (program {took:.2?})");
}
