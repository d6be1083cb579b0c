//! Running a multi-process program as a test: a bounded wait, its output,
//! and a check that none of its processes is left behind.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn tag() -> String {
    format!("{}-{}", std::process::id(), Instant::now().elapsed().as_nanos() ^ rand_seed())
}

fn rand_seed() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// Processes whose environment carries `GOSSAMER_TEST_TAG=tag`.
pub fn survivors(tag: &str) -> Vec<u32> {
    let needle = format!("GOSSAMER_TEST_TAG={tag}");
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(env) = std::fs::read(e.path().join("environ")) {
            if env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) {
                v.push(pid);
            }
        }
    }
    v
}

/// Runs the program to its end (killing it after `timeout`), with its
/// output read as it comes, so that a chatty program cannot block on a full
/// pipe; then checks that none of its processes is left.
pub fn run_program(mut cmd: Command, timeout: Duration) -> (Output, Duration) {
    let tag = tag();
    cmd.env("GOSSAMER_TEST_TAG", &tag).stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out_reader = drain(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err_reader = drain(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            let (o, e) = (out_reader.join().unwrap(), err_reader.join().unwrap());
            panic!("program hung; output:\n{}\n{}", String::from_utf8_lossy(&o), String::from_utf8_lossy(&e));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = start.elapsed();
    let out = Output { status, stdout: out_reader.join().unwrap(), stderr: err_reader.join().unwrap() };
    // No process of the program is left behind.
    let start = Instant::now();
    while !survivors(&tag).is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(survivors(&tag), Vec::<u32>::new(), "processes left behind");
    (out, took)
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// This test binary started again as a program of `processes` processes
/// (`GOSSAMER_PROCESSES`), whose `scenario_entry` test runs the scenario
/// `name` (`GOSSAMER_SCENARIO`) under `gossamer::main`. The caller's rank,
/// size and strict mode are not passed on: set them on the command.
pub fn scenario(name: &str, processes: usize) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "scenario_entry", "--nocapture", "--test-threads=1"])
        .env("GOSSAMER_SCENARIO", name)
        .env("GOSSAMER_PROCESSES", processes.to_string())
        .env_remove("GOSSAMER_RANK")
        .env_remove("GOSSAMER_SIZE")
        .env_remove("GOSSAMER_STRICT");
    cmd
}

/// The output of a scenario program that must have succeeded and printed
/// `SCENARIO {name} ok`.
pub fn passed(out: &Output, name: &str) -> String {
    let t = text(out);
    assert!(out.status.success(), "scenario {name} failed:\n{t}");
    assert!(t.contains(&format!("SCENARIO {name} ok")), "{t}");
    t
}
