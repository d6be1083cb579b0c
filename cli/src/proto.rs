//! The wire protocol between `gossamer run`/`gossamer hosts` (the client)
//! and `gossamer daemon`: an authenticated, encrypted session (see the
//! `gossamer-session` crate: Noise `NNpsk0` with a key derived from the
//! shared secret file), in which each message is one postcard-encoded
//! [`ClientMsg`] or [`DaemonMsg`] of at most [`MAX_FRAME`] bytes.
//!
//! 1. The client opens the handshake; both sides prove the secret without
//!    sending it, within [`HANDSHAKE`], with nothing but two small records
//!    exchanged before the client is authenticated.
//! 2. The client's first message is [`ClientMsg::Hello`] (at most
//!    [`FIRST_MAX`] bytes); the daemon answers [`DaemonMsg::Welcome`], or
//!    [`DaemonMsg::Refused`] for another protocol version, and closes.
//! 3. Every later message is bound to the session: a record that was
//!    altered, replayed, reordered or injected by anyone on the path fails
//!    to open and ends the connection.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gossamer_session::{Opener, Psk, Sealer, SessionError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The largest message either side accepts (bytes of the encoded message).
pub const MAX_FRAME: usize = 1 << 20;
/// The largest first message (the client's [`ClientMsg::Hello`]).
pub const FIRST_MAX: usize = 4096;
/// The protocol's version, checked at `Hello`.
pub const PROTOCOL: u32 = 2;
/// Mixed into the handshake: a peer of another protocol fails to authenticate.
pub const PROLOGUE: &[u8] = b"gossamer daemon/2";
/// The deadline for the whole handshake, the first message included.
pub const HANDSHAKE: Duration = Duration::from_secs(5);
/// The most bytes of a rank's output in one [`DaemonMsg::Output`].
pub const OUTPUT_CHUNK: usize = 32 << 10;
/// The port a daemon listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7117;
/// How often each side sends a heartbeat.
pub const HEARTBEAT_MS: u64 = 400;
/// Silence after which a peer counts as lost.
pub const SILENCE_MS: u64 = 2000;

/// The session key of launchers and daemons sharing `secret`.
pub fn psk(secret: &[u8]) -> Psk {
    Psk::derive(secret, "daemon")
}

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
    /// The session failed: authentication, a forged record, a deadline.
    #[error("{0}")]
    Session(#[from] SessionError),
}

/// Which output stream of a rank bytes came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// The session's first message.
    Hello {
        /// [`PROTOCOL`].
        protocol: u32,
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
    /// The answer to [`ClientMsg::Hello`].
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
    /// Bytes a rank wrote, as they came (at most [`OUTPUT_CHUNK`], cut
    /// anywhere, lines included).
    Output {
        /// The rank.
        rank: u32,
        /// Which stream.
        stream: Stream,
        /// The bytes.
        bytes: Vec<u8>,
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

/// Encodes `msg` as one message body.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtoError> {
    let body = postcard::to_stdvec(msg)?;
    if body.len() > MAX_FRAME {
        return Err(ProtoError::TooLarge(body.len()));
    }
    Ok(body)
}

/// Decodes one message body; trailing bytes are an error.
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

/// Seals `msg` into the session and writes it.
pub fn send<T: Serialize>(s: &mut TcpStream, sealer: &mut Sealer, msg: &T) -> Result<(), ProtoError> {
    Ok(sealer.send(s, &encode(msg)?)?)
}

/// Reads and opens the session's next message, by `deadline` if one is given.
pub fn recv<T: for<'a> Deserialize<'a>>(
    s: &mut TcpStream,
    opener: &mut Opener,
    deadline: Option<Instant>,
) -> Result<T, ProtoError> {
    let body = opener.recv_by(s, MAX_FRAME, deadline)?;
    if deadline.is_some() {
        s.set_read_timeout(None)?;
    }
    decode(&body)
}

/// A fresh random secret for one program's rendezvous (`GOSSAMER_SECRET`): 32
/// bytes from the system's random source, in hexadecimal.
pub fn program_secret() -> String {
    let mut n = [0u8; 32];
    getrandom::getrandom(&mut n).expect("the system's random source failed");
    hex(&n)
}

/// SHA-256 of a file's contents.
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<[u8; 32]> {
    sha256_reader(&mut std::fs::File::open(path)?)
}

/// The SHA-256 of everything `f` reads to its end.
pub fn sha256_reader(f: &mut impl Read) -> std::io::Result<[u8; 32]> {
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
        assert_eq!(decode::<ClientMsg>(&encode(&m).unwrap()).unwrap(), m);
    }

    #[test]
    fn oversized_and_trailing_bodies_are_refused() {
        assert!(matches!(decode::<ClientMsg>(&vec![0; MAX_FRAME + 1]), Err(ProtoError::TooLarge(_))));
        let mut body = encode(&ClientMsg::Heartbeat).unwrap();
        body.push(0);
        assert!(decode::<ClientMsg>(&body).is_err());
    }

    #[test]
    fn program_secrets_are_fresh() {
        let (a, b) = (program_secret(), program_secret());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
