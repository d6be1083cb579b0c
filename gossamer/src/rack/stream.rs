//! The control connections of a program, over a Unix socket (processes of
//! one host) or TCP (a rendezvous that other hosts can reach). Rank 0
//! listens at the rendezvous; `GOSSAMER_RENDEZVOUS` names it: a
//! `host:port` (or `ip:port`) is TCP, anything else a socket path.
//!
//! Rank 0 binds exactly the address it was given (a host name is resolved
//! and that address bound), never every interface unless asked:
//! `GOSSAMER_RENDEZVOUS_LISTEN=ADDR:PORT` makes it bind that instead (for
//! instance `0.0.0.0:7000`), while the other ranks still connect to
//! `GOSSAMER_RENDEZVOUS`.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where rank 0 listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Rendezvous {
    /// A Unix socket path (one host).
    Unix(PathBuf),
    /// A TCP address, `host:port`.
    Tcp(String),
}

impl Rendezvous {
    /// Reads `GOSSAMER_RENDEZVOUS`-style text: `host:port` with a numeric
    /// port is TCP, anything else a path.
    pub(crate) fn parse(s: &std::ffi::OsStr) -> Rendezvous {
        if let Some(t) = s.to_str() {
            if let Some((host, port)) = t.rsplit_once(':') {
                if !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok() {
                    return Rendezvous::Tcp(t.to_string());
                }
            }
        }
        Rendezvous::Unix(PathBuf::from(s))
    }

    /// The text form, for the environment of started processes.
    pub(crate) fn as_env(&self) -> std::ffi::OsString {
        match self {
            Rendezvous::Unix(p) => p.clone().into_os_string(),
            Rendezvous::Tcp(a) => a.into(),
        }
    }

    /// The socket path, if it is one (to remove it when done).
    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            Rendezvous::Unix(p) => Some(p),
            Rendezvous::Tcp(_) => None,
        }
    }

    /// Listens at the rendezvous, or at `listen_at` (a TCP `ADDR:PORT`
    /// that overrides where a TCP rendezvous is bound).
    pub(crate) fn listen(&self, listen_at: Option<&str>) -> io::Result<Listener> {
        match (self, listen_at) {
            (Rendezvous::Unix(_), Some(at)) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "GOSSAMER_RENDEZVOUS_LISTEN={at} applies to a TCP rendezvous, and GOSSAMER_RENDEZVOUS is a \
                     socket path; unset one of them"
                ),
            )),
            (Rendezvous::Unix(p), None) => {
                let _ = std::fs::remove_file(p);
                UnixListener::bind(p).map(Listener::Unix)
            }
            (Rendezvous::Tcp(a), at) => {
                let a = at.unwrap_or(a);
                TcpListener::bind(a).map(Listener::Tcp).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "cannot bind {a}: {e} (rank 0 binds the address it was given; \
                             GOSSAMER_RENDEZVOUS_LISTEN=ADDR:PORT binds another, e.g. 0.0.0.0:PORT)"
                        ),
                    )
                })
            }
        }
    }

    pub(crate) fn connect(&self) -> io::Result<Stream> {
        match self {
            Rendezvous::Unix(p) => UnixStream::connect(p).map(Stream::Unix),
            Rendezvous::Tcp(a) => {
                let addr = a
                    .to_socket_addrs()?
                    .next()
                    .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no address for {a}")))?;
                let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
                s.set_nodelay(true)?;
                Ok(Stream::Tcp(s))
            }
        }
    }
}

pub(crate) enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Listener {
    pub(crate) fn set_nonblocking(&self, b: bool) -> io::Result<()> {
        match self {
            Listener::Unix(l) => l.set_nonblocking(b),
            Listener::Tcp(l) => l.set_nonblocking(b),
        }
    }

    pub(crate) fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                s.set_nodelay(true)?;
                Ok(Stream::Tcp(s))
            }
        }
    }
}

/// One control connection.
pub(crate) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub(crate) fn set_nonblocking(&self, b: bool) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_nonblocking(b),
            Stream::Tcp(s) => s.set_nonblocking(b),
        }
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }

    /// Who is at the other end, for the log.
    pub(crate) fn peer(&self) -> String {
        match self {
            Stream::Tcp(s) => s.peer_addr().map_or_else(|e| format!("a TCP peer ({e})"), |a| a.to_string()),
            Stream::Unix(_) => "a process on the Unix socket".into(),
        }
    }

    /// Ends the connection once the peer has closed its end, or `wait` has
    /// passed: no more writes (the peer reads an orderly end after the
    /// last message), then what the peer still sends is read and dropped
    /// until it closes. Closing with unread bytes would reset the
    /// connection instead, and a reset throws away what the network still
    /// carries of ours: a last message that a lost frame held back for a
    /// retransmission never arrives, and the peer reads the reset alone.
    pub(crate) fn close_after_peer(self, wait: Duration) {
        self.shutdown(std::net::Shutdown::Write);
        let mut me = self;
        let end = std::time::Instant::now() + wait;
        let mut buf = [0u8; 4096];
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || me.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match me.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// Ends the connection at once on our side (both directions), without
    /// a reset as long as everything the peer sent has been read: for a
    /// peer that waits for our end after its last message (see
    /// [`close_after_peer`](Stream::close_after_peer)).
    pub(crate) fn shut(&self) {
        self.shutdown(std::net::Shutdown::Both);
    }

    /// Shuts the connection down in `how` (errors ignored: the peer may be
    /// gone already).
    fn shutdown(&self, how: std::net::Shutdown) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        };
    }

    /// Ends the connection so that the peer reads an orderly end (0
    /// bytes) rather than a reset: no more writes, then what it already
    /// sent is discarded (at most `max` bytes, without waiting).
    pub(crate) fn close_quietly(self, max: usize) {
        self.shutdown(std::net::Shutdown::Write);
        let mut me = self;
        if me.set_nonblocking(true).is_ok() {
            let mut buf = [0u8; 4096];
            let mut left = max;
            while left > 0 {
                match me.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
        }
    }
}

