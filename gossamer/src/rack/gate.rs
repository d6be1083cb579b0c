//! The entrance to the rendezvous: every process proves that it knows the
//! program's secret before rank 0 tells it anything, and rank 0 proves it
//! too before the process believes anything it is told.
//!
//! The proof is a Noise `NNpsk0` handshake (`gossamer-session`) with a key
//! derived from the secret for the purpose `"rendezvous"`; the process's
//! hello is the session's first message, and every control message after
//! it is sealed by the session. Over TCP and over the Unix socket alike.
//!
//! Rank 0 never stops because of a peer that is not a rank: each accepted
//! connection is handshaken on a short-lived thread of its own (at most
//! [`PENDING_MAX`] at once; more are closed at once), within
//! [`HANDSHAKE`]. A peer that fails, stalls or sends garbage is dropped and
//! logged (its address and why), having read nothing; rank 0 keeps waiting
//! for its ranks. Before a peer is authenticated rank 0 reads and stores at
//! most one handshake record of [`HANDSHAKE_RECORD_MAX`] bytes and one
//! record of [`HELLO_MAX`]` + 17` bytes (the sealed hello; a longer one is
//! refused from its length) — 5.2 KiB with the lengths — and writes one
//! 50-byte handshake reply; a handshake thread has a [`STACK`]-byte stack.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gossamer_session::{Psk, SessionError, HANDSHAKE_RECORD_MAX};

use super::control::{self, Conn, Msg};
use super::stream::{Rendezvous, Stream};
use super::RackError;

/// The purpose the rendezvous key is derived for.
const PURPOSE: &str = "rendezvous";
/// The protocol and its version, bound into the handshake.
const PROLOGUE: &[u8] = b"gossamer rendezvous/1";
/// The whole handshake, hello included, must be done within this.
pub(super) const HANDSHAKE: Duration = Duration::from_secs(5);
/// The largest hello accepted.
pub(super) const HELLO_MAX: usize = 4096;
/// Connections being handshaken at once; more are closed at once.
pub(super) const PENDING_MAX: usize = 64;
/// The stack of a handshake thread (the handshake and a hello need little).
const STACK: usize = 256 << 10;
/// How long a process keeps trying when rank 0 closes the connection
/// during the handshake (a wrong secret, or rank 0 busy with
/// [`PENDING_MAX`] strangers) before it gives up.
const REFUSED_GRACE: Duration = Duration::from_secs(5);

/// The rendezvous key of a program.
pub(super) fn psk(secret: &[u8]) -> Psk {
    Psk::derive(secret, PURPOSE)
}

/// Rank 0's side for one pending connection: the handshake by `deadline`,
/// then the hello. Nothing but the handshake reply is written, and nothing
/// is decoded as a control message, before the peer is authenticated.
pub(super) fn admit(s: &mut Stream, psk: &Psk, deadline: Instant) -> Result<(gossamer_session::Session, Msg), String> {
    let (session, hello) = gossamer_session::accept(s, psk, PROLOGUE, deadline, HELLO_MAX).map_err(|e| match e {
        SessionError::Authentication | SessionError::Forged => {
            "failed to authenticate (it does not know the program's secret, or is not a Gossamer rank)".into()
        }
        e => e.to_string(),
    })?;
    match control::decode(&hello) {
        Ok(m @ Msg::Hello { .. }) => Ok((session, m)),
        Ok(m) => Err(format!("authenticated, but sent {m:?} instead of a hello")),
        Err(e) => Err(format!("authenticated, but its hello is malformed: {e}")),
    }
}

/// Logs a peer dropped at the rendezvous, on standard error and as a
/// `tracing` warning.
fn dropped(peer: &str, why: &str) {
    eprintln!("gossamer: rendezvous: dropped {peer}: {why}");
    tracing::warn!(peer, "rendezvous: dropped a peer: {why}");
}

/// Rank 0's handshakes in progress; authenticated ranks come out of
/// [`Gate::next`] with their hello.
pub(super) struct Gate {
    psk: Arc<Psk>,
    pending: Arc<AtomicUsize>,
    tx: mpsc::Sender<(Conn, Msg)>,
    rx: mpsc::Receiver<(Conn, Msg)>,
}

