//! Framing and validation of binary-protocol requests.
//!
//! [`parse`] returns the first complete request, or `None` when more input
//! is needed. Validation follows memcached 1.6's `dispatch_bin_command`:
//! a wrong magic byte closes the connection; key plus extras longer than
//! the body, or a key over 250 bytes, or lengths that do not fit the
//! opcode, get an error and then a close; an unknown opcode gets
//! "Unknown command" and its body is skipped. Values too large for an item
//! are answered with `E2BIG` and skipped without being buffered.
//!
//! One deliberate difference: memcached 1.6 skips too many bytes after an
//! unknown command that carries a key, which garbles the rest of the
//! stream; here exactly the body is skipped.

use super::header::{opcode, status, Header, HEADER_LEN, REQUEST};
use crate::store::{item_size_ok, KEY_MAX};

/// One framed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A valid request, with its body split up.
    Request {
        /// The header.
        header: Header,
        /// Extras.
        extras: &'a [u8],
        /// Key.
        key: &'a [u8],
        /// Value.
        value: &'a [u8],
    },
    /// A store whose item is over the size limit: answer `E2BIG` (after
    /// removing the old item, for a set) and skip the value.
    TooLarge {
        /// The header.
        header: Header,
        /// Key.
        key: &'a [u8],
    },
    /// Answer with error `status`; then close the connection, or skip the
    /// body and go on.
    Error {
        /// The header.
        header: Header,
        /// Status code of the response.
        status: u16,
        /// Close after the response.
        close: bool,
    },
    /// Not a request packet: close the connection.
    BadMagic,
}

/// A frame and how much input it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The frame.
    pub frame: Frame<'a>,
    /// Bytes of input consumed.
    pub consumed: usize,
    /// Further bytes to discard, which may not have arrived yet.
    pub swallow: usize,
}

/// Whether the lengths in `h` suit its opcode (the loud form).
fn lengths_ok(op: u8, h: &Header) -> bool {
    let (key, ext, body) = (h.keylen as u32, h.extlen as u32, h.bodylen);
    match op {
        opcode::VERSION | opcode::NOOP | opcode::QUIT => key == 0 && ext == 0 && body == 0,
        opcode::FLUSH => key == 0 && body == ext && (ext == 0 || ext == 4),
        opcode::SET | opcode::ADD | opcode::REPLACE => ext == 8 && key != 0 && body >= key + 8,
        opcode::GET | opcode::GETK => ext == 0 && body == key && key > 0,
        opcode::DELETE => key > 0 && ext == 0 && body == key,
        opcode::INCREMENT | opcode::DECREMENT => key > 0 && ext == 20 && body == key + 20,
        opcode::APPEND | opcode::PREPEND => key > 0 && ext == 0,
        opcode::STAT => ext == 0 && body == key,
        opcode::TOUCH | opcode::GAT | opcode::GATK => ext == 4 && key != 0 && body == key + 4,
        _ => true,
    }
}

fn known(op: u8) -> bool {
    matches!(
        op,
        opcode::VERSION
            | opcode::NOOP
            | opcode::QUIT
            | opcode::FLUSH
            | opcode::SET
            | opcode::ADD
            | opcode::REPLACE
            | opcode::GET
            | opcode::GETK
            | opcode::DELETE
            | opcode::INCREMENT
            | opcode::DECREMENT
            | opcode::APPEND
            | opcode::PREPEND
            | opcode::STAT
            | opcode::TOUCH
            | opcode::GAT
            | opcode::GATK
    )
}

/// Parses the first request in `buf`, or returns `None` if it is not
/// complete yet. `item_size_max` is the item size limit (`-I`).
pub fn parse(buf: &[u8], item_size_max: usize) -> Option<Parsed<'_>> {
    if buf.len() < HEADER_LEN {
        return None;
    }
    let header = Header::decode(buf);
    let error = |status, close, swallow| {
        Some(Parsed { frame: Frame::Error { header, status, close }, consumed: HEADER_LEN, swallow })
    };
    if header.magic != REQUEST {
        return Some(Parsed { frame: Frame::BadMagic, consumed: 0, swallow: 0 });
    }
    let (key_len, ext_len, body_len) = (header.keylen as usize, header.extlen as usize, header.bodylen as usize);
    if key_len + ext_len > body_len {
        return error(status::UNKNOWN_COMMAND, true, 0);
    }
    if key_len > KEY_MAX {
        return error(status::EINVAL, true, 0);
    }
    let (op, _quiet) = opcode::unquiet(header.opcode);
    if !known(op) {
        return error(status::UNKNOWN_COMMAND, false, body_len);
    }
    if !lengths_ok(op, &header) {
        return error(status::EINVAL, true, 0);
    }
    let head = HEADER_LEN + ext_len + key_len;
    if matches!(op, opcode::SET | opcode::ADD | opcode::REPLACE | opcode::APPEND | opcode::PREPEND) {
        let vlen = header.value_len();
        if buf.len() < head {
            return None;
        }
        let flags = if ext_len >= 4 {
            u32::from_be_bytes(buf[HEADER_LEN..HEADER_LEN + 4].try_into().expect("4 bytes"))
        } else {
            0
        };
        if !item_size_ok(key_len, flags, vlen, item_size_max) {
            let key = &buf[HEADER_LEN + ext_len..head];
            return Some(Parsed { frame: Frame::TooLarge { header, key }, consumed: head, swallow: vlen });
        }
    }
    let total = HEADER_LEN + body_len;
    if buf.len() < total {
        return None;
    }
    let frame = Frame::Request {
        header,
        extras: &buf[HEADER_LEN..HEADER_LEN + ext_len],
        key: &buf[HEADER_LEN + ext_len..head],
        value: &buf[head..total],
    };
    Some(Parsed { frame, consumed: total, swallow: 0 })
}

#[cfg(test)]
mod tests;