impl gossamer_session::TimedStream for Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        Stream::set_read_timeout(self, t)
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_text_is_tcp_only_for_host_and_port() {
        assert_eq!(Rendezvous::parse("10.0.0.1:7000".as_ref()), Rendezvous::Tcp("10.0.0.1:7000".into()));
        assert_eq!(Rendezvous::parse("node-3:7000".as_ref()), Rendezvous::Tcp("node-3:7000".into()));
        assert_eq!(Rendezvous::parse("/tmp/x.sock".as_ref()), Rendezvous::Unix("/tmp/x.sock".into()));
        assert_eq!(Rendezvous::parse("/tmp/a:7".as_ref()), Rendezvous::Unix("/tmp/a:7".into()));
        assert_eq!(Rendezvous::parse("rel.sock".as_ref()), Rendezvous::Unix("rel.sock".into()));
    }

    #[test]
    fn tcp_rendezvous_round_trips_bytes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let r = Rendezvous::Tcp(format!("127.0.0.1:{port}"));
        let listener = r.listen(None).unwrap();
        let h = std::thread::spawn(move || {
            let mut s = listener.accept().unwrap();
            let mut b = [0u8; 5];
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
        });
        let mut c = r.connect().unwrap();
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"hello");
        h.join().unwrap();
    }

    /// A connected pair over TCP on the loopback: (ours, the peer's).
    fn tcp_pair() -> (Stream, Stream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (Stream::Tcp(a), Stream::Tcp(b))
    }

    /// Reads until the end of the stream; the error if it was reset.
    fn read_to_end(s: &mut Stream) -> io::Result<Vec<u8>> {
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut got = Vec::new();
        s.read_to_end(&mut got)?;
        Ok(got)
    }

    #[test]
    fn a_plain_close_with_unread_bytes_resets_the_connection() {
        // What `close_after_peer` avoids: the peer's heartbeats unread, our
        // last message is followed by a reset, not an orderly end.
        let (mut ours, mut peer) = tcp_pair();
        peer.write_all(&[7u8; 64]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        ours.write_all(b"bye").unwrap();
        drop(ours);
        std::thread::sleep(Duration::from_millis(50));
        let mut got = [0u8; 3];
        let e = match peer.read_exact(&mut got).and_then(|()| read_to_end(&mut peer)) {
            Err(e) => e,
            Ok(rest) => panic!("an orderly end after {got:?} and {rest:?}"),
        };
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
    }

    #[test]
    fn after_the_last_message_the_peer_reads_it_and_an_orderly_end() {
        let (ours, mut peer) = tcp_pair();
        let mut ours = ours;
        // The peer keeps sending (heartbeats) while we say goodbye.
        peer.write_all(&[7u8; 64]).unwrap();
        ours.write_all(b"bye").unwrap();
        let closing = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            ours.close_after_peer(Duration::from_secs(10));
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        peer.write_all(&[7u8; 64]).unwrap();
        assert_eq!(read_to_end(&mut peer).unwrap(), b"bye", "the goodbye, then the end");
        // Our end waits for the peer's.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!closing.is_finished(), "closed before the peer closed its end");
        peer.shut();
        let took = closing.join().unwrap();
        assert!(took < Duration::from_secs(5), "waited {took:?} after the peer closed");
    }

    #[test]
    fn a_peer_that_never_closes_is_waited_for_at_most_the_bound() {
        let (ours, _peer) = tcp_pair();
        let t = std::time::Instant::now();
        ours.close_after_peer(Duration::from_millis(200));
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn rank_0_binds_the_address_it_was_given_unless_told_otherwise() {
        // An address of another host cannot be bound: an error, not a
        // silent fallback to every interface.
        let r = Rendezvous::Tcp("192.0.2.1:7000".into());
        let e = r.listen(None).err().expect("TEST-NET address bound");
        assert!(e.to_string().contains("GOSSAMER_RENDEZVOUS_LISTEN"), "{e}");
        match r.listen(Some("127.0.0.1:0")).unwrap() {
            Listener::Tcp(l) => assert!(l.local_addr().unwrap().ip().is_loopback()),
            Listener::Unix(_) => panic!("a TCP rendezvous listened on a socket"),
        }
        assert!(Rendezvous::Unix("/tmp/x".into()).listen(Some("0.0.0.0:1")).is_err());
    }
}
