//! The two memcached protocols. A connection speaks the binary protocol if
//! its first byte is the request magic `0x80`, the text protocol otherwise
//! (memcached's "auto-negotiate").

pub mod binary;
pub mod text;

/// The protocol of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The text protocol.
    Text,
    /// The binary protocol.
    Binary,
}

impl Protocol {
    /// The protocol a connection speaks, from its first byte.
    pub fn detect(first: u8) -> Protocol {
        if first == binary::REQUEST {
            Protocol::Binary
        } else {
            Protocol::Text
        }
    }
}
