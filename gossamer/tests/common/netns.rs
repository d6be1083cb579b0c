//! A simulated rack for tests: one Linux network namespace per host, joined
//! by a bridge, made and removed by `scripts/rack-netns.sh`.
//!
//! ```ignore
//! let Some(rack) = netns::sim_rack_or_skip(3) else { return };
//! let mut cmd = rack.command(2, &program); // runs in host h2
//! cmd.arg("--serve").env("PEER", rack.addr(0).to_string());
//! ```
//!
//! Dropping the [`SimRack`] kills whatever still runs in its namespaces and
//! removes them, also when the test panics.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long one `up` or `down` of the script may take.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// The environment variable that turns a skip into a failure (CI sets it).
pub const REQUIRE_VAR: &str = "GOSSAMER_REQUIRE_NETNS";

// The skip helper, included from here so that other crates' tests, which
// include this file by path, get it too (`common::skip` re-exports it).
#[path = "skip.rs"]
pub mod skip;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// `scripts/rack-netns.sh` of this workspace.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("scripts").join("rack-netns.sh")
}

/// Runs `cmd` to its end, killing it after `timeout`; its stdout, or why
/// it failed (its stderr where it said something).
fn run_bounded(mut cmd: Command, what: &str, timeout: Duration) -> Result<String, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} took over {timeout:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("waiting for {what}: {e}")),
        }
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    if status.success() {
        Ok(out)
    } else {
        let err = err.trim();
        Err(if err.is_empty() { format!("{what} failed ({status})") } else { err.to_owned() })
    }
}

/// Runs the script with `args`, bounded by `timeout`.
fn run_script(args: &[&str], timeout: Duration) -> Result<String, String> {
    let mut cmd = Command::new("bash");
    cmd.arg(script()).args(args);
    run_bounded(cmd, &format!("rack-netns.sh {}", args.join(" ")), timeout)
}

/// Removes the racks of test processes that died without dropping theirs
/// (tags `<pid>-<n>` whose pid is gone), so that a killed test run does not
/// leave namespaces behind for good.
fn reap_stale() {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "list"]);
    let Ok(list) = run_bounded(cmd, "ip netns list", SCRIPT_TIMEOUT) else { return };
    let mut stale: Vec<String> = vec![];
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else { continue };
        let Some(rest) = name.strip_prefix("gsm-") else { continue };
        let mut parts = rest.splitn(3, '-');
        let (Some(pid), Some(n), Some(host)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(pid) || !digits(n) || !(host == "br" || host.strip_prefix('h').is_some_and(digits)) {
            continue;
        }
        let tag = format!("{pid}-{n}");
        if !Path::new("/proc").join(pid).exists() && !stale.contains(&tag) {
            stale.push(tag);
        }
    }
    for tag in stale {
        let _ = run_script(&["down", &tag], SCRIPT_TIMEOUT);
    }
}

/// Bytes through a host's port on the bridge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricBytes {
    /// Bytes the host put on the fabric.
    pub sent: u64,
    /// Bytes the fabric delivered to the host.
    pub received: u64,
}

/// A rack of simulated hosts `h0`, `h1`, …: each a network namespace with
/// loopback and one address on a shared /24. Dropping it removes them all.
#[derive(Debug)]
pub struct SimRack {
    tag: String,
    addrs: Vec<Ipv4Addr>,
    removed: bool,
}

impl SimRack {
    /// Whether this machine can make network namespaces; why not otherwise.
    pub fn check() -> Result<(), String> {
        run_script(&["check"], SCRIPT_TIMEOUT).map(|_| ())
    }

    /// A rack of `hosts` hosts, under a tag unique to this process and call.
    /// `Err(reason)` when the namespaces cannot be made.
    pub fn up(hosts: usize) -> Result<SimRack, String> {
        if hosts == 0 {
            return Err("a rack needs at least one host".into());
        }
        reap_stale();
        let tag = format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let out = match run_script(&["up", &tag, &hosts.to_string()], SCRIPT_TIMEOUT) {
            Ok(out) => out,
            Err(e) => {
                let _ = run_script(&["down", &tag], SCRIPT_TIMEOUT);
                return Err(e);
            }
        };
        // From here on, dropping the rack removes it.
        let mut rack = SimRack { tag, addrs: Vec::with_capacity(hosts), removed: false };
        for (i, line) in out.lines().enumerate() {
            // "h<I> <namespace> <address>"
            let f: Vec<&str> = line.split_whitespace().collect();
            let addr = match f[..] {
                [h, ns, a] if h == format!("h{i}") && ns == rack.namespace(i) => a.parse().ok(),
                _ => None,
            };
            match addr {
                Some(a) => rack.addrs.push(a),
                None => return Err(format!("rack-netns.sh up: unexpected line {line:?}")),
            }
        }
        if rack.addrs.len() != hosts {
            return Err(format!("rack-netns.sh up: {} hosts listed, {hosts} asked for", rack.addrs.len()));
        }
        Ok(rack)
    }

