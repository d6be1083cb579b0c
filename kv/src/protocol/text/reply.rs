//! Replies of the text protocol, byte for byte as memcached 1.6 writes them.

use std::io::Write;

use crate::store::Outcome;

/// What kind of command a shard outcome answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// One key of get/gets/gat/gats.
    Get {
        /// Include the CAS value.
        cas: bool,
    },
    /// set/add/replace/append/prepend/cas.
    Store,
    /// delete.
    Delete,
    /// incr/decr.
    Arith,
    /// touch.
    Touch,
    /// A meta command (the shard rendered the reply).
    Meta,
}

/// Appends `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n`.
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    match cas {
        Some(c) => write!(out, " {flags} {} {c}\r\n", data.len()),
        None => write!(out, " {flags} {}\r\n", data.len()),
    }
    .expect("writing to a Vec cannot fail");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends the reply to `outcome` for a command of kind `kind`.
pub fn render(outcome: &Outcome, kind: TextKind, out: &mut Vec<u8>) {
    let line: &[u8] = match (kind, outcome) {
        (_, Outcome::Failed) => b"SERVER_ERROR internal error\r\n",
        (TextKind::Get { cas }, Outcome::Found(h)) => {
            value(out, &h.key, h.flags, &h.data, cas.then_some(h.cas));
            return;
        }
        (_, Outcome::Meta(bytes)) => {
            out.extend_from_slice(bytes);
            return;
        }
        (TextKind::Get { .. }, _) => return,
        (TextKind::Arith, Outcome::Number { value, .. }) => {
            write!(out, "{value}\r\n").expect("writing to a Vec cannot fail");
            return;
        }
        (TextKind::Arith, Outcome::NonNumeric) => b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        (TextKind::Arith, Outcome::OutOfMemory) => b"SERVER_ERROR out of memory\r\n",
        (TextKind::Touch, Outcome::Found(_)) => b"TOUCHED\r\n",
        (_, Outcome::Stored { .. }) => b"STORED\r\n",
        (_, Outcome::NotStored) => b"NOT_STORED\r\n",
        (_, Outcome::Exists) => b"EXISTS\r\n",
        (_, Outcome::Deleted) => b"DELETED\r\n",
        (_, Outcome::OutOfMemory) => b"SERVER_ERROR out of memory storing object\r\n",
        (_, Outcome::NotFound | Outcome::Missing(_)) => b"NOT_FOUND\r\n",
        (_, Outcome::Done) => b"OK\r\n",
        (_, _) => b"SERVER_ERROR unexpected result\r\n",
    };
    out.extend_from_slice(line);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Hit;

    fn r(o: Outcome, k: TextKind) -> Vec<u8> {
        let mut v = Vec::new();
        render(&o, k, &mut v);
        v
    }

    #[test]
    fn lines() {
        let hit = Hit { key: b"a".to_vec(), flags: 5, cas: 12, data: b"abc".to_vec() };
        assert_eq!(r(Outcome::Found(hit.clone()), TextKind::Get { cas: false }), b"VALUE a 5 3\r\nabc\r\n");
        assert_eq!(r(Outcome::Found(hit.clone()), TextKind::Get { cas: true }), b"VALUE a 5 3 12\r\nabc\r\n");
        assert_eq!(r(Outcome::Missing(b"a".to_vec()), TextKind::Get { cas: false }), b"");
        assert_eq!(r(Outcome::Found(hit), TextKind::Touch), b"TOUCHED\r\n");
        assert_eq!(r(Outcome::Missing(vec![]), TextKind::Touch), b"NOT_FOUND\r\n");
        assert_eq!(r(Outcome::Number { value: 9, cas: 1 }, TextKind::Arith), b"9\r\n");
        assert_eq!(r(Outcome::Stored { cas: 1 }, TextKind::Store), b"STORED\r\n");
        assert_eq!(r(Outcome::Deleted, TextKind::Delete), b"DELETED\r\n");
        assert_eq!(r(Outcome::OutOfMemory, TextKind::Store), b"SERVER_ERROR out of memory storing object\r\n");
    }
}
