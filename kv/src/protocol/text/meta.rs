//! Parser for memcached's meta commands (`mg`, `ms`, `md`, `ma`, `me`,
//! `mn`), following memcached 1.6.18's `proto_text.c`: the same token
//! limits, the same flag pre-parse (duplicates, unknown flags, bad
//! numbers, in-place base64 decoding of the key), the same checks in the
//! same order, and the same error lines. Errors a shard would only find
//! after touching the item (a long opaque in `mg` and `ma`) are left to
//! the shard, as memcached finds them there too.

use super::command::{Command, MetaCommand, Parsed};
use crate::base64;
use crate::numeric::{c_str, safe_strtol, safe_strtoul, safe_strtoull};
use crate::store::meta::{MetaFlag, MetaKind, MetaOp, OPAQUE_MAX};
use crate::store::{item_size_ok, StoreMode, KEY_MAX};

use super::parse::{replies, Limits};

/// memcached tokenizes a line into at most this many tokens, the last
/// one being an empty terminator.
const MAX_TOKENS: usize = 24;

/// memcached's `MFLAG_MAX_OPT_LENGTH`: more tokens (terminator
/// included) are refused.
const MAX_OPT_TOKENS: usize = 20;

/// Why a meta command is refused, with memcached's reply line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// Unknown command or too few tokens.
    #[error("ERROR")]
    Unknown,
    /// Malformed line.
    #[error("CLIENT_ERROR bad command line format")]
    BadFormat,
    /// `mg` with too many flags.
    #[error("CLIENT_ERROR options flags are too long")]
    GetFlagsTooLong,
    /// `ms`, `md`, `ma` with too many flags.
    #[error("CLIENT_ERROR options flags too long")]
    FlagsTooLong,
    /// A flag given twice, or a non-ASCII flag.
    #[error("CLIENT_ERROR duplicate flag")]
    Duplicate,
    /// An unknown flag.
    #[error("CLIENT_ERROR invalid flag")]
    InvalidFlag,
    /// `md` and `ma` report any pre-parse failure this way.
    #[error("CLIENT_ERROR invalid or duplicate flag")]
    InvalidOrDuplicate,
    /// The `b` key is not base64.
    #[error("CLIENT_ERROR error decoding key")]
    Decode,
    /// A bad number after `N`, `T`, `R` or `C`.
    #[error("CLIENT_ERROR bad token in command line format")]
    BadToken,
    /// `M` with other than one character.
    #[error("CLIENT_ERROR incorrect length for M token")]
    ModeLength,
    /// A bad `J` value.
    #[error("CLIENT_ERROR invalid numeric initial value")]
    Initial,
    /// A bad `D` value.
    #[error("CLIENT_ERROR invalid numeric delta value")]
    Delta,
    /// An opaque token over [`OPAQUE_MAX`] bytes.
    #[error("CLIENT_ERROR opaque token too long")]
    OpaqueTooLong,
    /// An unknown `ms` mode.
    #[error("CLIENT_ERROR invalid mode for ms M token")]
    SetMode,
    /// An unknown `ma` mode.
    #[error("CLIENT_ERROR invalid mode for ma M token")]
    ArithMode,
}

impl MetaError {
    /// The reply line, with `\r\n`.
    pub fn line(self) -> &'static [u8] {
        match self {
            MetaError::Unknown => replies::ERROR,
            MetaError::BadFormat => replies::BAD_FORMAT,
            MetaError::GetFlagsTooLong => b"CLIENT_ERROR options flags are too long\r\n",
            MetaError::FlagsTooLong => b"CLIENT_ERROR options flags too long\r\n",
            MetaError::Duplicate => b"CLIENT_ERROR duplicate flag\r\n",
            MetaError::InvalidFlag => b"CLIENT_ERROR invalid flag\r\n",
            MetaError::InvalidOrDuplicate => b"CLIENT_ERROR invalid or duplicate flag\r\n",
            MetaError::Decode => b"CLIENT_ERROR error decoding key\r\n",
            MetaError::BadToken => b"CLIENT_ERROR bad token in command line format\r\n",
            MetaError::ModeLength => b"CLIENT_ERROR incorrect length for M token\r\n",
            MetaError::Initial => b"CLIENT_ERROR invalid numeric initial value\r\n",
            MetaError::Delta => b"CLIENT_ERROR invalid numeric delta value\r\n",
            MetaError::OpaqueTooLong => b"CLIENT_ERROR opaque token too long\r\n",
            MetaError::SetMode => b"CLIENT_ERROR invalid mode for ms M token\r\n",
            MetaError::ArithMode => b"CLIENT_ERROR invalid mode for ma M token\r\n",
        }
    }
}

/// What the flag pre-parse found besides the request fields.
#[derive(Default)]
struct Pre {
    mode: Option<u8>,
    /// An error that lets the pre-parse go on to the end: memcached
    /// reports the message of the last flag that set one.
    error: Option<MetaError>,
}