    /// The tag naming this rack's namespaces (`gsm-<tag>-h<I>`, `gsm-<tag>-br`).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// How many hosts the rack has.
    pub fn hosts(&self) -> usize {
        self.addrs.len()
    }

    /// Host `host`'s address on the fabric.
    pub fn addr(&self, host: usize) -> Ipv4Addr {
        assert!(host < self.addrs.len(), "host {host} of a {}-host rack", self.addrs.len());
        self.addrs[host]
    }

    /// The network namespace of host `host`.
    pub fn namespace(&self, host: usize) -> String {
        format!("gsm-{}-h{host}", self.tag)
    }

    /// The namespace holding the bridge.
    pub fn bridge_namespace(&self) -> String {
        format!("gsm-{}-br", self.tag)
    }

    /// A command that runs `program` in host `host`'s namespace, with
    /// `GOSSAMER_HOST=h<host>` and `UCX_TLS=tcp`; add arguments and
    /// environment and spawn it. The spawned process is `program` itself (the
    /// script and `ip netns exec` exec it), so killing the child kills it.
    pub fn command(&self, host: usize, program: &Path) -> Command {
        assert!(host < self.addrs.len(), "host {host} of a {}-host rack", self.addrs.len());
        let mut cmd = Command::new("bash");
        cmd.arg(script()).arg("exec").arg(&self.tag).arg(host.to_string()).arg(program);
        cmd
    }

    /// Bytes through host `host`'s port on the bridge so far (every frame,
    /// ARP included): proof that traffic crossed the fabric.
    pub fn fabric_bytes(&self, host: usize) -> Result<FabricBytes, String> {
        assert!(host < self.addrs.len(), "host {host} of a {}-host rack", self.addrs.len());
        let read = |what: &str| -> Result<u64, String> {
            // `ip netns exec` mounts the namespace's own /sys.
            let file = format!("/sys/class/net/v{host}/statistics/{what}");
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &self.bridge_namespace(), "cat", &file]);
            let text = run_bounded(cmd, &format!("cat {file}"), SCRIPT_TIMEOUT)?;
            text.trim().parse().map_err(|_| format!("{file}: {text:?}"))
        };
        // The bridge port receives what the host sends, and the other way round.
        Ok(FabricBytes { sent: read("rx_bytes")?, received: read("tx_bytes")? })
    }

    /// Kills what still runs in the rack and removes its namespaces now.
    pub fn down(mut self) -> Result<(), String> {
        self.remove()
    }

    fn remove(&mut self) -> Result<(), String> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        run_script(&["down", &self.tag], SCRIPT_TIMEOUT).map(|_| ())
    }
}

impl Drop for SimRack {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            if std::thread::panicking() {
                let _ = writeln!(std::io::stderr(), "rack {}: teardown failed: {e}", self.tag);
            } else {
                panic!("rack {}: teardown failed: {e}", self.tag);
            }
        }
    }
}

/// A rack of `hosts` hosts, or `None` after a visible SKIPPED line when
/// the heavy tests are not asked for (`GOSSAMER_FULL_TESTS=1`) or this
/// machine cannot make network namespaces; with `GOSSAMER_REQUIRE_NETNS=1`
/// set, a panic instead of the second skip.
pub fn sim_rack_or_skip(hosts: usize) -> Option<SimRack> {
    if !skip::full("a program over simulated hosts") {
        return None;
    }
    match SimRack::up(hosts) {
        Ok(rack) => Some(rack),
        Err(reason) => {
            skip::skip(&format!("network namespaces (root, iproute2: apt install iproute2): {reason}"), REQUIRE_VAR);
            None
        }
    }
}

/// Whether a program over several hosts may run here: the heavy tests are
/// asked for (`GOSSAMER_FULL_TESTS=1`) and UCX (`libucp.so.0`) is
/// installed. Otherwise a visible SKIPPED line and `false` — or, when UCX is
/// missing and `GOSSAMER_REQUIRE_UCX=1` (CI sets it), a panic.
pub fn ucx_or_skip() -> bool {
    if !skip::full("a program over several hosts") {
        return false;
    }
    let found = ["/usr/lib/x86_64-linux-gnu/libucp.so.0", "/usr/lib/libucp.so.0", "/usr/lib64/libucp.so.0"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    if !found {
        skip::skip("UCX (libucp.so.0: apt install libucx0)", "GOSSAMER_REQUIRE_UCX");
    }
    found
}
