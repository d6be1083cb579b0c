//! `gossamer daemon`, `gossamer run` and `gossamer hosts` over simulated
//! hosts (network namespaces; needs root, else SKIPPED unless
//! `GOSSAMER_REQUIRE_NETNS=1`). The program is the `hello_rack` example of
//! the `gossamer` crate: the first test to need it runs
//! `cargo build -p gossamer --example hello_rack` (bounded) and uses
//! `target/debug/examples/hello_rack`, next to this crate's `gossamer` binary.
//!
//! Every daemon carries a per-test `GOSSAMER_TEST_TAG` in its environment, which
//! the ranks inherit: each test checks that no rank outlives `gossamer run`
//! and that nothing is left once the daemons are stopped.

#[path = "../../gossamer/tests/common/netns.rs"]
mod netns;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const PORT: u16 = 7117;

/// One rack test at a time: they start many processes, and two of them measure.
static SERIAL: Mutex<()> = Mutex::new(());

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gossamer"))
}

/// `target/debug/examples/hello_rack`, built once per test run.
fn hello() -> PathBuf {
    // Every test here runs over simulated hosts, a heavy test that skips
    // (in `Rig::up`) unless GOSSAMER_FULL_TESTS=1: build nothing for it then.
    if std::env::var("GOSSAMER_FULL_TESTS").as_deref() != Ok("1") {
        return exe().parent().unwrap().join("examples").join("hello_rack");
    }
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let mut cmd = Command::new(env!("CARGO"));
            cmd.current_dir(&root).args(["build", "-p", "gossamer", "--example", "hello_rack"]);
            let out = bounded(cmd, Duration::from_secs(600), &[]).expect("cargo build hung");
            if !out.status.success() {
                return Err(format!("cargo build --example hello_rack failed:\n{}", out.stderr));
            }
            let p = exe().parent().unwrap().join("examples").join("hello_rack");
            if p.is_file() {
                Ok(p)
            } else {
                Err(format!("{} is missing after the build", p.display()))
            }
        })
        .clone()
        .unwrap()
}

