//! The client side of a daemon connection: connect, authenticate, and
//! exchange messages over the session.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use gossamer_session::{Opener, Sealer, SessionError};

use crate::proto::{self, ClientMsg, DaemonMsg, ProtoError};
use crate::CliError;

/// How long reaching a daemon may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An authenticated connection to a daemon.
pub struct Conn {
    /// The host as the user gave it.
    pub host: String,
    /// The address reached.
    pub addr: SocketAddr,
    /// The daemon's own name for its host.
    pub daemon_host: String,
    /// The daemon's version.
    pub version: String,
    /// Sends to the daemon.
    pub tx: Sender,
    /// Receives from the daemon.
    pub rx: Receiver,
}

/// The sending half of a connection.
pub struct Sender {
    stream: TcpStream,
    sealer: Sealer,
}

/// The receiving half of a connection.
pub struct Receiver {
    stream: TcpStream,
    opener: Opener,
}

impl Sender {
    /// Sends one message.
    pub fn send(&mut self, msg: &ClientMsg) -> Result<(), ProtoError> {
        proto::send(&mut self.stream, &mut self.sealer, msg)
    }

    /// Closes the connection both ways (the receiving half sees its end).
    pub fn shutdown(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

impl Receiver {
    /// The next message, waiting as long as it takes.
    pub fn recv(&mut self) -> Result<DaemonMsg, ProtoError> {
        proto::recv(&mut self.stream, &mut self.opener, None)
    }

    /// The next message other than a heartbeat, within `timeout`.
    pub fn answer(&mut self, timeout: Duration) -> Result<DaemonMsg, ProtoError> {
        let deadline = Instant::now() + timeout;
        loop {
            match proto::recv(&mut self.stream, &mut self.opener, Some(deadline))? {
                DaemonMsg::Heartbeat => continue,
                m => return Ok(m),
            }
        }
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("host", &self.host)
            .field("addr", &self.addr)
            .field("daemon_host", &self.daemon_host)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Splits `host[:port]` (or `[v6]:port`) into name and port.
pub fn split_host(spec: &str, default_port: u16) -> (String, u16) {
    if let Ok(a) = spec.parse::<SocketAddr>() {
        return (a.ip().to_string(), a.port());
    }
    if let Some((h, p)) = spec.rsplit_once(':') {
        if !h.contains(':') {
            if let Ok(p) = p.parse() {
                return (h.trim_matches(['[', ']']).to_string(), p);
            }
        }
    }
    (spec.trim_matches(['[', ']']).to_string(), default_port)
}

/// Connects to the daemon of `spec` (`host[:port]`), runs the handshake and
/// says hello.
pub fn connect(spec: &str, default_port: u16, secret: &[u8]) -> Result<Conn, CliError> {
    let herr = |msg: String| CliError::Host { host: spec.to_string(), msg };
    let (name, port) = split_host(spec, default_port);
    let addrs: Vec<SocketAddr> =
        (name.as_str(), port).to_socket_addrs().map_err(|e| herr(format!("cannot resolve {name}: {e}")))?.collect();
    let mut last = None;
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => {
                stream = Some((s, *a));
                break;
            }
            Err(e) => last = Some(unreachable(*a, &e)),
        }
    }
    let (mut s, addr) = stream.ok_or_else(|| herr(last.unwrap_or_else(|| format!("{name} has no address"))))?;
    let _ = s.set_nodelay(true);
    let deadline = Instant::now() + proto::HANDSHAKE;
    let hello = proto::encode(&ClientMsg::Hello { protocol: proto::PROTOCOL }).map_err(|e| herr(e.to_string()))?;
    let session = gossamer_session::connect(&mut s, &proto::psk(secret), proto::PROLOGUE, deadline, &hello).map_err(
        |e| match e {
            SessionError::Authentication => herr(format!(
                "authentication failed: the daemon at {addr} does not know our secret (different secret files? \
                 use the same file everywhere), or runs another version of gossamer, or the service there is \
                 not a gossamer daemon at all and hung up (check the host and port)"
            )),
            e => herr(not_a_daemon(addr, &e).unwrap_or_else(|| format!("talking to the daemon at {addr}: {e}"))),
        },
    )?;
    let (sealer, opener) = session.split();
    let clone = s.try_clone().map_err(|e| herr(format!("connection: {e}")))?;
    let (tx, mut rx) = (Sender { stream: clone, sealer }, Receiver { stream: s, opener });
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    match rx.answer(left) {
        Ok(DaemonMsg::Welcome { host, version }) => {
            Ok(Conn { host: spec.to_string(), addr, daemon_host: host, version, tx, rx })
        }
        Ok(DaemonMsg::Refused { host, reason }) => Err(herr(format!("daemon on {host} refused: {reason}"))),
        Ok(other) => Err(herr(format!("unexpected answer from {addr}: {other:?}"))),
        Err(e) => Err(herr(format!("no welcome from the daemon at {addr}: {e}"))),
    }
}

/// What to say when no connection to `addr` could be made.
fn unreachable(addr: SocketAddr, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        format!(
            "no gossamer daemon is listening at {addr} (connection refused). Start one on that host \
             (`gossamer daemon --listen {addr} --secret-file FILE --allow PROGRAM`; see cli/README.md), \
             or name the hosts whose daemons to use with `--hosts a,b` (and `--daemon-port` if they do \
             not listen on {default})",
            default = proto::DEFAULT_PORT
        )
    } else {
        format!("cannot reach the daemon at {addr}: {e}")
    }
}

/// When the handshake's first answer shows that `addr` is some other
/// service, says so. The session's records start with a two-byte length: a
/// peer that answers in another protocol has its first two bytes read as
/// that length, which is too large for a handshake record; those two bytes
/// are recovered from it and named when a well-known protocol begins so.
fn not_a_daemon(addr: SocketAddr, e: &SessionError) -> Option<String> {
    let SessionError::TooLarge { len, .. } = e else { return None };
    let first = u16::try_from(*len).ok()?.to_be_bytes();
    let what = match &first {
        b"HT" => "an HTTP server".to_string(),
        b"SS" => "an SSH server".to_string(),
        b"* " | b"+O" | b"-E" => "an IMAP, POP3 or Redis server".to_string(),
        _ if first.iter().all(|b| b.is_ascii_graphic() || *b == b' ') => {
            format!("a text protocol starting {:?}", String::from_utf8_lossy(&first))
        }
        _ => format!("a service whose answer announced a record of {len} bytes"),
    };
    Some(format!(
        "the service at {addr} is not a gossamer daemon (it answered like {what}). Check the host and port: \
         daemons listen on {} unless `--listen` says otherwise; pass the port in `--hosts name:port` \
         or `--daemon-port`",
        proto::DEFAULT_PORT
    ))
}

/// Sends one request and waits (bounded) for its answer, skipping heartbeats.
pub fn request(conn: &mut Conn, msg: &ClientMsg, timeout: Duration) -> Result<DaemonMsg, CliError> {
    conn.tx.send(msg).map_err(|e| CliError::Host { host: conn.host.clone(), msg: e.to_string() })?;
    answer(conn, timeout)
}

/// Waits (bounded) for the daemon's next message other than a heartbeat.
pub fn answer(conn: &mut Conn, timeout: Duration) -> Result<DaemonMsg, CliError> {
    conn.rx
        .answer(timeout)
        .map_err(|e| CliError::Host { host: conn.host.clone(), msg: format!("no answer from the daemon: {e}") })
}
