//! The control channel between the processes of a program: serialized
//! messages over an authenticated session (see `rack::gate`) on a Unix or
//! TCP stream, with rank 0 listening. Used only to start up, to shut down
//! and to notice a process's death.
//!
//! Every message is sealed by the session: a peer that does not know the
//! program's secret can neither read nor forge, replay or reorder one, and
//! no message is decoded before its record has been authenticated.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use gossamer_session::{Opener, Sealer, Session, SessionError};
use serde::{Deserialize, Serialize};

use super::stream::Stream;
use crate::fabric::hosts::PeerInfo;

/// How often both ends of a control connection say they are alive, at
/// most: with a window shorter than five heartbeats, the heartbeat is a
/// fifth of the window (see [`heartbeat`]).
pub(crate) const HEARTBEAT: Duration = Duration::from_millis(200);

/// The heartbeat window by default: 1.5 s. It is the time a peer may stay
/// silent before the program stops, and it bounds both ways what a bad
/// network does to a program (see the `rack` module's documentation): a
/// host whose link goes down is noticed in at most this long, and an
/// interruption is survived while the silence it causes stays under it.
/// With TCP's retransmission timeout of at least 200 ms, doubling on each
/// loss in a row, a link down for 300 ms costs about 0.8 s of silence.
pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_millis(1500);

/// The shortest window accepted: below it, a busy machine's scheduling
/// alone would stop programs.
pub(crate) const MIN_WINDOW: Duration = Duration::from_millis(100);

/// The environment variable that sets the heartbeat window, in milliseconds.
pub(crate) const WINDOW_VAR: &str = "GOSSAMER_SILENCE_MS";

/// How long a silent peer is given before the program stops (the heartbeat
/// window): [`DEFAULT_WINDOW`], or `GOSSAMER_SILENCE_MS` (raise it where
/// processes may be starved for longer, e.g. beside heavy builds on few
/// cores, or where the network may be cut for longer without the program
/// giving up; lower it to notice a lost host sooner). Values below
/// [`MIN_WINDOW`] are raised to it; one that is not a number is ignored with
/// a warning. Rank 0 and the others each read their own environment.
pub(crate) fn silence() -> Duration {
    static S: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *S.get_or_init(|| window_from(std::env::var(WINDOW_VAR).ok().as_deref()))
}

/// The window that the value of `GOSSAMER_SILENCE_MS` asks for.
fn window_from(value: Option<&str>) -> Duration {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else { return DEFAULT_WINDOW };
    match v.parse::<u64>() {
        Ok(ms) => Duration::from_millis(ms).max(MIN_WINDOW),
        Err(_) => {
            tracing::warn!(
                "{WINDOW_VAR}={v:?} is not a number of milliseconds; using the default heartbeat window of {:?}",
                DEFAULT_WINDOW
            );
            DEFAULT_WINDOW
        }
    }
}

/// How often each end sends a heartbeat: [`HEARTBEAT`], or a fifth of a
/// shorter window, so that several heartbeats fit in any window.
pub(crate) fn heartbeat() -> Duration {
    HEARTBEAT.min(silence() / 5)
}

/// Largest control message accepted (from an authenticated peer).
const MAX_MESSAGE: usize = 1 << 20;

/// One control connection: a stream and the session that seals what goes
/// over it.
pub(crate) struct Conn {
    stream: Stream,
    sealer: Sealer,
    opener: Opener,
}

impl Conn {
    /// A connection whose peer has been authenticated by `session`.
    pub(crate) fn new(stream: Stream, session: Session) -> Conn {
        let (sealer, opener) = session.split();
        Conn { stream, sealer, opener }
    }

    /// Who is at the other end, for the log.
    pub(crate) fn peer(&self) -> String {
        self.stream.peer()
    }

    /// After our last message: ends the connection once the peer has
    /// read it and closed its end (at most `wait`), never by a reset (see
    /// `Stream::close_after_peer`).
    pub(crate) fn close_after_peer(self, wait: Duration) {
        self.stream.close_after_peer(wait);
    }

