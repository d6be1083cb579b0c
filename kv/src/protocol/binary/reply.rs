//! Responses of the binary protocol, as memcached 1.6 builds them.

use super::header::{opcode, status, Header, RESPONSE};
use crate::store::Outcome;

/// What a response needs to know about its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinCtx {
    /// The request's opcode, echoed (quiet forms included).
    pub opcode: u8,
    /// The request's opaque value, echoed.
    pub opaque: u32,
}

impl BinCtx {
    /// The loud opcode and whether the request was quiet.
    pub fn unquiet(&self) -> (u8, bool) {
        opcode::unquiet(self.opcode)
    }
}

/// Appends a response header.
pub fn header(out: &mut Vec<u8>, ctx: BinCtx, status: u16, keylen: usize, extlen: usize, bodylen: usize, cas: u64) {
    Header {
        magic: RESPONSE,
        opcode: ctx.opcode,
        keylen: keylen as u16,
        extlen: extlen as u8,
        datatype: 0,
        vbucket: status,
        bodylen: bodylen as u32,
        opaque: ctx.opaque,
        cas,
    }
    .encode(out);
}

/// Appends an error response with memcached's message.
pub fn error(out: &mut Vec<u8>, ctx: BinCtx, status: u16) {
    let msg = status::message(status);
    header(out, ctx, status, 0, 0, msg.len(), 0);
    out.extend_from_slice(msg);
}

/// Appends an empty success response.
pub fn ok(out: &mut Vec<u8>, ctx: BinCtx, cas: u64) {
    header(out, ctx, status::OK, 0, 0, 0, cas);
}

/// Appends a response with a body of `value` only.
pub fn with_value(out: &mut Vec<u8>, ctx: BinCtx, value: &[u8]) {
    header(out, ctx, status::OK, 0, 0, value.len(), 0);
    out.extend_from_slice(value);
}

/// Appends one stat packet (`name` empty: the terminator).
pub fn stat(out: &mut Vec<u8>, ctx: BinCtx, name: &[u8], value: &[u8]) {
    header(out, ctx, status::OK, name.len(), 0, name.len() + value.len(), 0);
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

/// Appends the response to `outcome`; quiet requests stay silent on
/// success (get-type ones on a miss).
pub fn render(outcome: &Outcome, ctx: BinCtx, out: &mut Vec<u8>) {
    let (op, quiet) = ctx.unquiet();
    if *outcome == Outcome::Failed {
        return error(out, ctx, status::EINTERNAL);
    }
    match op {
        opcode::GET | opcode::GETK | opcode::GAT | opcode::GATK | opcode::TOUCH => {
            let with_key = matches!(op, opcode::GETK | opcode::GATK);
            match outcome {
                Outcome::Found(h) => {
                    let data: &[u8] = if op == opcode::TOUCH { &[] } else { &h.data };
                    let key: &[u8] = if with_key { &h.key } else { &[] };
                    header(out, ctx, status::OK, key.len(), 4, 4 + key.len() + data.len(), h.cas);
                    out.extend_from_slice(&h.flags.to_be_bytes());
                    out.extend_from_slice(key);
                    out.extend_from_slice(data);
                }
                Outcome::Missing(key) if !quiet => {
                    if with_key {
                        header(out, ctx, status::KEY_ENOENT, key.len(), 0, key.len(), 0);
                        out.extend_from_slice(key);
                    } else {
                        error(out, ctx, status::KEY_ENOENT);
                    }
                }
                _ => {}
            }
        }
        opcode::SET | opcode::ADD | opcode::REPLACE | opcode::APPEND | opcode::PREPEND => match outcome {
            Outcome::Stored { cas } => {
                if !quiet {
                    ok(out, ctx, *cas);
                }
            }
            Outcome::Exists => error(out, ctx, status::KEY_EEXISTS),
            Outcome::NotFound => error(out, ctx, status::KEY_ENOENT),
            Outcome::OutOfMemory => error(out, ctx, status::ENOMEM),
            _ => {
                let st = match op {
                    opcode::ADD => status::KEY_EEXISTS,
                    opcode::REPLACE => status::KEY_ENOENT,
                    _ => status::NOT_STORED,
                };
                error(out, ctx, st);
            }
        },
        opcode::DELETE => match outcome {
            Outcome::Deleted => {
                if !quiet {
                    ok(out, ctx, 0);
                }
            }
            Outcome::Exists => error(out, ctx, status::KEY_EEXISTS),
            _ => error(out, ctx, status::KEY_ENOENT),
        },
        opcode::INCREMENT | opcode::DECREMENT => match outcome {
            Outcome::Number { value, cas } => {
                if !quiet {
                    header(out, ctx, status::OK, 0, 0, 8, *cas);
                    out.extend_from_slice(&value.to_be_bytes());
                }
            }
            Outcome::NonNumeric => error(out, ctx, status::DELTA_BADVAL),
            Outcome::Exists => error(out, ctx, status::KEY_EEXISTS),
            Outcome::OutOfMemory => error(out, ctx, status::ENOMEM),
            Outcome::NotStored => error(out, ctx, status::NOT_STORED),
            _ => error(out, ctx, status::KEY_ENOENT),
        },
        _ => {
            if !quiet {
                ok(out, ctx, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Hit;

    const CTX: BinCtx = BinCtx { opcode: opcode::GETK, opaque: 3 };

    #[test]
    fn getk_hit_and_miss() {
        let mut v = Vec::new();
        render(
            &Outcome::Found(Hit { key: b"bk".to_vec(), flags: 0xdead_beef, cas: 40, data: b"hello".to_vec() }),
            CTX,
            &mut v,
        );
        let h = Header::decode(&v);
        assert_eq!(
            (h.magic, h.opcode, h.keylen, h.extlen, h.bodylen, h.opaque, h.cas),
            (RESPONSE, opcode::GETK, 2, 4, 11, 3, 40)
        );
        assert_eq!(&v[24..], b"\xde\xad\xbe\xefbkhello");
        let mut v = Vec::new();
        render(&Outcome::Missing(b"nokey".to_vec()), CTX, &mut v);
        let h = Header::decode(&v);
        assert_eq!((h.vbucket, h.keylen, h.extlen, h.bodylen), (status::KEY_ENOENT, 5, 0, 5));
        assert_eq!(&v[24..], b"nokey");
    }

    #[test]
    fn quiet_forms() {
        let q = |op| BinCtx { opcode: op, opaque: 0 };
        let mut v = Vec::new();
        render(&Outcome::Missing(b"k".to_vec()), q(opcode::GETQ), &mut v);
        render(&Outcome::Stored { cas: 1 }, q(opcode::SETQ), &mut v);
        render(&Outcome::Deleted, q(opcode::DELETEQ), &mut v);
        assert!(v.is_empty());
        render(&Outcome::NotStored, q(opcode::ADDQ), &mut v);
        assert_eq!(Header::decode(&v).vbucket, status::KEY_EEXISTS);
        assert_eq!(&v[24..], b"Data exists for key.");
    }
}
