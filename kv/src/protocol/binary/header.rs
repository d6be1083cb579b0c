//! The 24-byte packet header of memcached's binary protocol, with its
//! opcodes and status codes.

/// Header length in bytes.
pub const HEADER_LEN: usize = 24;
/// Magic byte of a request.
pub const REQUEST: u8 = 0x80;
/// Magic byte of a response.
pub const RESPONSE: u8 = 0x81;

/// Opcodes.
pub mod opcode {
    #![allow(missing_docs)]
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;

    /// The loud form of a quiet opcode, and whether it was quiet.
    pub fn unquiet(op: u8) -> (u8, bool) {
        match op {
            GETQ => (GET, true),
            GETKQ => (GETK, true),
            SETQ => (SET, true),
            ADDQ => (ADD, true),
            REPLACEQ => (REPLACE, true),
            DELETEQ => (DELETE, true),
            INCREMENTQ => (INCREMENT, true),
            DECREMENTQ => (DECREMENT, true),
            QUITQ => (QUIT, true),
            FLUSHQ => (FLUSH, true),
            APPENDQ => (APPEND, true),
            PREPENDQ => (PREPEND, true),
            GATQ => (GAT, true),
            GATKQ => (GATK, true),
            op => (op, false),
        }
    }
}

/// Response status codes.
pub mod status {
    #![allow(missing_docs)]
    pub const OK: u16 = 0x00;
    pub const KEY_ENOENT: u16 = 0x01;
    pub const KEY_EEXISTS: u16 = 0x02;
    pub const E2BIG: u16 = 0x03;
    pub const EINVAL: u16 = 0x04;
    pub const NOT_STORED: u16 = 0x05;
    pub const DELTA_BADVAL: u16 = 0x06;
    pub const UNKNOWN_COMMAND: u16 = 0x81;
    pub const ENOMEM: u16 = 0x82;
    pub const EINTERNAL: u16 = 0x84;

    /// The message memcached sends in the body of an error response.
    pub fn message(status: u16) -> &'static [u8] {
        match status {
            ENOMEM => b"Out of memory",
            UNKNOWN_COMMAND => b"Unknown command",
            KEY_ENOENT => b"Not found",
            EINVAL => b"Invalid arguments",
            KEY_EEXISTS => b"Data exists for key.",
            E2BIG => b"Too large.",
            DELTA_BADVAL => b"Non-numeric server-side value for incr or decr",
            NOT_STORED => b"Not stored.",
            EINTERNAL => b"Internal error",
            _ => b"UNHANDLED ERROR",
        }
    }
}

/// A request header, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Magic byte.
    pub magic: u8,
    /// Opcode.
    pub opcode: u8,
    /// Key length.
    pub keylen: u16,
    /// Extras length.
    pub extlen: u8,
    /// Data type (unused, 0).
    pub datatype: u8,
    /// vbucket id (requests) or status (responses).
    pub vbucket: u16,
    /// Length of extras, key and value together.
    pub bodylen: u32,
    /// Opaque value, echoed in the response.
    pub opaque: u32,
    /// CAS value.
    pub cas: u64,
}

impl Header {
    /// Decodes the first 24 bytes of `b`.
    ///
    /// # Panics
    /// If `b` is shorter than [`HEADER_LEN`].
    pub fn decode(b: &[u8]) -> Header {
        let be16 = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Header {
            magic: b[0],
            opcode: b[1],
            keylen: be16(2),
            extlen: b[4],
            datatype: b[5],
            vbucket: be16(6),
            bodylen: be32(8),
            opaque: be32(12),
            cas: u64::from_be_bytes(b[16..24].try_into().expect("8 bytes")),
        }
    }

    /// Encodes the header into `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.magic);
        out.push(self.opcode);
        out.extend_from_slice(&self.keylen.to_be_bytes());
        out.push(self.extlen);
        out.push(self.datatype);
        out.extend_from_slice(&self.vbucket.to_be_bytes());
        out.extend_from_slice(&self.bodylen.to_be_bytes());
        out.extend_from_slice(&self.opaque.to_be_bytes());
        out.extend_from_slice(&self.cas.to_be_bytes());
    }

    /// Length of the value part of the body.
    pub fn value_len(&self) -> usize {
        (self.bodylen as usize).saturating_sub(self.keylen as usize + self.extlen as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let h = Header {
            magic: REQUEST,
            opcode: opcode::SET,
            keylen: 3,
            extlen: 8,
            datatype: 0,
            vbucket: 7,
            bodylen: 20,
            opaque: 0xdead_beef,
            cas: 42,
        };
        let mut v = Vec::new();
        h.encode(&mut v);
        assert_eq!(v.len(), HEADER_LEN);
        assert_eq!(Header::decode(&v), h);
        assert_eq!(h.value_len(), 9);
    }
}
