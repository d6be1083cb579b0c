//! The handshake, as byte-level state machines ([`Initiator`],
//! [`Responder`]) and as blocking calls over a stream ([`connect`],
//! [`accept`]).
//!
//! `Noise_NNpsk0`: the initiator sends `psk, e` (encrypted under the
//! pre-shared key), the responder answers `e, ee`. A wrong key fails the
//! first message at the responder and the reply at the initiator. The
//! responder's authentication of the initiator is complete only with the
//! initiator's first transport message (a replayed first handshake message
//! cannot produce one), so [`accept`] returns only once that message has
//! decrypted, and [`connect`] sends it at once.

use std::time::Instant;

use crate::psk::Psk;
use crate::record::{self, read_record, TimedStream};
use crate::transport::Session;
use crate::{SessionError, NOISE_PARAMS};

/// The largest handshake record either side accepts. Both handshake
/// messages are 48 bytes; anything near this bound is not a peer.
pub const HANDSHAKE_RECORD_MAX: usize = 1024;

fn builder<'a>(psk: &'a Psk, prologue: &'a [u8]) -> Result<snow::Builder<'a>, SessionError> {
    let params = NOISE_PARAMS.parse().map_err(|e: snow::Error| SessionError::Noise(e.to_string()))?;
    Ok(snow::Builder::new(params).psk(0, psk.bytes())?.prologue(prologue)?)
}

/// The initiator's side, between its first message and the reply.
pub struct Initiator {
    hs: snow::HandshakeState,
}

impl Initiator {
    /// Starts a handshake; returns the state and the first record to send
    /// (framed: length included). `prologue` names the protocol and its
    /// version: peers with different prologues fail to authenticate.
    pub fn start(psk: &Psk, prologue: &[u8]) -> Result<(Initiator, Vec<u8>), SessionError> {
        let mut hs = builder(psk, prologue)?.build_initiator()?;
        let mut buf = [0u8; 128];
        let n = hs.write_message(&[], &mut buf)?;
        let mut out = Vec::with_capacity(n + 2);
        record::frame(&mut out, &buf[..n]);
        Ok((Initiator { hs }, out))
    }

    /// Takes the responder's reply (a record's body); the session is set up.
    pub fn finish(mut self, reply: &[u8]) -> Result<Session, SessionError> {
        let mut payload = [0u8; 128];
        if reply.len() > HANDSHAKE_RECORD_MAX {
            return Err(SessionError::TooLarge {
                what: "handshake record",
                len: reply.len(),
                max: HANDSHAKE_RECORD_MAX,
            });
        }
        self.hs.read_message(reply, &mut payload).map_err(|_| SessionError::Authentication)?;
        Ok(Session::new(self.hs.into_stateless_transport_mode()?))
    }
}

/// The responder's side.
pub struct Responder;

impl Responder {
    /// Takes the initiator's first record (its body); returns the session
    /// and the reply record to send (framed). The initiator is fully
    /// authenticated only once its first transport message opens.
    pub fn respond(psk: &Psk, prologue: &[u8], first: &[u8]) -> Result<(Session, Vec<u8>), SessionError> {
        if first.len() > HANDSHAKE_RECORD_MAX {
            return Err(SessionError::TooLarge {
                what: "handshake record",
                len: first.len(),
                max: HANDSHAKE_RECORD_MAX,
            });
        }
        let mut hs = builder(psk, prologue)?.build_responder()?;
        let mut payload = [0u8; HANDSHAKE_RECORD_MAX];
        hs.read_message(first, &mut payload).map_err(|_| SessionError::Authentication)?;
        let mut buf = [0u8; 128];
        let n = hs.write_message(&[], &mut buf)?;
        let mut out = Vec::with_capacity(n + 2);
        record::frame(&mut out, &buf[..n]);
        Ok((Session::new(hs.into_stateless_transport_mode()?), out))
    }
}

/// The initiator's whole handshake over `s`, by `deadline`, then `first`
/// as the first message of the session (which completes the responder's
/// authentication of us).
pub fn connect<S: TimedStream + ?Sized>(
    s: &mut S,
    psk: &Psk,
    prologue: &[u8],
    deadline: Instant,
    first: &[u8],
) -> Result<Session, SessionError> {
    let (init, hello) = Initiator::start(psk, prologue)?;
    record::write_all(s, &hello)?;
    let reply = match read_record(s, HANDSHAKE_RECORD_MAX, Some(deadline)) {
        Ok(r) => r,
        // A responder that cannot authenticate us closes the connection.
        Err(SessionError::Closed) => return Err(SessionError::Authentication),
        Err(e) => return Err(e),
    };
    let mut session = init.finish(&reply)?;
    s.set_read_timeout(None)?;
    session.send(s, first)?;
    Ok(session)
}

/// The responder's whole handshake over `s`, by `deadline`, including the
/// initiator's first message (at most `first_max` bytes), which is
/// returned. Before it returns nothing but two small records has been read
/// or written, whatever the peer sends.
pub fn accept<S: TimedStream + ?Sized>(
    s: &mut S,
    psk: &Psk,
    prologue: &[u8],
    deadline: Instant,
    first_max: usize,
) -> Result<(Session, Vec<u8>), SessionError> {
    let hello = read_record(s, HANDSHAKE_RECORD_MAX, Some(deadline))?;
    let (mut session, reply) = Responder::respond(psk, prologue, &hello)?;
    record::write_all(s, &reply)?;
    let first = session.recv_by(s, first_max, Some(deadline)).map_err(|e| match e {
        // A replayed or forged first handshake message ends here.
        SessionError::Forged => SessionError::Authentication,
        e => e,
    })?;
    s.set_read_timeout(None)?;
    Ok((session, first))
}
