//! `gossamer daemon`: one per host. It authenticates launchers by a Noise
//! handshake over the shared secret, starts the ranks they ask for (only
//! binaries its `--allow` policy names, with the expected hash), relays
//! their output, reports their exits, and kills them when the launcher is
//! lost.
//!
//! # Staying up
//!
//! The daemon is one event loop (a single-threaded tokio runtime on the
//! main thread) and [`HASH_THREADS`] hashing threads, all created at
//! start: no thread is created per connection or on demand, so a task
//! limit cannot make it fail later. Every resource failure (accept, fork,
//! pipe, descriptor) is logged and refused, and the daemon carries on.
//!
//! * A connection must finish the handshake, its first message included,
//!   within [`proto::HANDSHAKE`]; at most [`PER_PEER`]
//!   unauthenticated connections per peer address and
//!   [`UNAUTHENTICATED`] in all are held (more are closed at once),
//!   and at most [`SESSIONS`] authenticated sessions.
//! * Every message after the handshake is opened by the session: a record
//!   that is forged, replayed, reordered or injected ends the connection,
//!   and the ranks it started are killed.
//!
//! # Memory per connection
//!
//! * **Unauthenticated:** at most the handshake record (1 KiB) and the
//!   first message's record ([`FIRST_RECORD_MAX`]), plus the
//!   Noise state and the task: under 16 KiB, so under 4 MiB for all
//!   [`UNAUTHENTICATED`] of them.
//! * **Authenticated:** coming in, one record buffer (64 KiB) and one
//!   message being assembled and then decoded (at most [`proto::MAX_FRAME`],
//!   twice); going out, the queue ([`OUT_QUEUE`] messages of at most
//!   [`OUT_BUDGET`] bytes together, the one being written included) and,
//!   while a message is written, its encoding and its sealed records (each
//!   about its size): under 6 MiB in all (when only output flows, the queue
//!   holds at most 16 pieces of [`proto::OUTPUT_CHUNK`]); plus, per rank, two
//!   pipe buffers and two pieces waiting for the queue: 128 KiB. A
//!   connection starts at most [`MAX_RANKS`] ranks.
//!
//! The output of a rank, however long its lines, never adds to this: it
//! is relayed in pieces as it arrives, and a slow launcher slows the ranks.

mod handshake;
mod hasher;
mod info;
mod limits;
mod policy;
mod ranks;
mod session;
mod wire;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gossamer_session::Psk;
use tracing::{info, warn};

pub use handshake::FIRST_RECORD_MAX;
pub use hasher::THREADS as HASH_THREADS;
pub use info::host_info;
pub use limits::{PER_PEER, SESSIONS, UNAUTHENTICATED};
pub use policy::{check_binary, Policy};
pub use wire::{OUT_BUDGET, OUT_QUEUE};

use crate::proto::{self, ClientMsg, DaemonMsg};
use crate::CliError;

/// The most ranks one connection may start.
pub const MAX_RANKS: usize = 256;

/// How the daemon is run.
#[derive(Debug, Clone)]
pub struct Options {
    /// `ADDR:PORT` to listen on.
    pub listen: String,
    /// The shared secret.
    pub secret: Vec<u8>,
    /// Binaries and directories of binaries it may start.
    pub allow: Vec<PathBuf>,
    /// Whether it may run as root.
    pub allow_root: bool,
    /// Whether ranks may be given the dynamic loader's variables (`LD_*`).
    pub allow_loader_env: bool,
}

/// What every connection shares.
struct Shared {
    psk: Psk,
    host: String,
    policy: Arc<Policy>,
    hasher: hasher::Hasher,
    limits: Arc<limits::Limits>,
    registry: ranks::Registry,
}

/// Runs the daemon until killed.
pub fn serve(opts: Options) -> Result<(), CliError> {
    policy::refuse_root(opts.allow_root)?;
    let policy = Arc::new(Policy::new(&opts.allow, opts.allow_loader_env)?);
    let addr: SocketAddr = opts
        .listen
        .to_socket_addrs()
        .map_err(CliError::io(format!("cannot resolve {}", opts.listen)))?
        .next()
        .ok_or_else(|| CliError::Usage(format!("--listen {}: no address", opts.listen)))?;
    let std_listener =
        std::net::TcpListener::bind(addr).map_err(CliError::io(format!("cannot listen on {}", opts.listen)))?;
    std_listener.set_nonblocking(true).map_err(CliError::io("listener"))?;
    let local = std_listener.local_addr().map_err(CliError::io("listener address"))?;
    let host = crate::host_name();
    let shared = Arc::new(Shared {
        psk: proto::psk(&opts.secret),
        host: host.clone(),
        hasher: hasher::Hasher::start(policy.clone())?,
        policy: policy.clone(),
        limits: Arc::default(),
        registry: Arc::default(),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::io("starting the daemon's event loop"))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(std_listener).map_err(CliError::io("listener"))?;
        // The policy first: whoever waits for "listening" in the log finds
        // what the daemon will start already there.
        if policy.starts_nothing() {
            warn!(
                "started without --allow: this daemon starts nothing (hosts and --status still work); \
                   give --allow PATH for the binaries or directories it may start"
            );
        } else {
            info!(allowed = %policy.describe(), "binaries allowed");
        }
        info!(%local, %host, version = env!("CARGO_PKG_VERSION"), "gossamer daemon listening");
        tokio::spawn(shared.limits.clone().report());
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => match shared.limits.admit(peer.ip()) {
                    Some(slot) => {
                        tokio::spawn(session::serve(stream, peer, shared.clone(), slot));
                    }
                    None => drop(stream),
                },
                Err(e) => {
                    // E.g. out of descriptors: the connection waits in the
                    // backlog; try again shortly rather than spin.
                    shared.limits.accept_error(&e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}

/// `gossamer daemon --status ADDR`: what the daemon at `addr` runs.
pub fn status(addr: &str, secret: &[u8]) -> Result<String, CliError> {
    let mut conn = crate::client::connect(addr, proto::DEFAULT_PORT, secret)?;
    match crate::client::request(&mut conn, &ClientMsg::Status, Duration::from_secs(5))? {
        DaemonMsg::Running { host, ranks } => {
            let mut s =
                format!("daemon on {host} ({}), version {}: {} rank(s)\n", conn.addr, conn.version, ranks.len());
            if !ranks.is_empty() {
                s += &format!("{:>6} {:>8} {:>8}  {:<22} {}\n", "RANK", "PID", "SECONDS", "LAUNCHER", "BINARY");
            }
            for r in ranks {
                s += &format!("{:>6} {:>8} {:>8}  {:<22} {}\n", r.rank, r.pid, r.seconds, r.launcher, r.binary);
            }
            Ok(s)
        }
        other => Err(CliError::Host { host: addr.into(), msg: format!("unexpected answer {other:?}") }),
    }
}