/// The tokens of a line split on spaces, and memcached's token count: at
/// most 23 tokens, plus its empty terminator.
pub(super) fn tokens(line: &[u8]) -> (Vec<&[u8]>, usize) {
    let all: Vec<&[u8]> = line.split(|&b| b == b' ').filter(|t| !t.is_empty()).collect();
    let n = all.len().min(MAX_TOKENS - 1);
    // memcached's count includes the terminator.
    (all, n + 1)
}

/// memcached's `_meta_flag_preparse` over `toks[start..]`, filling `op`.
fn preparse(toks: &[&[u8]], start: usize, op: &mut MetaOp) -> Result<Pre, MetaError> {
    let mut seen = [false; 128];
    let mut pre = Pre::default();
    let fail = |pre: &mut Pre, e: MetaError| pre.error = Some(e);
    for tok in toks.iter().skip(start) {
        let o = tok[0];
        if o >= 127 || seen[usize::from(o)] {
            return Err(MetaError::Duplicate);
        }
        seen[usize::from(o)] = true;
        let arg = &tok[1..];
        match o {
            b'b' => {
                op.key_binary = true;
                match base64::decode(&op.key) {
                    Some(k) => op.key = k,
                    None => {
                        op.key.clear();
                        fail(&mut pre, MetaError::Decode);
                    }
                }
            }
            b'N' => match safe_strtol(arg) {
                Some(t) => {
                    op.vivify = Some(i64::from(t));
                    op.flags.push(MetaFlag::Vivify);
                }
                None => fail(&mut pre, MetaError::BadToken),
            },
            b'T' => match safe_strtol(arg) {
                Some(t) => {
                    op.ttl = Some(i64::from(t));
                    op.flags.push(MetaFlag::SetTtl);
                }
                None => fail(&mut pre, MetaError::BadToken),
            },
            b'R' => match safe_strtol(arg) {
                Some(t) => {
                    op.recache = Some(i64::from(t));
                    op.flags.push(MetaFlag::Recache);
                }
                None => fail(&mut pre, MetaError::BadToken),
            },
            b'l' => op.flags.push(MetaFlag::LastAccess),
            b'h' => op.flags.push(MetaFlag::Hit),
            b'O' => op.flags.push(MetaFlag::Opaque(tok.to_vec())),
            b'P' | b'L' => {}
            b'k' => op.flags.push(MetaFlag::Key),
            b's' => op.flags.push(MetaFlag::Size),
            b't' => op.flags.push(MetaFlag::Ttl),
            b'c' => op.flags.push(MetaFlag::Cas),
            b'f' => op.flags.push(MetaFlag::Flags),
            b'v' => op.value = true,
            b'u' => op.no_update = true,
            b'q' => op.quiet = true,
            b'F' => match safe_strtoul(arg) {
                Some(f) => op.client_flags = f,
                // memcached flags the error but keeps the message so far.
                None => pre.error = Some(pre.error.unwrap_or(MetaError::BadFormat)),
            },
            b'C' => match safe_strtoull(arg) {
                Some(c) => op.cas = Some(c),
                None => fail(&mut pre, MetaError::BadToken),
            },
            b'M' => {
                if tok.len() != 2 {
                    fail(&mut pre, MetaError::ModeLength);
                } else {
                    pre.mode = Some(tok[1]);
                }
            }
            b'J' => match safe_strtoull(arg) {
                Some(j) => op.initial = j,
                None => fail(&mut pre, MetaError::Initial),
            },
            b'D' => match safe_strtoull(arg) {
                Some(d) => op.delta = d,
                None => fail(&mut pre, MetaError::Delta),
            },
            b'I' => op.invalidate = true,
            _ => return Err(MetaError::InvalidFlag),
        }
    }
    Ok(pre)
}

/// Fails with the error the pre-parse went on past, if any.
fn merge(pre: Pre) -> Result<Pre, MetaError> {
    match pre.error {
        Some(e) => Err(e),
        None => Ok(pre),
    }
}

fn opaque_too_long(op: &MetaOp) -> bool {
    op.flags.iter().any(|f| matches!(f, MetaFlag::Opaque(o) if o.len() > OPAQUE_MAX))
}

