//! The client side of a daemon connection: connect and authenticate.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::proto::{self, ClientMsg, DaemonMsg};
use crate::CliError;

/// How long connecting and authenticating may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An authenticated connection to a daemon.
#[derive(Debug)]
pub struct Conn {
    /// The host as the user gave it.
    pub host: String,
    /// The address reached.
    pub addr: SocketAddr,
    /// The daemon's own name for its host.
    pub daemon_host: String,
    /// The daemon's version.
    pub version: String,
    /// The connection.
    pub stream: TcpStream,
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

/// Connects to the daemon of `spec` (`host[:port]`) and runs the mutual
/// challenge–response.
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
            Err(e) => last = Some(format!("cannot reach the daemon at {a}: {e}")),
        }
    }
    let (mut s, addr) = stream.ok_or_else(|| herr(last.unwrap_or_else(|| format!("{name} has no address"))))?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(CONNECT_TIMEOUT)).map_err(|e| herr(e.to_string()))?;
    let perr = |e: proto::ProtoError| herr(format!("talking to the daemon at {addr}: {e}"));
    let mine = proto::nonce();
    proto::write_msg(&mut s, &ClientMsg::Hello { protocol: proto::PROTOCOL, nonce: mine }).map_err(perr)?;
    let theirs = match proto::read_msg::<DaemonMsg>(&mut s).map_err(perr)? {
        DaemonMsg::Challenge { nonce, mac } => {
            if !proto::verify(secret, &mine, proto::DAEMON_CONTEXT, &mac) {
                return Err(herr(format!(
                    "authentication failed: the daemon at {addr} does not know our secret (different secret files?)"
                )));
            }
            nonce
        }
        DaemonMsg::Refused { host, reason } => return Err(herr(format!("daemon on {host} refused: {reason}"))),
        other => return Err(herr(format!("unexpected answer from {addr}: {other:?}"))),
    };
    let mac = proto::prove(secret, &theirs, proto::CLIENT_CONTEXT);
    proto::write_msg(&mut s, &ClientMsg::Proof { mac }).map_err(perr)?;
    match proto::read_msg::<DaemonMsg>(&mut s) {
        Ok(DaemonMsg::Welcome { host, version }) => {
            s.set_read_timeout(None).map_err(|e| herr(e.to_string()))?;
            Ok(Conn { host: spec.to_string(), addr, daemon_host: host, version, stream: s })
        }
        Ok(other) => Err(herr(format!("unexpected answer from {addr}: {other:?}"))),
        Err(e) => Err(herr(format!(
            "authentication failed: the daemon at {addr} closed the connection ({e}); is the secret the same?"
        ))),
    }
}

/// Sends one request and waits (bounded) for its answer, skipping heartbeats.
pub fn request(conn: &mut Conn, msg: &ClientMsg, timeout: Duration) -> Result<DaemonMsg, CliError> {
    proto::write_msg(&mut conn.stream, msg)
        .map_err(|e| CliError::Host { host: conn.host.clone(), msg: e.to_string() })?;
    answer(conn, timeout)
}

/// Waits (bounded) for the daemon's next message other than a heartbeat.
pub fn answer(conn: &mut Conn, timeout: Duration) -> Result<DaemonMsg, CliError> {
    let herr = |msg: String| CliError::Host { host: conn.host.clone(), msg };
    conn.stream.set_read_timeout(Some(timeout)).map_err(|e| herr(e.to_string()))?;
    loop {
        match proto::read_msg::<DaemonMsg>(&mut conn.stream) {
            Ok(DaemonMsg::Heartbeat) => continue,
            Ok(m) => {
                let _ = conn.stream.set_read_timeout(None);
                return Ok(m);
            }
            Err(e) => return Err(herr(format!("no answer from the daemon: {e}"))),
        }
    }
}
