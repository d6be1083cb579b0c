//! Shared by the daemon's tests: a daemon process on a free local port,
//! with its log captured and killed on drop; a client that speaks the
//! session directly (so a test can seal what it likes); bounded waits.

#![allow(dead_code)]

// The workspace's one skip helper (the library's tests own it).
#[path = "../../../gossamer/tests/common/skip.rs"]
pub mod skip;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gossamer_cli::proto::{self, ClientMsg, DaemonMsg};
use gossamer_session::{Opener, Sealer};

pub const SECRET: &str = "correct horse battery staple";

pub fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gossamer"))
}

/// A fresh directory under the system's temporary directory, mode 0755, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("gossamer-{what}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(p)
    }

    /// A secret file (mode 0600) in it.
    pub fn secret(&self) -> PathBuf {
        let p = self.0.join("secret");
        std::fs::write(&p, SECRET).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running daemon; killed (and reaped) on drop.
pub struct Daemon {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

impl Daemon {
    /// Runs `prefix... gossamer daemon --listen 127.0.0.1:PORT --secret-file S args...`
    /// and waits (bounded) until it listens.
    pub fn start(prefix: &[&str], exe: &Path, secret: &Path, log: &Path, args: &[&str]) -> Daemon {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut cmd = match prefix.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args(["daemon", "--listen", &addr.to_string(), "--secret-file"]).arg(secret).args(args);
        let f = std::fs::File::create(log).unwrap();
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(f);
        let child = cmd.spawn().unwrap();
        let mut d = Daemon { child, addr, log: log.to_path_buf() };
        let start = Instant::now();
        while !d.log().contains("gossamer daemon listening") {
            if let Ok(Some(s)) = d.child.try_wait() {
                panic!("the daemon exited ({s}) at start:\n{}", d.log());
            }
            assert!(start.elapsed() < Duration::from_secs(20), "the daemon did not start:\n{}", d.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// A field of /proc/PID/status in KiB (VmHWM, VmRSS) or count (Threads).
    pub fn status_field(&self, name: &str) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim_start_matches(':').split_whitespace().next()))
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Waits (bounded) until the log contains `what`.
    pub fn wait_log(&self, what: &str, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.log().contains(what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A session with a daemon, driven directly.
pub struct Client {
    pub stream: TcpStream,
    pub sealer: Arc<Mutex<Sealer>>,
    pub opener: Opener,
}

impl Client {
    /// Handshake and Hello; panics unless Welcome comes.
    pub fn connect(addr: SocketAddr) -> Client {
        match Client::hello(addr) {
            (c, Some(DaemonMsg::Welcome { .. })) => c,
            (_, other) => panic!("no welcome: {other:?}"),
        }
    }

    /// Handshake and Hello; the daemon's answer.
    pub fn hello(addr: SocketAddr) -> (Client, Option<DaemonMsg>) {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        stream.set_nodelay(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let hello = proto::encode(&ClientMsg::Hello { protocol: proto::PROTOCOL }).unwrap();
        let s =
            gossamer_session::connect(&mut stream, &proto::psk(SECRET.as_bytes()), proto::PROLOGUE, deadline, &hello)
                .unwrap();
        let (sealer, opener) = s.split();
        let mut c = Client { stream, sealer: Arc::new(Mutex::new(sealer)), opener };
        let first = c.next(Duration::from_secs(10));
        (c, first)
    }

    /// What a heartbeat thread needs to keep this session alive.
    pub fn beater(&self) -> (TcpStream, Arc<Mutex<Sealer>>) {
        (self.stream.try_clone().unwrap(), self.sealer.clone())
    }

    pub fn send(&mut self, m: &ClientMsg) {
        proto::send(&mut self.stream, &mut self.sealer.lock().unwrap(), m).unwrap();
    }

    /// The next message other than a heartbeat within `timeout`, or `None`.
    pub fn next(&mut self, timeout: Duration) -> Option<DaemonMsg> {
        let deadline = Instant::now() + timeout;
        loop {
            match proto::recv::<DaemonMsg>(&mut self.stream, &mut self.opener, Some(deadline)) {
                Ok(DaemonMsg::Heartbeat) => {}
                Ok(m) => return Some(m),
                Err(_) => return None,
            }
        }
    }

    /// Sends a request and returns the answer (bounded).
    pub fn request(&mut self, m: &ClientMsg) -> DaemonMsg {
        self.send(m);
        self.next(Duration::from_secs(20)).expect("no answer")
    }

    /// Hands every message to `each` until it returns true (then `true`),
    /// while a thread sends heartbeats; `false` after `timeout` or if the
    /// session ends. Reads wait long (the daemon's heartbeats come every
    /// 400 ms), so a deadline never cuts a record in two.
    pub fn pump(&mut self, timeout: Duration, mut each: impl FnMut(DaemonMsg) -> bool) -> bool {
        let stop = Arc::new(AtomicBool::new(false));
        let beat = {
            let (stop, sealer, mut w) = (stop.clone(), self.sealer.clone(), self.stream.try_clone().unwrap());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if proto::send(&mut w, &mut sealer.lock().unwrap(), &ClientMsg::Heartbeat).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(proto::HEARTBEAT_MS));
                }
            })
        };
        let start = Instant::now();
        let mut done = false;
        while !done && start.elapsed() < timeout {
            match self.next(Duration::from_secs(30)) {
                Some(m) => done = each(m),
                None => break,
            }
        }
        stop.store(true, Ordering::Relaxed);
        beat.join().unwrap();
        done
    }
}

/// A Start message for `binary` (hashed here) with these arguments and one rank's variables.
pub fn start_msg(binary: &str, args: &[&str], env: &[(&str, &str)]) -> ClientMsg {
    let sha256 = proto::sha256_file(Path::new(binary)).unwrap_or([0; 32]);
    ClientMsg::Start {
        binary: binary.into(),
        sha256,
        args: args.iter().map(|s| s.to_string()).collect(),
        ranks: vec![proto::RankSpec {
            rank: 0,
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }],
    }
}

/// Reads until EOF or `timeout`: whether the peer closed.
pub fn closed_within(s: &mut TcpStream, timeout: Duration) -> bool {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < timeout {
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// Writes, ignoring errors (the peer may have closed).
pub fn write_quiet(s: &mut TcpStream, b: &[u8]) {
    let _ = s.write_all(b);
}

/// Whether this process is root.
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether a test that needs root (and `tools`) can run: if not, it says
/// SKIPPED and the caller returns — unless `GOSSAMER_REQUIRE_ROOT=1` (set by
/// CI), which makes the skip a failure.
pub fn root_with(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| !std::process::Command::new(t).arg("--version").output().is_ok_and(|o| o.status.success()))
        .collect();
    if root() && missing.is_empty() {
        return true;
    }
    let why = if root() { format!("missing {}", missing.join(", ")) } else { "not root".to_string() };
    let needs = if tools.is_empty() {
        format!("root (here: {why})")
    } else {
        format!("root and {} (apt install util-linux; here: {why})", tools.join(", "))
    };
    skip::skip(&needs, "GOSSAMER_REQUIRE_ROOT");
    false
}
