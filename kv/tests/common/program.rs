//! A gossamer-kv program of several processes of this host
//! (`--processes N`) for tests, killed (with its ranks) on drop.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::Raw;

/// A running multi-process server.
pub struct Program {
    child: Child,
    /// Where each rank listens, by rank.
    pub addrs: Vec<SocketAddr>,
}

impl Program {
    /// Starts `gossamer-kv --processes n` with `args` on free ports.
    pub fn start(n: usize, args: &[&str]) -> Program {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gossamer-kv"));
        cmd.args(["-p", "0", "-l", "127.0.0.1", "--processes", &n.to_string()])
            .args(args)
            .env_remove("GOSSAMER_PROCESSES")
            // Programs share the test machine's cores: a starved rank must
            // not be taken for a hung one.
            .env("GOSSAMER_SILENCE_MS", "10000")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("start gossamer-kv");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut addrs = vec![None; n];
        let deadline = Instant::now() + Duration::from_secs(30);
        while addrs.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = rx.recv_timeout(left) else {
                let _ = child.kill();
                panic!("the program did not report {n} addresses in time: {addrs:?}");
            };
            // "gossamer-kv rank R listening on ADDR"
            let words: Vec<&str> = line.split(' ').collect();
            assert_eq!(words.get(1..4), Some(&["rank", words[2], "listening"][..]), "unexpected line {line:?}");
            let rank: usize = words[2].parse().unwrap();
            addrs[rank] = Some(words[5].parse().unwrap());
        }
        Program { child, addrs: addrs.into_iter().map(Option::unwrap).collect() }
    }

    /// A raw connection to rank `rank`.
    pub fn raw(&self, rank: usize) -> Raw {
        Raw::connect(self.addrs[rank])
    }

    /// The process id of rank `rank` (from its `stats`).
    pub fn pid(&self, rank: usize) -> u32 {
        let mut raw = self.raw(rank);
        raw.send(b"stats\r\n");
        let reply = String::from_utf8(raw.recv_until(b"END\r\n")).unwrap();
        reply
            .lines()
            .find_map(|l| l.strip_prefix("STAT pid "))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no pid in {reply:?}"))
    }

    /// Waits (bounded) for the program to end; its exit status.
    pub fn wait(&mut self, limit: std::time::Duration) -> std::process::ExitStatus {
        let start = std::time::Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(start.elapsed() < limit, "the program did not end within {limit:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Sends `sig` to process `pid`.
    pub fn signal(pid: u32, sig: i32) {
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "kill {pid}");
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
