//! An established session: messages cut into records, each sealed with its
//! direction's key and message number. The two directions are independent
//! halves ([`Sealer`], [`Opener`]) so that a reader thread and a writer
//! thread can each own one.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use snow::StatelessTransportState;

use crate::record::{self, read_record, TimedStream, RECORD_MAX};
use crate::SessionError;

/// The most bytes of a message one record carries: a record less the
/// 16-byte tag and the 1-byte "more pieces follow" flag.
pub const PIECE_MAX: usize = RECORD_MAX - 16 - 1;

/// Both directions of a session.
pub struct Session {
    sealer: Sealer,
    opener: Opener,
}

/// The sending half: seals messages into records.
pub struct Sealer {
    state: Arc<StatelessTransportState>,
    nonce: u64,
}

/// The receiving half: opens records, assembling messages.
pub struct Opener {
    state: Arc<StatelessTransportState>,
    nonce: u64,
    partial: Vec<u8>,
    broken: bool,
}

impl Session {
    pub(crate) fn new(state: StatelessTransportState) -> Session {
        let state = Arc::new(state);
        Session {
            sealer: Sealer { state: state.clone(), nonce: 0 },
            opener: Opener { state, nonce: 0, partial: Vec::new(), broken: false },
        }
    }

    /// Separates the two directions.
    pub fn split(self) -> (Sealer, Opener) {
        (self.sealer, self.opener)
    }

    /// Seals `msg` and writes it.
    pub fn send<W: Write + ?Sized>(&mut self, w: &mut W, msg: &[u8]) -> Result<(), SessionError> {
        self.sealer.send(w, msg)
    }

    /// Reads one message of at most `max` bytes.
    pub fn recv<S: TimedStream + ?Sized>(&mut self, s: &mut S, max: usize) -> Result<Vec<u8>, SessionError> {
        self.opener.recv(s, max)
    }

    /// Reads one message of at most `max` bytes by `deadline`.
    pub fn recv_by<S: TimedStream + ?Sized>(
        &mut self,
        s: &mut S,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>, SessionError> {
        self.opener.recv_by(s, max, deadline)
    }
}

impl Sealer {
    /// The records (framed) that carry `msg`.
    pub fn seal(&mut self, msg: &[u8]) -> Result<Vec<u8>, SessionError> {
        let pieces = msg.len().div_ceil(PIECE_MAX).max(1);
        let mut out = Vec::with_capacity(msg.len() + pieces * (2 + 17));
        let mut plain = Vec::with_capacity(PIECE_MAX + 1);
        let mut sealed = vec![0u8; RECORD_MAX];
        for i in 0..pieces {
            let piece = &msg[i * PIECE_MAX..msg.len().min((i + 1) * PIECE_MAX)];
            plain.clear();
            plain.push(u8::from(i + 1 < pieces));
            plain.extend_from_slice(piece);
            if self.nonce == u64::MAX {
                return Err(SessionError::Noise("the session sent 2^64 records".into()));
            }
            let n = self.state.write_message(self.nonce, &plain, &mut sealed)?;
            self.nonce += 1;
            record::frame(&mut out, &sealed[..n]);
        }
        Ok(out)
    }

    /// Seals `msg` and writes its records.
    pub fn send<W: Write + ?Sized>(&mut self, w: &mut W, msg: &[u8]) -> Result<(), SessionError> {
        let bytes = self.seal(msg)?;
        record::write_all(w, &bytes)
    }
}

impl Opener {
    /// Opens one record (its body, without the length). `Ok(Some(msg))`
    /// when it completes a message, `Ok(None)` when more pieces follow. A
    /// message over `max` bytes is refused as soon as its pieces exceed it.
    /// After any error the opener refuses everything: a session with one bad
    /// record is over.
    pub fn open(&mut self, body: &[u8], max: usize) -> Result<Option<Vec<u8>>, SessionError> {
        if self.broken {
            return Err(SessionError::Forged);
        }
        let r = self.open_inner(body, max);
        if r.is_err() {
            self.broken = true;
            self.partial = Vec::new();
        }
        r
    }

    fn open_inner(&mut self, body: &[u8], max: usize) -> Result<Option<Vec<u8>>, SessionError> {
        if body.len() > RECORD_MAX {
            return Err(SessionError::TooLarge { what: "record", len: body.len(), max: RECORD_MAX });
        }
        let mut plain = vec![0u8; body.len()];
        let n = self.state.read_message(self.nonce, body, &mut plain).map_err(|_| SessionError::Forged)?;
        self.nonce += 1;
        let (&more, data) = plain[..n].split_first().ok_or(SessionError::Malformed("an empty record"))?;
        if more > 1 {
            return Err(SessionError::Malformed("a bad continuation flag"));
        }
        let len = self.partial.len() + data.len();
        if len > max {
            return Err(SessionError::TooLarge { what: "message", len, max });
        }
        if more == 1 && data.is_empty() {
            return Err(SessionError::Malformed("an empty piece in the middle of a message"));
        }
        self.partial.extend_from_slice(data);
        Ok((more == 0).then(|| std::mem::take(&mut self.partial)))
    }

    /// Reads records until a whole message of at most `max` bytes is in.
    pub fn recv<S: TimedStream + ?Sized>(&mut self, s: &mut S, max: usize) -> Result<Vec<u8>, SessionError> {
        self.recv_by(s, max, None)
    }

    /// As [`Opener::recv`], by `deadline`.
    pub fn recv_by<S: TimedStream + ?Sized>(
        &mut self,
        s: &mut S,
        max: usize,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>, SessionError> {
        // A record carries its piece, a flag byte and a 16-byte tag: one
        // longer than `max + 17` holds more than the message may have, and
        // is refused before it is read (before authentication too, which
        // the first message of `accept` completes).
        let record_max = RECORD_MAX.min(max.saturating_add(17));
        loop {
            let body = read_record(s, record_max, deadline)?;
            if let Some(m) = self.open(&body, max)? {
                return Ok(m);
            }
        }
    }
}