    /// The peer has closed its end and we have read all it sent: close
    /// ours now, for a peer that waits for it (see `close_after_peer`).
    pub(crate) fn shut(&self) {
        self.stream.shut();
    }

    /// Where the other end is, in the words that name a lost rank: `", "`
    /// and its address and port over TCP, nothing over a Unix socket (the
    /// host's name says it all).
    pub(crate) fn whereabouts(&self) -> String {
        match &self.stream {
            Stream::Tcp(_) => format!(", {}", self.stream.peer()),
            Stream::Unix(_) => String::new(),
        }
    }
}

impl AsRawFd for Conn {
    fn as_raw_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }
}

/// A session's error as the I/O error that the callers report.
pub(crate) fn io_error(e: SessionError) -> io::Error {
    match e {
        SessionError::Io(e) => e,
        SessionError::Closed => io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection"),
        SessionError::Deadline(what) => io::Error::new(io::ErrorKind::TimedOut, format!("timed out {what}")),
        e => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    }
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) enum Msg {
    /// A process introduces itself to rank 0, with the name of its host.
    Hello { rank: u32, size: u32, pid: u32, exe_hash: u64, threads: u32, host: String },
    /// Rank 0 refuses the program (mismatched binaries, bad sizes).
    Refuse { reason: String },
    /// Rank 0 describes the program: the host's shared region (to create,
    /// for the first process of a host), the thread ranges of the ranks and
    /// hosts, and the program key that authenticates trusts in transit.
    Welcome {
        shm_name: String,
        bulk_bytes: u64,
        ranks: Vec<(u32, u32)>,
        hosts: Vec<(u32, u32)>,
        host_names: Vec<String>,
        host_of_rank: Vec<u32>,
        create: bool,
        key: [u64; 2],
    },
    /// A process has mapped its host's region.
    Mapped,
    /// Between hosts: where to put into this process's region.
    FabricInfo(PeerInfo),
    /// Between hosts: every rank's `FabricInfo`, by rank.
    Peers(Vec<PeerInfo>),
    /// A process has started its workers.
    Ready,
    /// Rank 0 is stopping the program: report your threads' state (to a
    /// process on another host, whose region rank 0 cannot read).
    Probe(u64),
    /// The answer to a probe: (thread, quiet, epoch) for each local thread.
    Status { probe: u64, threads: Vec<(u32, u32, u64)> },
    /// Rank 0 has stopped the program: leave (to another host).
    Stop,
    /// Still here: sent both ways every `heartbeat()`; a peer silent for
    /// `silence()` is taken for dead (hung, or its host unreachable).
    Heartbeat,
    /// A process has stopped its workers and is about to exit cleanly.
    Bye,
    /// Rank 0 to the ranks still connected: rank `rank`, on host `host` (at
    /// `address`, as `Conn::whereabouts` of rank 0's connection to it says),
    /// failed with `cause`, and the program stops. Each rank names it as it
    /// exits.
    Failed { rank: u32, host: String, address: String, cause: String },
}

pub(crate) fn send(c: &mut Conn, m: &Msg) -> io::Result<()> {
    let body = postcard::to_stdvec(m).map_err(io::Error::other)?;
    c.sealer.send(&mut c.stream, &body).map_err(io_error)
}

pub(crate) fn recv(c: &mut Conn) -> io::Result<Msg> {
    let body = c.opener.recv(&mut c.stream, MAX_MESSAGE).map_err(io_error)?;
    decode(&body)
}

