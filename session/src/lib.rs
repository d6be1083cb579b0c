//! Authenticated, encrypted sessions over a byte stream, for peers that
//! share a secret: the ranks of one program at its rendezvous, and
//! `gossamer run` with the daemons of its hosts.
//!
//! The construction is the Noise protocol `Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s`
//! (through the `snow` crate), with the pre-shared key derived from the
//! shared secret by HKDF-SHA256 and a purpose label. What it gives:
//!
//! * **Mutual authentication.** Neither side learns anything useful, and
//!   neither accepts a message, unless the other knows the secret: the
//!   initiator's first message is encrypted under a key mixed from the
//!   pre-shared key, the responder's reply too, and every transport message
//!   after that under keys that also depend on a fresh Diffie–Hellman
//!   exchange, so a replayed first message leads nowhere.
//! * **Forward secrecy** through ephemeral X25519 keys.
//! * **Integrity, replay and reordering protection.** Each direction counts
//!   its messages; a record that was altered, replayed, dropped or moved
//!   fails to decrypt and ends the session.
//! * **Bounded pre-authentication work.** A handshake record is at most
//!   [`HANDSHAKE_RECORD_MAX`] bytes, read under one deadline for the whole
//!   handshake.
//!
//! On the wire every record is a 2-byte big-endian length and that many
//! bytes of Noise message. A message of the application is cut into pieces
//! of at most [`PIECE_MAX`] bytes; each piece's plaintext starts with one
//! byte saying whether more pieces follow, and the receiver refuses a
//! message longer than the limit it was given before storing it.
//!
//! The crate does the cryptography and the framing; the caller owns the
//! socket: blocking helpers take any [`TimedStream`], and the
//! [`Initiator`]/[`Responder`]/[`Opener`] state machines take bytes, for
//! asynchronous callers.

mod error;
mod handshake;
mod psk;
mod record;
mod secret_file;
mod transport;

pub use error::SessionError;
pub use handshake::{accept, connect, Initiator, Responder, HANDSHAKE_RECORD_MAX};
pub use psk::Psk;
pub use record::{read_record, TimedStream, RECORD_MAX};
pub use secret_file::read_secret_file;
pub use transport::{Opener, Sealer, Session, PIECE_MAX};

/// The Noise protocol every session speaks.
pub const NOISE_PARAMS: &str = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s";