/// Parses a meta command whose line is `line` (without `\r\n`), taking
/// `consumed` bytes of `buf` so far; `None` when an `ms` value is not all
/// there yet.
pub fn parse<'a>(buf: &'a [u8], line: &[u8], consumed: usize, limits: &Limits) -> Option<Parsed<'a>> {
    let line = c_str(line);
    let (toks, ntokens) = tokens(line);
    let done = |command: Command<'a>| Some(Parsed { command, consumed, swallow: 0 });
    let refuse = |e: MetaError| done(Command::Reply { text: e.line(), noreply: false });
    if toks.first().is_none_or(|t| t.len() != 2) {
        // A NUL byte cut the command name short.
        return refuse(MetaError::Unknown);
    }
    let which = toks[0][1];
    if which == b'n' {
        return done(Command::Meta(MetaCommand::NoOp));
    }
    if !matches!(which, b'g' | b's' | b'd' | b'a' | b'e') {
        return refuse(MetaError::Unknown);
    }
    if which == b'e' {
        return done(debug(&toks, ntokens).map_or_else(
            |e| Command::Reply { text: e.line(), noreply: false },
            |op| Command::Meta(MetaCommand::Op(Box::new(op))),
        ));
    }
    if ntokens < 3 {
        return refuse(MetaError::Unknown);
    }
    if toks[1].len() > KEY_MAX {
        return refuse(MetaError::BadFormat);
    }
    if which == b's' {
        return set(buf, &toks, ntokens, consumed, limits);
    }
    if ntokens > MAX_OPT_TOKENS {
        return refuse(if which == b'g' { MetaError::GetFlagsTooLong } else { MetaError::FlagsTooLong });
    }
    let kind = match which {
        b'g' => MetaKind::Get,
        b'd' => MetaKind::Delete,
        _ => MetaKind::Arith { incr: true },
    };
    let mut op = MetaOp::new(kind, toks[1].to_vec());
    let pre = match preparse(&toks, 2, &mut op).and_then(merge) {
        Ok(p) => p,
        Err(e) => return refuse(if which == b'g' { e } else { MetaError::InvalidOrDuplicate }),
    };
    match which {
        b'd' if opaque_too_long(&op) => return refuse(MetaError::OpaqueTooLong),
        b'a' => {
            op.kind = MetaKind::Arith {
                incr: match pre.mode {
                    None | Some(b'I' | b'+') => true,
                    Some(b'D' | b'-') => false,
                    Some(_) => return refuse(MetaError::ArithMode),
                },
            }
        }
        _ => {}
    }
    done(Command::Meta(MetaCommand::Op(Box::new(op))))
}

/// `me <key> [b]`.
fn debug(toks: &[&[u8]], ntokens: usize) -> Result<MetaOp, MetaError> {
    if ntokens < 3 || toks[1].len() > KEY_MAX {
        return Err(MetaError::BadFormat);
    }
    let mut op = MetaOp::new(MetaKind::Debug, toks[1].to_vec());
    if ntokens >= 4 && toks[2] == b"b" {
        op.key = base64::decode(&op.key).ok_or(MetaError::BadFormat)?;
        op.key_binary = true;
    }
    Ok(op)
}

/// `ms <key> <datalen> <flags>*` and its value.
fn set<'a>(buf: &'a [u8], toks: &[&[u8]], ntokens: usize, consumed: usize, limits: &Limits) -> Option<Parsed<'a>> {
    let refuse = |e: MetaError, swallow: usize| {
        Some(Parsed { command: Command::Reply { text: e.line(), noreply: false }, consumed, swallow })
    };
    if ntokens == 3 {
        return refuse(MetaError::BadFormat, 0);
    }
    if ntokens > MAX_OPT_TOKENS {
        return refuse(MetaError::FlagsTooLong, 0);
    }
    let vlen = match safe_strtol(toks[2]) {
        Some(v) if (0..=i32::MAX - 2).contains(&v) => v as usize,
        _ => return refuse(MetaError::BadFormat, 0),
    };
    let total = vlen + 2;
    // The kind is settled once the value is there.
    let mut op = MetaOp::new(MetaKind::BadChunk, toks[1].to_vec());
    let pre = match preparse(toks, 3, &mut op).and_then(merge) {
        Ok(p) => p,
        Err(e) => return refuse(e, total),
    };
    let mode = match pre.mode {
        None | Some(b'S') => StoreMode::Set,
        Some(b'E') => StoreMode::Add,
        Some(b'A') => StoreMode::Append,
        Some(b'P') => StoreMode::Prepend,
        Some(b'R') => StoreMode::Replace,
        Some(_) => return refuse(MetaError::SetMode, total),
    };
    if opaque_too_long(&op) {
        return refuse(MetaError::OpaqueTooLong, total);
    }
    // A CAS value turns set and replace into cas.
    let mode =
        if op.cas.is_some() && matches!(mode, StoreMode::Set | StoreMode::Replace) { StoreMode::Cas } else { mode };
    if !item_size_ok(op.key.len(), op.client_flags, vlen, limits.item_size_max) {
        let command = Command::Meta(MetaCommand::TooLarge { key: op.key });
        return Some(Parsed { command, consumed, swallow: total });
    }
    if buf.len() < consumed + total {
        return None;
    }
    let block = &buf[consumed..consumed + total];
    op.kind = if &block[vlen..] == b"\r\n" {
        MetaKind::Set { mode, data: block[..vlen].to_vec() }
    } else {
        MetaKind::BadChunk
    };
    Some(Parsed { command: Command::Meta(MetaCommand::Op(Box::new(op))), consumed: consumed + total, swallow: 0 })
}

#[cfg(test)]
mod tests;