/// Decodes one message body (a separate function so it can be fuzzed).
pub(crate) fn decode(body: &[u8]) -> io::Result<Msg> {
    postcard::from_bytes(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

pub(crate) fn recv_timeout(c: &mut Conn, t: Duration) -> io::Result<Msg> {
    let r = c.opener.recv_by(&mut c.stream, MAX_MESSAGE, Some(Instant::now() + t)).map_err(io_error);
    c.stream.set_read_timeout(None)?;
    decode(&r?)
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// Two ends of an authenticated control connection.
    pub(crate) fn pair() -> (Conn, Conn) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (mut a, mut b) = (Stream::Unix(a), Stream::Unix(b));
        let psk = gossamer_session::Psk::derive(b"test", "control");
        let deadline = Instant::now() + Duration::from_secs(5);
        let p = psk.clone();
        let h = std::thread::spawn(move || {
            let s = gossamer_session::connect(&mut a, &p, b"t", deadline, b"first").unwrap();
            (a, s)
        });
        let (sb, first) = gossamer_session::accept(&mut b, &psk, b"t", deadline, 16).unwrap();
        assert_eq!(first, b"first");
        let (a, sa) = h.join().unwrap();
        (Conn::new(a, sa), Conn::new(b, sb))
    }

    #[test]
    fn messages_round_trip_and_garbage_is_an_error() {
        let (mut a, mut b) = pair();
        let m = Msg::Welcome {
            shm_name: "/x".into(),
            bulk_bytes: 4096,
            ranks: vec![(0, 2), (2, 4)],
            hosts: vec![(0, 4)],
            host_names: vec!["a".into()],
            host_of_rank: vec![0, 0],
            create: false,
            key: [1, 2],
        };
        send(&mut a, &m).unwrap();
        assert_eq!(recv(&mut b).unwrap(), m);
        for garbage in [&[0xffu8, 0xff, 0xff][..], &[0x7f], &[]] {
            assert!(decode(garbage).is_err());
        }
        // Bytes that the session did not seal end the connection.
        use std::io::Write;
        a.stream.write_all(&[0, 20]).unwrap();
        a.stream.write_all(&[7; 20]).unwrap();
        assert!(recv(&mut b).is_err());
    }

    #[test]
    fn the_heartbeat_window_is_the_default_unless_set_and_never_tiny() {
        assert_eq!(window_from(None), DEFAULT_WINDOW);
        assert_eq!(window_from(Some("")), DEFAULT_WINDOW);
        assert_eq!(window_from(Some("2500")), Duration::from_millis(2500));
        assert_eq!(window_from(Some("3")), MIN_WINDOW);
        assert_eq!(window_from(Some("soon")), DEFAULT_WINDOW);
        // The defaults meet both promises of the module documentation: a
        // lost host noticed within 2 s, and several heartbeats per window.
        assert!(DEFAULT_WINDOW + HEARTBEAT / 4 < Duration::from_secs(2));
        assert!(DEFAULT_WINDOW >= 5 * HEARTBEAT);
    }

    proptest::proptest! {
        /// Whatever bytes arrive, decoding returns a message or an error.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(body in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = decode(&body);
        }

        /// Every message survives encoding and decoding.
        #[test]
        fn messages_round_trip(rank in 0u32..64, hash in proptest::num::u64::ANY, name in "[a-z/0-9-]{0,40}") {
            for m in [
                Msg::Hello { rank, size: rank + 1, pid: 7, exe_hash: hash, threads: 2, host: name.clone() },
                Msg::Refuse { reason: name.clone() },
                Msg::Welcome {
                    shm_name: name.clone(),
                    bulk_bytes: hash,
                    ranks: vec![(0, rank), (rank, rank + 1)],
                    hosts: vec![(0, rank + 1)],
                    host_names: vec![name.clone()],
                    host_of_rank: vec![0, 0],
                    create: rank % 2 == 0,
                    key: [hash, 7],
                },
                Msg::Mapped,
                Msg::FabricInfo(PeerInfo { base: hash, len: 9, rkey: name.as_bytes().to_vec(), address: vec![rank as u8; 3] }),
                Msg::Peers(vec![PeerInfo { base: 1, len: 2, rkey: vec![2], address: vec![3] }; rank as usize % 4]),
                Msg::Ready,
                Msg::Probe(hash),
                Msg::Status { probe: hash, threads: vec![(rank, 1, hash)] },
                Msg::Stop,
                Msg::Heartbeat,
                Msg::Bye,
                Msg::Failed { rank, host: name.clone(), address: name.clone(), cause: name.clone() },
            ] {
                let body = postcard::to_stdvec(&m).unwrap();
                proptest::prop_assert_eq!(decode(&body).unwrap(), m);
            }
        }
    }
}
