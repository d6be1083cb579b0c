//! Test harness: start `gossamer-kv` (and stock memcached, where installed)
//! on an ephemeral loopback port, and talk to them over raw sockets.
//! Every wait is bounded, and processes are killed when dropped.

#![allow(dead_code)]

pub mod program;
pub mod skip;
// The workspace's one skip helper (the library's tests own it), which
// `skip` re-exports beside what only these tests need.
#[path = "../../../gossamer/tests/common/skip.rs"]
mod shared_skip;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Longest wait for any single reply.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Makes the child die with the test process, even if that is killed.
fn die_with_parent(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        })
    }
}

/// Whether the server behind `c` is the process `pid` (by its `stats`).
fn served_by(mut c: TcpStream, pid: u32) -> bool {
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    if c.write_all(b"stats\r\n").is_err() {
        return false;
    }
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !text.ends_with(b"END\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&text).lines().any(|l| l.trim() == format!("STAT pid {pid}"))
}

/// A server process, killed on drop.
pub struct Proc {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Starts `gossamer-kv` with `args` on an ephemeral loopback port.
    pub fn kv(args: &[&str]) -> Proc {
        let mut child = die_with_parent(&mut Command::new(env!("CARGO_BIN_EXE_gossamer-kv")))
            .args(["-p", "0", "-l", "127.0.0.1"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start gossamer-kv");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep draining so the server never blocks on stdout.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(TIMEOUT) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                panic!("gossamer-kv did not report its address within {TIMEOUT:?}");
            }
        };
        let addr = line
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Proc { child, addr }
    }

    /// Starts stock memcached on a free loopback port, or `None` if it is
    /// not installed.
    pub fn memcached(args: &[&str]) -> Option<Proc> {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
            let mut cmd = Command::new("memcached");
            die_with_parent(&mut cmd);
            cmd.args(["-l", "127.0.0.1", "-U", "0", "-p", &port.to_string()]).args(args);
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                cmd.args(["-u", "root"]);
            }
            let child = match cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn() {
                Ok(c) => c,
                Err(e) if e.kind() == ErrorKind::NotFound => return None,
                Err(e) => panic!("cannot start memcached: {e}"),
            };
            let mut p = Proc { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if let Ok(c) = TcpStream::connect(p.addr) {
                    // The port was free when probed, but another test's
                    // server may have taken it since: make sure the one
                    // answering is this memcached, else try another port.
                    if served_by(c, p.child.id()) {
                        return Some(p);
                    }
                    break;
                }
                if let Ok(Some(_)) = p.child.try_wait() {
                    break;
                }
                thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("memcached is installed but did not start");
    }

    /// A raw connection.
    pub fn raw(&self) -> Raw {
        Raw::connect(self.addr)
    }

    /// URL for the `memcache` client crate.
    pub fn url(&self, ascii: bool) -> String {
        let proto = if ascii { "&protocol=ascii" } else { "" };
        format!("memcache://{}?timeout=10{proto}", self.addr)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// A raw client socket with bounded waits.
pub struct Raw {
    /// The socket.
    pub stream: TcpStream,
}

impl Raw {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect_timeout(&addr, TIMEOUT).expect("connect");
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Raw { stream }
    }

    /// Sends bytes.
    pub fn send(&mut self, b: &[u8]) {
        self.stream.write_all(b).expect("send");
    }

    /// Reads exactly `n` bytes (panics on timeout or close).
    pub fn recv_exact(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.stream.read_exact(&mut v).unwrap_or_else(|e| panic!("reading {n} bytes: {e}"));
        v
    }

    /// Sends `req` and checks that exactly `want` comes back.
    pub fn check(&mut self, req: &[u8], want: &[u8]) {
        self.send(req);
        let got = self.recv_exact(want.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "reply to {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// Reads until `end` has been received; returns everything read.
    pub fn recv_until(&mut self, end: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        let mut b = [0u8; 4096];
        while !v.ends_with(end) {
            match self.stream.read(&mut b) {
                Ok(0) => {
                    panic!("closed before {:?}; got {:?}", String::from_utf8_lossy(end), String::from_utf8_lossy(&v))
                }
                Ok(n) => v.extend_from_slice(&b[..n]),
                Err(e) => {
                    panic!("waiting for {:?}: {e}; got {:?}", String::from_utf8_lossy(end), String::from_utf8_lossy(&v))
                }
            }
        }
        v
    }

    /// Reads whatever arrives until the connection is quiet for `quiet`.
    pub fn recv_quiet(&mut self, quiet: Duration) -> (Vec<u8>, bool) {
        self.stream.set_read_timeout(Some(quiet)).unwrap();
        let mut v = Vec::new();
        let mut b = [0u8; 65536];
        let start = Instant::now();
        let closed = loop {
            match self.stream.read(&mut b) {
                Ok(0) => break true,
                Ok(n) => v.extend_from_slice(&b[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break false,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break true,
                Err(e) => panic!("read: {e}"),
            }
            assert!(start.elapsed() < TIMEOUT, "connection never went quiet");
        };
        self.stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        (v, closed)
    }

    /// Checks that the server closes the connection (within the timeout).
    pub fn expect_closed(&mut self) {
        let mut b = [0u8; 4096];
        let start = Instant::now();
        loop {
            match self.stream.read(&mut b) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return,
                Err(e) => panic!("expected the server to close the connection: {e}"),
            }
            assert!(start.elapsed() < TIMEOUT, "connection not closed");
        }
    }
}

/// A binary-protocol request.
pub fn bin_req(op: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
    let mut v = vec![0x80, op];
    v.extend_from_slice(&(key.len() as u16).to_be_bytes());
    v.push(extras.len() as u8);
    v.push(0);
    v.extend_from_slice(&0u16.to_be_bytes());
    v.extend_from_slice(&((key.len() + extras.len() + value.len()) as u32).to_be_bytes());
    v.extend_from_slice(&opaque.to_be_bytes());
    v.extend_from_slice(&cas.to_be_bytes());
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

/// One decoded binary response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinResp {
    /// Opcode.
    pub opcode: u8,
    /// Status.
    pub status: u16,
    /// Opaque.
    pub opaque: u32,
    /// CAS.
    pub cas: u64,
    /// Extras.
    pub extras: Vec<u8>,
    /// Key.
    pub key: Vec<u8>,
    /// Value.
    pub value: Vec<u8>,
}

impl Raw {
    /// Reads one binary response.
    pub fn recv_bin(&mut self) -> BinResp {
        let h = self.recv_exact(24);
        assert_eq!(h[0], 0x81, "response magic");
        let keylen = u16::from_be_bytes([h[2], h[3]]) as usize;
        let extlen = h[4] as usize;
        let bodylen = u32::from_be_bytes(h[8..12].try_into().unwrap()) as usize;
        let body = self.recv_exact(bodylen);
        BinResp {
            opcode: h[1],
            status: u16::from_be_bytes([h[6], h[7]]),
            opaque: u32::from_be_bytes(h[12..16].try_into().unwrap()),
            cas: u64::from_be_bytes(h[16..24].try_into().unwrap()),
            extras: body[..extlen].to_vec(),
            key: body[extlen..extlen + keylen].to_vec(),
            value: body[extlen + keylen..].to_vec(),
        }
    }
}

/// A small deterministic generator (xorshift), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    /// One of `from`.
    pub fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// A random text-protocol stream: 1 to 5 lines of 1 to 7 of `words`, each
/// ended by one of `endings` and sometimes followed by a data line; then a
/// tail of empty lines that completes any pending data block.
pub fn random_text_stream(rng: &mut Rng, words: &[&str], endings: &[&str]) -> String {
    let mut stream = String::new();
    for _ in 0..1 + rng.below(5) {
        let n = 1 + rng.below(7);
        for w in 0..n {
            if w > 0 {
                stream.push(' ');
            }
            stream.push_str(rng.pick(words));
        }
        stream.push_str(if endings.len() == 1 { endings[0] } else { rng.pick(endings) });
        if rng.below(3) == 0 {
            stream.push_str(["abc", "12", "x", "", "hello world"][rng.below(5)]);
            stream.push_str("\r\n");
        }
    }
    stream.push_str(&"\r\n".repeat(60));
    stream
}
