//! The wire protocol between `gossamer run`/`gossamer hosts` (the client)
//! and `gossamer daemon`: length-prefixed frames (a 4-byte big-endian
//! length, then that many bytes of a postcard-encoded message), at most
//! [`MAX_FRAME`] bytes each, and a mutual challenge–response over a shared
//! secret before anything else.
//!
//! Authentication (the secret never crosses the wire):
//!
//! 1. client → daemon: [`ClientMsg::Hello`] with a random client nonce;
//! 2. daemon → client: [`DaemonMsg::Challenge`] with a random daemon nonce
//!    and `HMAC-SHA256(secret, client_nonce || "gossamer/1 daemon")`;
//! 3. the client checks that MAC (the daemon knows the secret) and answers
//!    [`ClientMsg::Proof`] with `HMAC-SHA256(secret, daemon_nonce || "gossamer/1 client")`;
//! 4. the daemon checks it in constant time and answers
//!    [`DaemonMsg::Welcome`], or closes the connection.

use std::io::{Read, Write};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The largest frame either side accepts (bytes of the encoded message).
pub const MAX_FRAME: usize = 1 << 20;
/// The protocol's version, checked at `Hello`.
pub const PROTOCOL: u32 = 1;
/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;
/// Context mixed into the daemon's proof.
pub const DAEMON_CONTEXT: &[u8] = b"gossamer/1 daemon";
/// Context mixed into the client's proof.
pub const CLIENT_CONTEXT: &[u8] = b"gossamer/1 client";
/// The port a daemon listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7117;
/// How often each side sends a heartbeat.
pub const HEARTBEAT_MS: u64 = 400;
/// Silence after which a peer counts as lost.
pub const SILENCE_MS: u64 = 2000;

/// Errors of the protocol layer.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// A frame announced more bytes than allowed.
    #[error("frame of {0} bytes exceeds the limit of {MAX_FRAME}")]
    TooLarge(usize),
    /// The bytes are not a message.
    #[error("malformed message: {0}")]
    Decode(#[from] postcard::Error),
    /// The peer did not prove the shared secret.
    #[error("authentication failed: {0}")]
    Auth(String),
}

/// Which output stream of a rank a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// One rank to start: its number and its environment (added to the daemon's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankSpec {
    /// The rank.
    pub rank: u32,
    /// Variables set for it (`GOSSAMER_RANK`, …).
    pub env: Vec<(String, String)>,
}

/// How a rank ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExitKind {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl ExitKind {
    /// Whether it exited with status 0.
    pub fn success(self) -> bool {
        self == ExitKind::Code(0)
    }

    /// The status a shell would report (128 + signal for a signal).
    pub fn shell_status(self) -> i32 {
        match self {
            ExitKind::Code(c) => c,
            ExitKind::Signal(s) => 128 + s,
        }
    }
}

impl std::fmt::Display for ExitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitKind::Code(c) => write!(f, "exited with status {c}"),
            ExitKind::Signal(s) => write!(f, "killed by signal {s} ({})", signal_name(*s)),
        }
    }
}

/// A signal's usual name.
pub fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// What a client sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientMsg {
    /// Opens the conversation.
    Hello {
        /// [`PROTOCOL`].
        protocol: u32,
        /// The client's nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// The answer to the daemon's challenge.
    Proof {
        /// `HMAC-SHA256(secret, daemon_nonce || CLIENT_CONTEXT)`.
        mac: Vec<u8>,
    },
    /// Asks for a TCP port free on the daemon's host (for the rendezvous).
    FreePort,
    /// Asks whether the binary is there, executable and has this hash;
    /// starts nothing.
    Check {
        /// Absolute path of the binary.
        binary: String,
        /// Its expected SHA-256.
        sha256: [u8; 32],
    },
    /// Starts ranks of a program already on the daemon's host.
    Start {
        /// Absolute path of the binary.
        binary: String,
        /// Its expected SHA-256.
        sha256: [u8; 32],
        /// Its arguments.
        args: Vec<String>,
        /// The ranks to start on this host.
        ranks: Vec<RankSpec>,
    },
    /// Sends a signal to every rank this connection started.
    Signal(i32),
    /// Kills every rank this connection started.
    Kill,
    /// "I am still here."
    Heartbeat,
    /// Asks for the host's resources.
    Query,
    /// Asks what the daemon runs now.
    Status,
}

/// A running rank, as `--status` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningRank {
    /// The launcher's address.
    pub launcher: String,
    /// The rank.
    pub rank: u32,
    /// Its process id.
    pub pid: u32,
    /// Its binary.
    pub binary: String,
    /// Seconds since it started.
    pub seconds: u64,
}

/// A host's resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// The daemon's host name.
    pub host: String,
    /// Online CPU cores.
    pub cores: u32,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// UCX transports seen by `ucx_info -d`, or why none.
    pub transports: Result<Vec<String>, String>,
    /// UCX devices seen by `ucx_info -d`.
    pub devices: Vec<String>,
    /// The daemon's version.
    pub version: String,
}