/// Counts a handshake thread while it lives.
struct Pending(Arc<AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gate {
    pub(super) fn new(psk: Psk) -> Gate {
        let (tx, rx) = mpsc::channel();
        Gate { psk: Arc::new(psk), pending: Arc::new(AtomicUsize::new(0)), tx, rx }
    }

    /// Handshakes `s` on a thread of its own, or closes it at once when
    /// [`PENDING_MAX`] are already pending (or no thread can be started).
    pub(super) fn admit(&self, s: Stream) {
        let peer = s.peer();
        if self.pending.fetch_add(1, Ordering::SeqCst) >= PENDING_MAX {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            dropped(&peer, &format!("{PENDING_MAX} connections are already being authenticated"));
            s.close_quietly(0);
            return;
        }
        let guard = Pending(self.pending.clone());
        let (psk, tx) = (self.psk.clone(), self.tx.clone());
        let deadline = Instant::now() + HANDSHAKE;
        let spawned = std::thread::Builder::new().name("gossamer-gate".into()).stack_size(STACK).spawn(move || {
            let _guard = guard;
            let mut s = s;
            match admit(&mut s, &psk, deadline) {
                Ok((session, hello)) => {
                    // Rank 0 may have everyone already: then it is closed.
                    let _ = tx.send((Conn::new(s, session), hello));
                }
                Err(why) => {
                    dropped(&s.peer(), &why);
                    s.close_quietly(HANDSHAKE_RECORD_MAX + HELLO_MAX);
                }
            }
        });
        if let Err(e) = spawned {
            // The closure, the stream and the count went with the error.
            dropped(&peer, &format!("cannot start a thread to authenticate it: {e}"));
        }
    }

    /// An authenticated process and its hello, if one is in.
    pub(super) fn next(&self) -> Option<(Conn, Msg)> {
        self.rx.try_recv().ok()
    }
}

/// A process's side: connects to rank 0 (retrying until `deadline` while
/// it is not there yet), authenticates both ways, and sends `hello` as the
/// session's first message.
pub(super) fn join(rendezvous: &Rendezvous, psk: &Psk, hello: &Msg, deadline: Instant) -> Result<Conn, RackError> {
    let hello = postcard::to_stdvec(hello).map_err(|e| RackError::Bootstrap(format!("encoding the hello: {e}")))?;
    let mut refused_since: Option<Instant> = None;
    loop {
        let last = match rendezvous.connect() {
            Ok(mut s) => {
                let by = (Instant::now() + HANDSHAKE).min(deadline.max(Instant::now() + Duration::from_millis(100)));
                match gossamer_session::connect(&mut s, psk, PROLOGUE, by, &hello) {
                    Ok(session) => return Ok(Conn::new(s, session)),
                    Err(SessionError::Authentication) => {
                        let since = *refused_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= REFUSED_GRACE {
                            return Err(RackError::Bootstrap(format!(
                                "rank 0 at {} did not accept our handshake: this process's secret is not the \
                                 program's (every rank needs the same GOSSAMER_SECRET_FILE or GOSSAMER_SECRET), or \
                                 something else listens there",
                                rendezvous.as_env().to_string_lossy()
                            )));
                        }
                        "rank 0 closed the connection during the handshake".to_string()
                    }
                    Err(e) => e.to_string(),
                }
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(RackError::Bootstrap(format!("cannot reach rank 0: {last}")));
        }
        std::thread::sleep(Duration::from_millis(if refused_since.is_some() { 100 } else { 5 }));
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    fn hello(rank: u32) -> Msg {
        Msg::Hello { rank, size: 2, pid: 1, exe_hash: 2, threads: 2, host: "h".into() }
    }

    #[test]
    fn a_rank_with_the_secret_is_admitted_and_one_without_is_not() {
        for (secret, ok) in [(&b"right"[..], true), (b"wrong", false)] {
            let (a, b) = UnixStream::pair().unwrap();
            let mut a = Stream::Unix(a);
            let p = psk(secret);
            let h = std::thread::spawn(move || {
                let by = Instant::now() + HANDSHAKE;
                gossamer_session::connect(&mut a, &p, PROLOGUE, by, &postcard::to_stdvec(&hello(1)).unwrap()).is_ok()
            });
            let r = admit(&mut Stream::Unix(b), &psk(b"right"), Instant::now() + HANDSHAKE);
            assert_eq!(r.is_ok(), ok, "{:?}", r.as_ref().err());
            if ok {
                assert_eq!(r.unwrap().1, hello(1));
            }
            assert_eq!(h.join().unwrap(), ok);
        }
    }

    #[test]
    fn past_the_cap_connections_are_closed_at_once_and_stalled_ones_at_the_deadline() {
        use std::io::Read;
        let gate = Gate::new(psk(b"secret"));
        let mut silent = Vec::new();
        for _ in 0..PENDING_MAX {
            let (a, b) = UnixStream::pair().unwrap();
            gate.admit(Stream::Unix(b));
            silent.push(a);
        }
        let (mut a, b) = UnixStream::pair().unwrap();
        let start = Instant::now();
        gate.admit(Stream::Unix(b));
        a.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!(a.read(&mut [0u8; 16]).unwrap(), 0, "one more than the cap is closed at once");
        assert!(start.elapsed() < Duration::from_secs(1));
        // The silent ones are closed once their handshake's deadline passes,
        // having read nothing.
        for mut s in silent {
            s.set_read_timeout(Some(HANDSHAKE + Duration::from_secs(5))).unwrap();
            assert_eq!(s.read(&mut [0u8; 16]).unwrap(), 0);
        }
        assert!(start.elapsed() >= HANDSHAKE - Duration::from_millis(100));
        assert!(gate.next().is_none());
    }

    proptest::proptest! {
        /// Whatever a peer sends before it is authenticated, admitting it
        /// is an error, never a panic or a hello.
        #[test]
        fn arbitrary_bytes_are_refused(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2048)) {
            let (mut a, b) = UnixStream::pair().unwrap();
            a.write_all(&bytes).unwrap();
            a.shutdown(std::net::Shutdown::Write).unwrap();
            let r = admit(&mut Stream::Unix(b), &psk(b"secret"), Instant::now() + Duration::from_secs(2));
            proptest::prop_assert!(r.is_err());
        }
    }
}
