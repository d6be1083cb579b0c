//! `gossamer top` against a running program: the `top_demo` example of the
//! `gossamer` crate (built on first use with
//! `cargo build -p gossamer --example top_demo`, bounded), which serves its
//! profile on a Unix socket. Every child is waited for or killed.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One demo at a time: each keeps both cores busy.
static SERIAL: Mutex<()> = Mutex::new(());

fn gossamer() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gossamer"))
}

fn demo() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let mut child = Command::new(env!("CARGO"))
                .current_dir(&root)
                .args(["build", "-p", "gossamer", "--example", "top_demo"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| e.to_string())?;
            let mut err = String::new();
            let status = wait_bounded(&mut child, Duration::from_secs(600));
            let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            match status {
                Some(s) if s.success() => {}
                _ => return Err(format!("cargo build --example top_demo failed:\n{err}")),
            }
            let p = gossamer().parent().unwrap().join("examples").join("top_demo");
            if p.is_file() {
                Ok(p)
            } else {
                Err(format!("{} is missing after the build", p.display()))
            }
        })
        .clone()
        .unwrap()
}

/// Waits for `child` up to `limit`; kills it (and reaps it) after that.
fn wait_bounded(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The demo, running for `secs` seconds at most (it stops earlier when
/// [`Demo::finish`] closes its standard input), and its socket.
struct Demo {
    child: Child,
    socket: PathBuf,
    /// Its standard error so far (read all along, so that it never blocks).
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    /// Standard output read along with the socket line (the reader's
    /// buffer), the start of what `finish` returns.
    early: String,
}

impl Demo {
    fn start(secs: u64, extra: &[&str]) -> Demo {
        let mut child = Command::new(demo())
            .arg(secs.to_string())
            .arg("--stdin")
            .args(extra)
            .stdin(Stdio::piped())
            .env_remove("GOSSAMER_TOP_SOCKET")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start top_demo");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut from, to) = (child.stderr.take().unwrap(), stderr.clone());
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = from.read(&mut buf) {
                to.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("top_demo's first line");
        let socket = PathBuf::from(line.trim().strip_prefix("top socket: ").expect(&line));
        // The rest of its output is read when it ends; what the reader took
        // in beyond the first line already is kept.
        let early = String::from_utf8_lossy(out.buffer()).into_owned();
        child.stdout = Some(out.into_inner());
        Demo { child, socket, stderr, stderr_reader: Some(stderr_reader), early }
    }

    /// Waits (up to 30 s) until the demo's standard error holds `pat`.
    fn wait_stderr(&self, pat: &str) -> String {
        let start = Instant::now();
        loop {
            let e = self.stderr.lock().unwrap().clone();
            if e.contains(pat) {
                return e;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no {pat:?} on top_demo's stderr:\n{e}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Asks the demo to stop, waits for it, and returns what it printed
    /// after the socket line.
    fn finish(mut self) -> String {
        drop(self.child.stdin.take());
        let mut out = self.child.stdout.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let status = wait_bounded(&mut self.child, Duration::from_secs(60));
        let rest = std::mem::take(&mut self.early) + &out.join().unwrap();
        if let Some(r) = self.stderr_reader.take() {
            let _ = r.join();
        }
        let err = self.stderr.lock().unwrap().clone();
        assert!(status.is_some_and(|s| s.success()), "top_demo failed or hung: {status:?}\n{rest}\n{err}");
        rest
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn top(args: &[&str]) -> (bool, String, String) {
    let mut child = Command::new(gossamer())
        .arg("top")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run gossamer top");
    let status = wait_bounded(&mut child, Duration::from_secs(60));
    let (mut out, mut err) = (String::new(), String::new());
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    (status.is_some_and(|s| s.success()), out, err)
}

#[test]
fn top_once_shows_the_hottest_trusts_of_a_running_program() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = Demo::start(300, &[]);
    assert!(d.socket.exists(), "{}", d.socket.display());
    let socket = d.socket.to_str().unwrap().to_string();
    let (ok, out, err) = top(&["--socket", &socket, "--once", "--interval", "0.5"]);
    assert!(ok, "gossamer top failed:\n{out}\n{err}");
    assert!(out.contains(&format!("pid {}", d.child.id())), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("0x")).collect();
    assert_eq!(rows.len(), 5, "four counters and a table:\n{out}");
    // The hottest counter (7 of 10 requests) comes first.
    assert!(rows[0].contains(" u64 ") && rows[0].contains("/s"), "{out}");
    assert!(out.contains("HashMap<u64, String>"), "{out}");
    assert!(out.contains("TRUSTEE") && out.lines().any(|l| l.starts_with("0 ") || l.starts_with("1 ")), "{out}");

    // The same through --pid, twice.
    let pid = d.child.id().to_string();
    let (ok, out, err) = top(&["--pid", &pid, "--iterations", "2", "--interval", "0.3"]);
    assert!(ok, "gossamer top --pid failed:\n{out}\n{err}");
    assert_eq!(out.matches("gossamer top — pid").count(), 2, "{out}");

    let socket_path = d.socket.clone();
    let rest = d.finish();
    assert!(rest.contains("shutdown clean: true"), "{rest}");
    assert!(!socket_path.exists(), "the socket outlived the program");
}

#[test]
fn top_stuck_names_the_deadlocked_launches() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = Demo::start(300, &["--deadlock"]);
    let socket = d.socket.to_str().unwrap().to_string();
    let (ok, out, err) = top(&["--socket", &socket, "--once", "--interval", "0.5", "--stuck"]);
    assert!(ok, "gossamer top --stuck failed:\n{out}\n{err}");
    assert!(out.contains("on launch on trustee 1 [gossamer::trust::latch::Latch<u32>"), "{out}");
    assert!(out.contains("on launch on trustee 0 [gossamer::trust::latch::Latch<u32>"), "{out}");
    assert_eq!(out.matches(" on latch [u32 ").count(), 2, "{out}");
    // SIGUSR1 prints the same dump on the program's standard error.
    // SAFETY: kill(2) on our own child, which is still running (it runs
    // until `finish` closes its input, and is reaped there).
    assert_eq!(unsafe { libc::kill(d.child.id() as libc::pid_t, libc::SIGUSR1) }, 0);
    let err = d.wait_stderr("live fibers");
    assert!(err.contains("gossamer stuck dump:") && err.contains("on launch on trustee 1"), "{err}");
    let rest = d.finish();
    // Shutdown abandons the deadlocked fibers.
    assert!(rest.contains("shutdown clean: false"), "{rest}");
}

#[test]
fn top_without_a_program_fails_clearly() {
    let (ok, _, err) = top(&["--socket", "/nonexistent/gossamer-top-test.sock", "--once"]);
    assert!(!ok);
    assert!(err.contains("GOSSAMER_TOP=1"), "{err}");
}

#[test]
fn top_sets_the_dedicated_count_and_trustee_parameters_of_a_running_program() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = Demo::start(300, &[]);
    let socket = d.socket.to_str().unwrap().to_string();
    let (ok, out, err) = top(&["--socket", &socket, "--set-dedicated", "1"]);
    assert!(ok, "gossamer top --set-dedicated failed:\n{out}\n{err}");
    assert!(out.starts_with("dedicated trustees: 1 of 2 (fixed)"), "{out}");
    let (ok, out, err) =
        top(&["--socket", &socket, "--set", "idle_spin_us=50", "--set", "tight_polls=8", "--trustee", "1"]);
    assert!(ok, "gossamer top --set failed:\n{out}\n{err}");
    assert!(out.contains("(trustee 0; others differ)"), "{out}");
    let (ok, out, err) = top(&["--socket", &socket, "--set-dedicated", "auto", "--set", "idle_spin_us=50"]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("(auto)") && out.contains("idle_spin_us=50"), "{out}");
    // The program refuses what it cannot do, and top says so.
    let (ok, out, err) = top(&["--socket", &socket, "--set-dedicated", "2"]);
    assert!(!ok && err.contains("leave no worker to run fibers"), "{out}\n{err}");
    let (ok, _, err) = top(&["--socket", &socket, "--set", "fiber_yield=0"]);
    assert!(!ok && err.contains("fiber_yield"), "{err}");
    // The table shows the settings.
    let (ok, out, err) = top(&["--socket", &socket, "--once", "--interval", "0.3"]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("dedicated trustees: ") && out.contains("(auto)"), "{out}");
    let rest = d.finish();
    assert!(rest.contains("shutdown clean: true"), "{rest}");
}

/// The rows of the ADAPTIVE section of `gossamer top`'s output: id,
/// policy, mode.
fn adaptive_rows(out: &str) -> Vec<(String, String, String)> {
    out.lines()
        .skip_while(|l| !l.starts_with("ADAPTIVE"))
        .skip(1)
        .take_while(|l| l.starts_with("0x"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "{l}");
            (f[0].to_string(), f[2].to_string(), f[3].to_string())
        })
        .collect()
}

#[test]
fn top_shows_and_sets_the_policy_of_adaptive_trusts_while_the_program_runs() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = Demo::start(300, &["--adaptive"]);
    let socket = d.socket.to_str().unwrap().to_string();
    let (ok, out, err) = top(&["--socket", &socket, "--once", "--interval", "0.3"]);
    assert!(ok, "gossamer top failed:\n{out}\n{err}");
    assert!(out.lines().any(|l| l.starts_with("TRUST ") && l.trim_end().ends_with("MODE")), "{out}");
    let rows = adaptive_rows(&out);
    assert_eq!(rows.len(), 2, "two adaptive counters:\n{out}");
    for (_, policy, mode) in &rows {
        assert_eq!(policy, "adaptive", "{out}");
        assert!(mode == "lock" || mode == "delegate", "{out}");
    }
    let (a, b) = (rows[0].0.clone(), rows[1].0.clone());

    // One to delegation, the other to the lock, in one call.
    let (ok, out, err) =
        top(&["--socket", &socket, "--set-policy", &format!("{a}=delegate"), "--set-policy", &format!("{b}=lock")]);
    assert!(ok, "gossamer top --set-policy failed:\n{out}\n{err}");
    assert!(out.starts_with("dedicated trustees: "), "{out}");
    let want = vec![
        (a.clone(), "delegate".to_string(), "delegate".to_string()),
        (b.clone(), "lock".to_string(), "lock".to_string()),
    ];
    assert_eq!(adaptive_rows(&out), want, "{out}");

    // The table shows each trust's mode: the delegating counter's requests
    // reach its trustee, and its row says so.
    let (ok, out, err) = top(&["--socket", &socket, "--once", "--interval", "0.3"]);
    assert!(ok, "{out}\n{err}");
    let row = out.lines().find(|l| l.starts_with(&format!("{a} "))).unwrap_or_else(|| panic!("no row {a}:\n{out}"));
    assert!(row.trim_end().ends_with(" delegate"), "{row}\n{out}");
    assert_eq!(adaptive_rows(&out), want, "{out}");

    // Refused commands change nothing: an id that is no adaptive trust (a
    // plain trust's, or none), and a policy that does not exist (refused
    // before it is sent).
    let plain = out
        .lines()
        .filter(|l| l.starts_with("0x") && l.trim_end().ends_with(" -"))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .next()
        .unwrap_or_else(|| panic!("no plain trust in the table:\n{out}"));
    for id in [plain.as_str(), "0x1"] {
        let (ok, out, err) = top(&["--socket", &socket, "--set-policy", &format!("{id}=adaptive")]);
        assert!(!ok && err.contains(&format!("no adaptive trust {id}")), "{id}: {out}\n{err}");
    }
    let (ok, _, err) = top(&["--socket", &socket, "--set-policy", &format!("{a}=sometimes")]);
    assert!(!ok && err.contains("delegate, adaptive, lock"), "{err}");
    let (ok, _, err) = top(&["--socket", &socket, "--set-policy", "zz=lock"]);
    assert!(!ok && err.contains("TRUST_ID=POLICY"), "{err}");
    let (ok, out, err) = top(&["--socket", &socket, "--once", "--interval", "0.2"]);
    assert!(ok, "{out}\n{err}");
    assert_eq!(adaptive_rows(&out), want, "{out}");

    // Back to measuring, without the `0x`.
    let (ok, out, err) = top(&["--socket", &socket, "--set-policy", &format!("{}=adaptive", &a[2..])]);
    assert!(ok, "{out}\n{err}");
    assert_eq!(adaptive_rows(&out)[0].1, "adaptive", "{out}");

    // Every add made while the policies changed counted once.
    let rest = d.finish();
    assert!(rest.contains("exact: true"), "{rest}");
    assert!(rest.contains(&format!("adaptive {a} policy Adaptive")), "{rest}");
    assert!(rest.contains(&format!("adaptive {b} policy Lock mode Lock")), "{rest}");
    assert!(rest.contains("shutdown clean: true"), "{rest}");
}

/// The rows of the FOLLOW section of `gossamer top`'s output: id, holder,
/// on or off, moves, window.
fn follow_rows(out: &str) -> Vec<(String, String, String, String, String)> {
    out.lines()
        .skip_while(|l| !l.starts_with("FOLLOW"))
        .skip(1)
        .take_while(|l| l.starts_with("0x"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 9, "{l}");
            (f[0].into(), f[1].into(), f[2].into(), f[3].into(), f[4].into())
        })
        .collect()
}

#[test]
fn top_shows_pauses_and_retunes_a_property_that_follows_while_the_program_runs() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = Demo::start(300, &["--follow"]);
    let socket = d.socket.to_str().unwrap().to_string();
    // Used from worker 1 only, the counter moves there from trustee 0.
    let start = Instant::now();
    let (id, out) = loop {
        let (ok, out, err) = top(&["--socket", &socket, "--once", "--interval", "0.2"]);
        assert!(ok, "gossamer top failed:\n{out}\n{err}");
        // The demo gives the counter its policy after it prints its socket:
        // the table may be empty at first.
        let rows = follow_rows(&out);
        assert!(rows.len() <= 1, "one counter follows:\n{out}");
        if let Some((id, holder, on, moves, window)) = rows.first().cloned() {
            assert_eq!((on.as_str(), window.as_str()), ("on", "64"), "{out}");
            if holder == "1" && moves != "0" {
                break (id, out);
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the counter never moved to trustee 1:\n{out}");
    };
    assert!(out.contains("HOLDER ON   MOVES  WINDOW WINDOW_MS SHARE RETURN REST"), "{out}");

    // Paused and retuned in one call; the table printed after it says so.
    let (ok, out, err) = top(&["--socket", &socket, "--set-follow", &format!("{id}=off,window=128")]);
    assert!(ok, "gossamer top --set-follow failed:\n{out}\n{err}");
    assert!(out.starts_with("dedicated trustees: "), "{out}");
    let rows = follow_rows(&out);
    assert_eq!((rows[0].0.as_str(), rows[0].2.as_str(), rows[0].4.as_str()), (id.as_str(), "off", "128"), "{out}");

    // Refused: out of bounds (by the program), no such property (by the
    // program), malformed (before it is sent); nothing changes.
    let (ok, _, err) = top(&["--socket", &socket, "--set-follow", &format!("{id}=window=8")]);
    assert!(!ok && err.contains("window = 8 is out of bounds"), "{err}");
    let (ok, _, err) = top(&["--socket", &socket, "--set-follow", "0x1=on"]);
    assert!(!ok && err.contains("no property 0x1"), "{err}");
    let (ok, _, err) = top(&["--socket", &socket, "--set-follow", &format!("{id}=sideways")]);
    assert!(!ok && err.contains("TRUST_ID=CHANGES"), "{err}");
    let (ok, out, err) = top(&["--socket", &socket, "--once", "--interval", "0.2"]);
    assert!(ok, "{out}\n{err}");
    let rows = follow_rows(&out);
    assert_eq!((rows[0].2.as_str(), rows[0].4.as_str()), ("off", "128"), "{out}");

    // On again, without the `0x`.
    let (ok, out, err) = top(&["--socket", &socket, "--set-follow", &format!("{}=on", &id[2..])]);
    assert!(ok, "{out}\n{err}");
    assert_eq!(follow_rows(&out)[0].2, "on", "{out}");

    // Every add made while it moved and while it was retuned counted once.
    let rest = d.finish();
    assert!(rest.contains(&format!("follow {id}\n")), "{rest}");
    assert!(rest.contains("exact: true, on trustee Some(1)"), "{rest}");
    assert!(rest.contains("shutdown clean: true"), "{rest}");
}