/// What the daemon sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DaemonMsg {
    /// The daemon's nonce and its proof of the secret.
    Challenge {
        /// The daemon's nonce.
        nonce: [u8; NONCE_LEN],
        /// `HMAC-SHA256(secret, client_nonce || DAEMON_CONTEXT)`.
        mac: Vec<u8>,
    },
    /// Authenticated.
    Welcome {
        /// The daemon's host name.
        host: String,
        /// The daemon's version.
        version: String,
    },
    /// A free port on the daemon's host, and the address the client reached.
    Port {
        /// The port.
        port: u16,
        /// The daemon's address on this connection.
        addr: String,
    },
    /// The binary of a [`ClientMsg::Check`] is as expected.
    Checked,
    /// Every rank asked for runs.
    Started {
        /// (rank, pid) pairs.
        pids: Vec<(u32, u32)>,
    },
    /// The daemon refused a request; nothing was started.
    Refused {
        /// The daemon's host.
        host: String,
        /// What is wrong.
        reason: String,
    },
    /// A line a rank wrote (without its newline).
    Output {
        /// The rank.
        rank: u32,
        /// Which stream.
        stream: Stream,
        /// The bytes of the line.
        line: Vec<u8>,
    },
    /// A rank ended.
    Exited {
        /// The rank.
        rank: u32,
        /// How.
        how: ExitKind,
    },
    /// "I am still here."
    Heartbeat,
    /// The answer to [`ClientMsg::Query`].
    Info(HostInfo),
    /// The answer to [`ClientMsg::Status`].
    Running {
        /// The daemon's host.
        host: String,
        /// Ranks it runs.
        ranks: Vec<RunningRank>,
    },
}

/// Encodes `msg` as one frame.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtoError> {
    let body = postcard::to_stdvec(msg)?;
    if body.len() > MAX_FRAME {
        return Err(ProtoError::TooLarge(body.len()));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Decodes one message body (the bytes after the length).
pub fn decode<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ProtoError> {
    if body.len() > MAX_FRAME {
        return Err(ProtoError::TooLarge(body.len()));
    }
    let (msg, rest) = postcard::take_from_bytes(body)?;
    if !rest.is_empty() {
        return Err(ProtoError::Decode(postcard::Error::DeserializeBadEncoding));
    }
    Ok(msg)
}

/// Decodes a whole frame (length prefix included) held in memory.
pub fn decode_frame<T: for<'a> Deserialize<'a>>(frame: &[u8]) -> Result<T, ProtoError> {
    let mut r = frame;
    let msg = read_msg(&mut r)?;
    if !r.is_empty() {
        return Err(ProtoError::Decode(postcard::Error::DeserializeBadEncoding));
    }
    Ok(msg)
}

/// Writes one message as a frame.
pub fn write_msg<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), ProtoError> {
    w.write_all(&encode(msg)?)?;
    w.flush()?;
    Ok(())
}

/// Reads one frame and decodes it; never allocates more than [`MAX_FRAME`].
pub fn read_msg<T: for<'a> Deserialize<'a>>(r: &mut impl Read) -> Result<T, ProtoError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(ProtoError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    decode(&body)
}

/// A fresh random nonce.
pub fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut n).expect("the system's random source failed");
    n
}

fn mac_of(secret: &[u8], nonce: &[u8], context: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes keys of any length");
    m.update(nonce);
    m.update(context);
    m
}

/// `HMAC-SHA256(secret, nonce || context)`.
pub fn prove(secret: &[u8], nonce: &[u8], context: &[u8]) -> Vec<u8> {
    mac_of(secret, nonce, context).finalize().into_bytes().to_vec()
}

/// Checks `mac` against `HMAC-SHA256(secret, nonce || context)` in constant time.
pub fn verify(secret: &[u8], nonce: &[u8], context: &[u8], mac: &[u8]) -> bool {
    mac_of(secret, nonce, context).verify_slice(mac).is_ok()
}

/// SHA-256 of a file's contents.
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<[u8; 32]> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().into())
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let m = ClientMsg::Start {
            binary: "/bin/true".into(),
            sha256: [7; 32],
            args: vec!["a".into()],
            ranks: vec![RankSpec { rank: 3, env: vec![("A".into(), "B".into())] }],
        };
        assert_eq!(decode_frame::<ClientMsg>(&encode(&m).unwrap()).unwrap(), m);
    }

    #[test]
    fn oversized_frame_is_refused_before_allocating() {
        let mut frame = (u32::MAX).to_be_bytes().to_vec();
        frame.extend_from_slice(&[0; 8]);
        assert!(matches!(decode_frame::<ClientMsg>(&frame), Err(ProtoError::TooLarge(_))));
    }

    #[test]
    fn macs_are_bound_to_secret_nonce_and_context() {
        let n = nonce();
        let m = prove(b"secret", &n, CLIENT_CONTEXT);
        assert!(verify(b"secret", &n, CLIENT_CONTEXT, &m));
        assert!(!verify(b"secreT", &n, CLIENT_CONTEXT, &m));
        assert!(!verify(b"secret", &n, DAEMON_CONTEXT, &m));
        assert!(!verify(b"secret", &nonce(), CLIENT_CONTEXT, &m));
        assert!(!verify(b"secret", &n, CLIENT_CONTEXT, &m[..31]));
    }
}
