//! The simulated rack itself: hosts in network namespaces reach each other
//! over the bridge, not the root namespace's loopback, see `GOSSAMER_HOST`
//! and `UCX_TLS=tcp`, and leave no namespace or process behind.
//!
//! The processes in the hosts are this test binary, re-executed with
//! `GOSSAMER_SIM_ROLE` naming a small std::net role (see [`sim_rack_role`]).

#[path = "common/netns.rs"]
mod netns;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use netns::{sim_rack_or_skip, SimRack};

const ROLE_VAR: &str = "GOSSAMER_SIM_ROLE";
const TAG_VAR: &str = "GOSSAMER_TEST_TAG";
/// The longest any role lives, whatever happens to the test.
const ROLE_LIFETIME: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- roles --

/// Entry point of the re-executed binary: does nothing in a normal test run.
#[test]
fn sim_rack_role() {
    let Ok(role) = std::env::var(ROLE_VAR) else { return };
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("role {role}: {k} not set"));
    let host = std::env::var("GOSSAMER_HOST").unwrap_or_default();
    match role.as_str() {
        // Accepts one connection on GOSSAMER_SIM_BIND, answers one line.
        "listen" => {
            let l = TcpListener::bind((env("GOSSAMER_SIM_BIND").parse::<Ipv4Addr>().unwrap(), 0)).unwrap();
            l.set_nonblocking(true).unwrap();
            say(&format!("PORT {}", l.local_addr().unwrap().port()));
            let start = Instant::now();
            let (mut s, peer) = loop {
                match l.accept() {
                    Ok(c) => break c,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && start.elapsed() < WAIT => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            s.set_write_timeout(Some(WAIT)).unwrap();
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).unwrap();
            let line = line.trim_end();
            say(&format!("PEER {}", peer.ip()));
            say(&format!("GOT {line}"));
            writeln!(s, "pong to {line} from {host}").unwrap();
        }
        // Connects to GOSSAMER_SIM_TARGET (retrying until it listens), sends
        // one line and prints the answer.
        "connect" => {
            let target: SocketAddr = env("GOSSAMER_SIM_TARGET").parse().unwrap();
            let start = Instant::now();
            let mut s = loop {
                match TcpStream::connect_timeout(&target, Duration::from_secs(2)) {
                    Ok(s) => break s,
                    Err(_) if start.elapsed() < WAIT => std::thread::sleep(Duration::from_millis(20)),
                    Err(e) => panic!("connect {target}: {e}"),
                }
            };
            s.set_read_timeout(Some(WAIT)).unwrap();
            s.set_write_timeout(Some(WAIT)).unwrap();
            writeln!(s, "ping from {host}").unwrap();
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).unwrap();
            say(&format!("REPLY {}", line.trim_end()));
        }
        // One connection attempt to GOSSAMER_SIM_TARGET; prints its outcome.
        "probe" => {
            let target: SocketAddr = env("GOSSAMER_SIM_TARGET").parse().unwrap();
            match TcpStream::connect_timeout(&target, Duration::from_secs(3)) {
                Ok(_) => say("PROBE connected"),
                Err(e) => say(&format!("PROBE failed {:?}: {e}", e.kind())),
            }
        }
        // What the process sees of its host.
        "env" => {
            for k in ["GOSSAMER_HOST", "UCX_TLS", "GOSSAMER_SIM_PASS"] {
                say(&format!("ENV {k}={}", std::env::var(k).unwrap_or_else(|_| "<unset>".into())));
            }
            say(&format!("NETNS {}", std::fs::read_link("/proc/self/ns/net").unwrap().display()));
            let bind = env("GOSSAMER_SIM_BIND").parse::<Ipv4Addr>().unwrap();
            say(&format!("BIND {}", if TcpListener::bind((bind, 0)).is_ok() { "ok" } else { "failed" }));
        }
        // Sleeps (with one child that sleeps too) until killed or its
        // lifetime is over.
        "sleep" => {
            let mut child = if std::env::var_os("GOSSAMER_SIM_CHILD").is_none() {
                let c = Command::new(std::env::current_exe().unwrap())
                    .args(role_args())
                    .env("GOSSAMER_SIM_CHILD", "1")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                Some(c)
            } else {
                None
            };
            say(&format!("SLEEPING {} {:?}", std::process::id(), child.as_ref().map(Child::id)));
            std::thread::sleep(ROLE_LIFETIME);
            if let Some(c) = &mut child {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        other => panic!("unknown role {other}"),
    }
    std::process::exit(0);
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

fn role_args() -> [&'static str; 5] {
    ["sim_rack_role", "--exact", "--nocapture", "--test-threads=1", "--quiet"]
}

// -------------------------------------------------------------- helpers --

/// A tag for `GOSSAMER_TEST_TAG` unique to this test.
fn test_tag() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("sim-rack-{}-{}-{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Processes whose environment carries `GOSSAMER_TEST_TAG=tag`.
fn survivors(tag: &str) -> Vec<u32> {
    let needle = format!("{TAG_VAR}={tag}");
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

/// Waits (bounded) until no process carries `tag`, then asserts it.
fn assert_no_survivors(tag: &str) {
    let start = Instant::now();
    while !survivors(tag).is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(survivors(tag), Vec::<u32>::new(), "processes left behind");
}

/// The rack's namespaces that `ip netns list` shows.
fn namespaces_of(rack_tag: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    let prefix = format!("gsm-{rack_tag}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_owned)
        .collect()
}

/// A role running in a host; killed if dropped while still running.
struct Role {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: mpsc::Receiver<String>,
}

impl Role {
    fn spawn(rack: &SimRack, host: usize, role: &str, tag: &str, env: &[(&str, String)]) -> Role {
        let mut cmd = rack.command(host, &std::env::current_exe().unwrap());
        cmd.args(role_args()).env(ROLE_VAR, role).env(TAG_VAR, tag);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().unwrap();
        let (tx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            let _ = tx.send(s);
        });
        Role { child, lines, seen: vec![], stderr }
    }

    /// The rest of the first output line starting with `prefix`.
    fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + WAIT;
        if let Some(l) = self.seen.iter().find(|l| l.starts_with(prefix)) {
            return l[prefix.len()..].to_owned();
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if let Some(rest) = l.strip_prefix(prefix) {
                        return rest.to_owned();
                    }
                }
                Err(e) => {
                    let _ = self.child.kill();
                    panic!("no {prefix:?} line ({e:?}); {}", self.report());
                }
            }
        }
    }

    /// Waits (at most `timeout`) for the role to end; its exit status.
    fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > timeout {
                panic!("role still running after {timeout:?}; {}", self.report());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the role to end and asserts that it succeeded.
    fn finish(&mut self) {
        let status = self.wait(WAIT);
        if !status.success() {
            panic!("role failed ({status}); {}", self.report());
        }
    }

    /// What the role said, for a failure message (kills it first, so that
    /// its stderr ends).
    fn report(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
            self.seen.push(l);
        }
        let stderr = self.stderr.recv_timeout(Duration::from_secs(2)).unwrap_or_else(|_| "<still open>".into());
        format!("output: {:?}; stderr: {stderr}", self.seen)
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------- tests --

/// (a) A process in h0 talks to a listener in h2 over the bridge.
#[test]
fn tcp_crosses_the_bridge_between_hosts() {
    let Some(rack) = sim_rack_or_skip(3) else { return };
    let tag = test_tag();
    let before = (rack.fabric_bytes(0).unwrap(), rack.fabric_bytes(2).unwrap());

    let mut listener = Role::spawn(&rack, 2, "listen", &tag, &[("GOSSAMER_SIM_BIND", rack.addr(2).to_string())]);
    let port: u16 = listener.expect("PORT ").parse().unwrap();
    let target = SocketAddr::from((rack.addr(2), port));
    let mut connector = Role::spawn(&rack, 0, "connect", &tag, &[("GOSSAMER_SIM_TARGET", target.to_string())]);
    assert_eq!(connector.expect("REPLY "), "pong to ping from h0 from h2");
    connector.finish();
    assert_eq!(listener.expect("GOT "), "ping from h0");
    // The listener saw h0's fabric address, not loopback.
    assert_eq!(listener.expect("PEER "), rack.addr(0).to_string());
    listener.finish();

    // The bytes went through h0's and h2's ports on the bridge.
    let after = (rack.fabric_bytes(0).unwrap(), rack.fabric_bytes(2).unwrap());
    let (ping, pong) = ("ping from h0\n".len() as u64, "pong to ping from h0 from h2\n".len() as u64);
    let h0 = (after.0.sent - before.0.sent, after.0.received - before.0.received);
    let h2 = (after.1.sent - before.1.sent, after.1.received - before.1.received);
    assert!(h0.0 > ping && h2.1 > ping, "ping: sent by h0 {}, received by h2 {}", h0.0, h2.1);
    assert!(h2.0 > pong && h0.1 > pong, "pong: sent by h2 {}, received by h0 {}", h2.0, h0.1);
    drop((listener, connector));
    drop(rack);
    assert_no_survivors(&tag);
}

/// (b) A host cannot reach the root namespace's loopback: a listener on
/// 127.0.0.1 there is not what 127.0.0.1 means inside h0.
#[test]
fn hosts_cannot_reach_the_root_namespace_loopback() {
    let Some(rack) = sim_rack_or_skip(3) else { return };
    let tag = test_tag();
    let root = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    root.set_nonblocking(true).unwrap();
    let addr = root.local_addr().unwrap();

    // It is reachable from here...
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("root namespace reaches its own listener");
    let start = Instant::now();
    loop {
        match root.accept() {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && start.elapsed() < WAIT => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
    // ...but not from h0, whose loopback is its own.
    let mut probe = Role::spawn(&rack, 0, "probe", &tag, &[("GOSSAMER_SIM_TARGET", addr.to_string())]);
    let outcome = probe.expect("PROBE ");
    probe.finish();
    assert!(outcome.starts_with("failed ConnectionRefused"), "h0 -> root {addr}: {outcome}");
    match root.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the root listener got a connection from the rack: {other:?}"),
    }
    drop(probe);
    drop(rack);
    assert_no_survivors(&tag);
}

/// (c) Inside a host: its own namespace and address, `GOSSAMER_HOST`,
/// `UCX_TLS=tcp`, and the rest of the environment passed through.
#[test]
fn hosts_see_their_name_and_tcp_only_ucx() {
    let Some(rack) = sim_rack_or_skip(3) else { return };
    let tag = test_tag();
    let own = std::fs::read_link("/proc/self/ns/net").unwrap().display().to_string();
    let mut seen = vec![];
    for host in 0..rack.hosts() {
        let mut r = Role::spawn(
            &rack,
            host,
            "env",
            &tag,
            &[("GOSSAMER_SIM_PASS", "through".into()), ("GOSSAMER_SIM_BIND", rack.addr(host).to_string())],
        );
        assert_eq!(r.expect("ENV GOSSAMER_HOST="), format!("h{host}"));
        assert_eq!(r.expect("ENV UCX_TLS="), "tcp");
        assert_eq!(r.expect("ENV GOSSAMER_SIM_PASS="), "through");
        assert_eq!(r.expect("BIND "), "ok", "h{host} owns {}", rack.addr(host));
        let ns = r.expect("NETNS ");
        assert_ne!(ns, own, "h{host} runs in the root namespace");
        assert!(!seen.contains(&ns), "two hosts share namespace {ns}");
        seen.push(ns);
        r.finish();
    }
    // The hosts' addresses: one private /24, .1, .2, .3.
    let [a, b, c, _] = rack.addr(0).octets();
    assert_eq!((a, b), (10, 231));
    assert_eq!((0..3).map(|h| rack.addr(h)).collect::<Vec<_>>(), [1, 2, 3].map(|d| Ipv4Addr::new(a, b, c, d)));
    drop(rack);
    assert_no_survivors(&tag);
}

/// (d) Dropping the rack kills what still runs in it (children included)
/// and removes its namespaces.
#[test]
fn dropping_the_rack_leaves_nothing_behind() {
    let Some(rack) = sim_rack_or_skip(3) else { return };
    let tag = test_tag();
    let rack_tag = rack.tag().to_owned();
    assert_eq!(namespaces_of(&rack_tag).len(), 4, "3 hosts and the bridge: {:?}", namespaces_of(&rack_tag));

    let mut sleepers: Vec<Role> = (1..3).map(|h| Role::spawn(&rack, h, "sleep", &tag, &[])).collect();
    for s in &mut sleepers {
        s.expect("SLEEPING ");
    }
    // Two sleepers, each with a child. A child reports nothing, so it may
    // still be between fork and exec when its parent says SLEEPING: wait for
    // all four to show (bounded), rather than sample once.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = survivors(&tag);
    while seen.len() < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        seen = survivors(&tag);
    }
    assert_eq!(seen.len(), 4, "{seen:?}");

    let start = Instant::now();
    drop(rack);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "teardown took {took:?}");
    assert_eq!(namespaces_of(&rack_tag), Vec::<String>::new(), "namespaces left behind");
    for s in &mut sleepers {
        // Killed by the teardown, so gone already.
        let status = s.wait(Duration::from_secs(2));
        assert!(!status.success(), "a sleeper ended by itself: {status}");
    }
    assert_no_survivors(&tag);
}

/// The script's own contract: `down` is idempotent, `up` refuses a rack that
/// is up and bad arguments, `check` passes where racks can be made.
#[test]
fn script_contract() {
    let Some(rack) = sim_rack_or_skip(1) else { return };
    let script = netns::script();
    let run = |args: &[&str]| {
        let out = Command::new("bash").arg(&script).args(args).stdin(Stdio::null()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(run(&["check"]).0, Some(0));
    let (code, err) = run(&["up", rack.tag(), "2"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("already up"), "{err}");
    assert_ne!(run(&["up", "bad tag", "2"]).0, Some(0));
    assert_ne!(run(&["up", "gsm-unused", "0"]).0, Some(0));
    assert_eq!(run(&[]).0, Some(2));
    let tag = rack.tag().to_owned();
    rack.down().unwrap();
    assert_eq!(run(&["down", &tag]), (Some(0), String::new()));
    assert_eq!(namespaces_of(&tag), Vec::<String>::new());
}