fn tag() -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!("cli-{}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// Processes whose environment carries `GOSSAMER_TEST_TAG=tag`.
fn survivors(tag: &str) -> Vec<u32> {
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

/// Output read as it comes, with the time each line arrived.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<(Instant, String)>>>);

impl Lines {
    fn drain(&self, r: impl Read + Send + 'static) -> std::thread::JoinHandle<()> {
        let me = self.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                me.0.lock().unwrap().push((Instant::now(), line));
            }
        })
    }
    fn text(&self) -> String {
        self.0.lock().unwrap().iter().map(|(_, l)| format!("{l}\n")).collect()
    }
    fn wait_for(&self, what: impl Fn(&str) -> bool, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if what(&self.text()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// A process being watched: its output read as it comes.
struct Watched {
    child: Child,
    out: Lines,
    err: Lines,
    readers: Vec<std::thread::JoinHandle<()>>,
    start: Instant,
}

fn spawn(mut cmd: Command, envs: &[(&str, &str)]) -> Watched {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let (out, err) = (Lines::default(), Lines::default());
    let readers = vec![out.drain(child.stdout.take().unwrap()), err.drain(child.stderr.take().unwrap())];
    Watched { child, out, err, readers, start }
}

impl Watched {
    /// Waits for the end (bounded): `None` if it ran past `timeout` (then killed).
    fn wait(mut self, timeout: Duration) -> Option<Ran> {
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if self.start.elapsed() > timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                eprintln!("hung; output:\n{}{}", self.out.text(), self.err.text());
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = self.start.elapsed();
        for r in self.readers {
            let _ = r.join();
        }
        Some(Ran { status, stdout: self.out.text(), stderr: self.err.text(), took })
    }
}

fn bounded(cmd: Command, timeout: Duration, envs: &[(&str, &str)]) -> Option<Ran> {
    spawn(cmd, envs).wait(timeout)
}

fn secret_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

/// A rack with a daemon on every host.
struct Rig {
    rack: netns::SimRack,
    tag: String,
    dir: PathBuf,
    secret: PathBuf,
    daemons: Vec<Option<Child>>,
    logs: Vec<PathBuf>,
}

impl Rig {
    fn up(hosts: usize) -> Option<Rig> {
        Rig::up_with(hosts, &[], |_, _| None)
    }

    /// Daemons that may start the example programs and whatever `allow`
    /// names, as root (the namespaces need it); `wrap(i, daemon_args)` may
    /// give another command for host i's daemon.
    fn up_with(
        hosts: usize,
        allow: &[&Path],
        wrap: impl Fn(usize, &[String]) -> Option<(PathBuf, Vec<String>)>,
    ) -> Option<Rig> {
        let rack = netns::sim_rack_or_skip(hosts)?;
        let tag = tag();
        let dir = std::env::temp_dir().join(format!("gossamer-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = secret_file(&dir, "secret", "correct horse battery staple\n", 0o600);
        let mut rig = Rig { rack, tag, dir, secret, daemons: vec![], logs: vec![] };
        let examples = exe().parent().unwrap().join("examples");
        std::fs::create_dir_all(&examples).unwrap();
        for i in 0..hosts {
            let log = rig.dir.join(format!("daemon{i}.log"));
            let mut args: Vec<String> = vec![
                "daemon".into(),
                "--listen".into(),
                format!("{}:{PORT}", rig.rack.addr(i)),
                "--secret-file".into(),
                rig.secret.display().to_string(),
                "--allow-root".into(),
                "--allow".into(),
                examples.display().to_string(),
            ];
            for a in allow {
                args.extend(["--allow".into(), a.display().to_string()]);
            }
            let mut cmd = match wrap(i, &args) {
                Some((prog, wargs)) => {
                    let mut c = rig.rack.command(i, &prog);
                    c.args(wargs);
                    c
                }
                None => {
                    let mut c = rig.rack.command(i, &exe());
                    c.args(&args);
                    c
                }
            };
            cmd.env("GOSSAMER_TEST_TAG", &rig.tag)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap());
            rig.daemons.push(Some(cmd.spawn().unwrap()));
            rig.logs.push(log);
        }
        for i in 0..hosts {
            let start = Instant::now();
            while !rig.log(i).contains("listening") {
                assert!(start.elapsed() < Duration::from_secs(20), "daemon {i} did not start: {}", rig.log(i));
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Some(rig)
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.logs[i]).unwrap_or_default()
    }

    fn hosts_arg(&self) -> String {
        (0..self.rack.hosts()).map(|i| self.rack.addr(i).to_string()).collect::<Vec<_>>().join(",")
    }

    fn daemon_pids(&self) -> Vec<u32> {
        self.daemons.iter().flatten().map(|c| c.id()).collect()
    }

    /// Processes of this test other than the daemons.
    fn ranks_left(&self) -> Vec<u32> {
        let d = self.daemon_pids();
        survivors(&self.tag).into_iter().filter(|p| !d.contains(p)).collect()
    }

    /// Checks (bounded) that no rank is left.
    fn assert_no_ranks_within(&self, within: Duration) {
        let start = Instant::now();
        while !self.ranks_left().is_empty() && start.elapsed() < within {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(self.ranks_left(), Vec::<u32>::new(), "ranks left behind");
    }

    /// `gossamer ARGS` on host 0, tagged.
    fn gossamer(&self, args: &[&str]) -> Command {
        let mut c = self.rack.command(0, &exe());
        c.args(args).env("GOSSAMER_TEST_TAG", &self.tag);
        c
    }

    /// `gossamer run --hosts … -n N --secret-file S EXTRA -- hello_rack`.
    fn run_cmd(&self, n: usize, extra: &[&str], secret: &Path) -> Command {
        let hosts = self.hosts_arg();
        let (n, s, h) = (n.to_string(), secret.display().to_string(), hello().display().to_string());
        let mut args = vec!["run", "--hosts", &hosts, "-n", &n, "--secret-file", &s];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", &h]);
        self.gossamer(&args)
    }

    fn kill_daemon(&mut self, i: usize) {
        if let Some(mut c) = self.daemons[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the daemons and checks that nothing of the test is left.
    fn finish(mut self) {
        for i in 0..self.daemons.len() {
            self.kill_daemon(i);
        }
        let start = Instant::now();
        while !survivors(&self.tag).is_empty() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(survivors(&self.tag), Vec::<u32>::new(), "processes left behind");
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for c in self.daemons.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn run_prints_every_rank_and_exits_0() {
    let _g = serial();
    let _ = hello();
    let Some(rig) = Rig::up(3) else { return };
    let out = bounded(rig.run_cmd(3, &[], &rig.secret), Duration::from_secs(60), &[]).expect("gossamer run hung");
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    for r in 0..3 {
        let line = format!("[{r}] hello from rank {r} on host {}, thread {r}", rig.rack.addr(r));
        assert!(out.stdout.contains(&line), "missing {line:?} in:\n{}", out.stdout);
    }
    assert!(out.stdout.contains("[0] hello_rack: 3 thread(s) over 3 rank(s) on 3 host(s)"), "{}", out.stdout);
    eprintln!("gossamer run of 3 ranks over 3 hosts took {:?}", out.took);
    rig.assert_no_ranks_within(Duration::from_secs(2));
    // Without tags, the lines are the program's own.
    let out = bounded(rig.run_cmd(3, &["--no-tag-output"], &rig.secret), Duration::from_secs(60), &[]).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    assert!(out.stdout.lines().any(|l| l.starts_with("hello from rank 1 on host")), "{}", out.stdout);
    rig.finish();
}

#[test]
fn crashing_rank_fails_the_run_naming_it() {
    let _g = serial();
    let _ = hello();
    let Some(rig) = Rig::up(3) else { return };
    let out = bounded(rig.run_cmd(3, &["-x", "HELLO_CRASH_RANK=2"], &rig.secret), Duration::from_secs(60), &[])
        .expect("gossamer run hung");
    assert!(!out.status.success(), "{}", out.stderr);
    let want = format!("rank 2 on host {} exited with status 3", rig.rack.addr(2));
    assert!(out.stderr.contains(&want), "missing {want:?} in:\n{}", out.stderr);
    assert!(out.stderr.contains("the program failed"), "{}", out.stderr);
    rig.assert_no_ranks_within(Duration::from_secs(2));
    rig.finish();
}

#[test]
fn killed_daemon_stops_the_run_naming_the_host() {
    let _g = serial();
    let _ = hello();
    let Some(mut rig) = Rig::up(3) else { return };
    let w = spawn(rig.run_cmd(3, &["-x", "HELLO_SLEEP_MS=60000"], &rig.secret), &[]);
    assert!(
        w.out.wait_for(|t| t.matches("hello from rank").count() == 3, Duration::from_secs(60)),
        "no greeting from every rank:\n{}{}",
        w.out.text(),
        w.err.text()
    );
    // What the daemon of host 1 runs.
    let s = rig.secret.display().to_string();
    let addr = format!("{}:{PORT}", rig.rack.addr(1));
    let st = bounded(rig.gossamer(&["daemon", "--status", &addr, "--secret-file", &s]), Duration::from_secs(20), &[])
        .unwrap();
    assert!(st.status.success(), "{}", st.stderr);
    assert!(st.stdout.contains("1 rank(s)") && st.stdout.contains("hello_rack"), "{}", st.stdout);
    eprintln!("gossamer daemon --status {addr}:\n{}", st.stdout);
    let killed = Instant::now();
    rig.kill_daemon(2);
    let out = w.wait(Duration::from_secs(30)).expect("gossamer run hung after its daemon died");
    let took = killed.elapsed();
    eprintln!("FIGURE killed daemon -> gossamer run exit: {took:?}");
    assert!(!out.status.success());
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let want = format!("lost the daemon on host {}", rig.rack.addr(2));
    assert!(out.stderr.contains(&want), "missing {want:?} in:\n{}", out.stderr);
    rig.assert_no_ranks_within(Duration::from_secs(2));
    rig.finish();
}

#[test]
fn wrong_secret_is_refused_and_logged() {
    let _g = serial();
    let _ = hello();
    let Some(rig) = Rig::up(3) else { return };
    let wrong = secret_file(&rig.dir, "wrong", "not the secret\n", 0o600);
    let out = bounded(rig.run_cmd(3, &[], &wrong), Duration::from_secs(30), &[]).expect("gossamer run hung");
    assert!(!out.status.success());
    assert!(out.stderr.contains("authentication failed"), "{}", out.stderr);
    assert_eq!(rig.ranks_left(), Vec::<u32>::new(), "something started");
    assert!(!out.stdout.contains("hello"), "{}", out.stdout);
    // Every daemon logged the failure with the peer's address.
    let peer = rig.rack.addr(0).to_string();
    for i in 0..3 {
        let start = Instant::now();
        while !rig.log(i).contains("authentication failed") && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let log = rig.log(i);
        assert!(log.contains("authentication failed") && log.contains(&peer), "daemon {i}:\n{log}");
        assert!(!log.contains("started ranks"), "daemon {i}:\n{log}");
    }
    rig.finish();
}

#[test]
fn loose_secret_file_is_refused() {
    let dir = std::env::temp_dir().join(format!("gossamer-{}", tag()));
    std::fs::create_dir_all(&dir).unwrap();
    for mode in [0o644, 0o640, 0o604, 0o620] {
        let loose = secret_file(&dir, "loose", "secret\n", mode);
        let mut d = Command::new(exe());
        d.args(["daemon", "--listen", "127.0.0.1:0", "--secret-file"]).arg(&loose);
        let out = bounded(d, Duration::from_secs(10), &[]).expect("daemon did not exit");
        assert!(!out.status.success(), "mode {mode:o}");
        let p = loose.display().to_string();
        assert!(out.stderr.contains(&p) && out.stderr.contains(&format!("chmod 600 {p}")), "{}", out.stderr);
        let mut r = Command::new(exe());
        r.args(["run", "-n", "1", "--secret-file"]).arg(&loose).args(["--", "/bin/true"]);
        let out = bounded(r, Duration::from_secs(10), &[]).unwrap();
        assert!(!out.status.success() && out.stderr.contains("chmod 600"), "{}", out.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn different_binary_on_one_host_is_refused_naming_it() {
    let _g = serial();
    let hello = hello();
    // One path, two contents: host 1's daemon runs in a mount namespace of
    // its own where a different file is bound over the path.
    let dir = std::env::temp_dir().join(format!("gossamer-bin-{}", tag()));
    std::fs::create_dir_all(&dir).unwrap();
    let app = dir.join("app");
    let other = dir.join("other");
    // Without the heavy tests the example may not be built, and the rig
    // skips below: nothing to copy then.
    if hello.is_file() {
        std::fs::copy(&hello, &app).unwrap();
        std::fs::copy(&hello, &other).unwrap();
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&other).unwrap();
        f.write_all(b"different").unwrap();
    }
    let gossamer = exe().display().to_string();
    let (a, o) = (app.display().to_string(), other.display().to_string());
    let Some(rig) = Rig::up_with(3, &[&dir], |i, args| {
        (i == 1).then(|| {
            let script = format!("mount --bind {o} {a} && exec {gossamer} \"$@\"");
            let mut w = vec!["-m".into(), "--propagation".into(), "private".into(), "sh".into(), "-c".into(), script];
            w.push("sh".into());
            w.extend(args.iter().cloned());
            (PathBuf::from("/usr/bin/unshare"), w)
        })
    }) else {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let hosts = rig.hosts_arg();
    let s = rig.secret.display().to_string();
    let cmd = rig.gossamer(&["run", "--hosts", &hosts, "-n", "3", "--secret-file", &s, "--", &a]);
    let out = bounded(cmd, Duration::from_secs(60), &[]).expect("gossamer run hung");
    assert!(!out.status.success());
    let want = format!("host {}: the daemon on h1 refused: {a}: SHA-256", rig.rack.addr(1));
    assert!(out.stderr.contains(&want), "missing {want:?} in:\n{}", out.stderr);
    assert!(out.stderr.contains("different binary"), "{}", out.stderr);
    assert_eq!(rig.ranks_left(), Vec::<u32>::new(), "something started");
    assert!(!out.stdout.contains("hello"), "{}", out.stdout);
    // A path that is not executable, and one that is missing, are refused too.
    std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o644)).unwrap();
    let cmd = rig.gossamer(&["run", "--hosts", &hosts, "-n", "3", "--secret-file", &s, "--", &a]);
    let out = bounded(cmd, Duration::from_secs(60), &[]).unwrap();
    assert!(!out.status.success() && out.stderr.contains("not executable"), "{}", out.stderr);
    rig.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigint_stops_every_rank() {
    let _g = serial();
    let _ = hello();
    let Some(rig) = Rig::up(3) else { return };
    let w = spawn(rig.run_cmd(3, &["-x", "HELLO_SLEEP_MS=60000"], &rig.secret), &[]);
    assert!(
        w.out.wait_for(|t| t.matches("hello from rank").count() == 3, Duration::from_secs(60)),
        "no greeting from every rank:\n{}{}",
        w.out.text(),
        w.err.text()
    );
    assert!(rig.ranks_left().len() > 3, "ranks and the launcher run");
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(w.child.id() as i32, libc::SIGINT) };
    let out = w.wait(Duration::from_secs(20)).expect("gossamer run ignored SIGINT");
    let took = sent.elapsed();
    eprintln!("SIGINT -> gossamer run exit: {took:?}");
    assert!(!out.status.success());
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(out.stderr.contains("SIGINT received"), "{}", out.stderr);
    rig.assert_no_ranks_within(Duration::from_secs(2));
    rig.finish();
}

#[test]
fn hosts_lists_every_daemon() {
    let _g = serial();
    let Some(rig) = Rig::up(3) else { return };
    let s = rig.secret.display().to_string();
    let out = bounded(
        rig.gossamer(&["hosts", "--hosts", &rig.hosts_arg(), "--secret-file", &s]),
        Duration::from_secs(60),
        &[],
    )
    .expect("gossamer hosts hung");
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    eprintln!("gossamer hosts:\n{}", out.stdout);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    assert!(lines[0].starts_with("HOST") && lines[0].contains("CORES") && lines[0].contains("UCX TRANSPORTS"));
    for i in 0..3 {
        let l = lines[i + 1];
        assert!(l.starts_with(&rig.rack.addr(i).to_string()) && l.contains(&format!(" h{i} ")), "{l}");
        assert!(l.contains(env!("CARGO_PKG_VERSION")), "{l}");
    }
    rig.finish();
}

#[test]
fn launch_time_of_8_ranks_over_4_hosts() {
    let _g = serial();
    let _ = hello();
    let Some(rig) = Rig::up(4) else { return };
    let mut best = Duration::MAX;
    for round in 0..3 {
        let w = spawn(rig.run_cmd(8, &["--threads", "8"], &rig.secret), &[]);
        let (start, out_lines) = (w.start, w.out.clone());
        let ran = w.wait(Duration::from_secs(60)).expect("gossamer run hung");
        assert!(ran.status.success(), "{}\n{}", ran.stdout, ran.stderr);
        let lines = out_lines.0.lock().unwrap().clone();
        let mut first = [None; 8];
        for (t, l) in &lines {
            if let Some(r) = l.strip_prefix('[').and_then(|l| l.split(']').next()).and_then(|r| r.parse::<usize>().ok())
            {
                first[r].get_or_insert(*t);
            }
        }
        assert!(first.iter().all(Option::is_some), "every rank printed:\n{}", ran.stdout);
        let all = first.iter().map(|t| t.unwrap().duration_since(start)).max().unwrap();
        eprintln!(
            "FIGURE launch of 8 ranks over 4 hosts, round {round}: {all:?} to every rank's first line; run took {:?}",
            ran.took
        );
        best = best.min(all);
        rig.assert_no_ranks_within(Duration::from_secs(2));
    }
    eprintln!("FIGURE launch of 8 ranks over 4 hosts: best {best:?}");
    rig.finish();
}
