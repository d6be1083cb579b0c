//! What can go wrong with a session.

/// Errors of a session: the connection, the peer's authentication, or a
/// message that breaks the framing rules.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection at a record boundary.
    #[error("the peer closed the connection")]
    Closed,
    /// The whole handshake, or a read, did not finish by its deadline.
    #[error("the peer did not answer in time ({0})")]
    Deadline(&'static str),
    /// The handshake failed: the peer does not know the secret, speaks
    /// another protocol, or is not a Gossamer peer at all.
    #[error("authentication failed: the peer does not know the shared secret (or speaks another protocol version)")]
    Authentication,
    /// A record could not be decrypted: altered, replayed, reordered or
    /// forged. The session cannot continue.
    #[error("a record failed authentication (altered, replayed, reordered or forged); the session is ended")]
    Forged,
    /// A record or message is larger than allowed.
    #[error("{what} of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// A record or a message.
        what: &'static str,
        /// Its announced or accumulated length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A record's plaintext is not a piece of a message.
    #[error("malformed record: {0}")]
    Malformed(&'static str),
    /// The cryptographic library refused an operation (never expected).
    #[error("noise: {0}")]
    Noise(String),
}

impl From<snow::Error> for SessionError {
    fn from(e: snow::Error) -> Self {
        SessionError::Noise(e.to_string())
    }
}
