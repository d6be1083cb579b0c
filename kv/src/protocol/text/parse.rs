//! Parser for memcached's text protocol.
//!
//! [`parse`] takes the unread input of a connection and returns the first
//! complete command (with its data block, for stores), or `None` when more
//! input is needed. It follows memcached 1.6's `proto_text.c`: tokens split
//! on single spaces, dispatch on the first letter, the same token-count
//! checks, the same error lines, and the same treatment of a line that is
//! too long to be a command.

use super::admin;
use super::command::{Command, LruCommand, Parsed, StatsKind};
use crate::numeric::{c_str, safe_strtol, safe_strtoul, safe_strtoull};
use crate::store::{item_size_ok, StoreMode, KEY_MAX};

/// Without a newline in this many bytes, the input must be a large
/// multi-get, or the connection is closed.
pub const LINE_SEARCH_LIMIT: usize = 2048;

/// The longest multi-get line accepted.
pub const GET_LINE_MAX: usize = 8 << 20;

/// Tokens looked at individually (commands have at most 8).
const MAX_TOKENS: usize = 8;

/// Limits that shape parsing.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest item (`-I`).
    pub item_size_max: usize,
}

/// Replies the parser gives itself.
pub mod replies {
    /// Unknown command or wrong token count.
    pub const ERROR: &[u8] = b"ERROR\r\n";
    /// Malformed arguments.
    pub const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
    /// The data block did not end in `\r\n`.
    pub const BAD_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
    /// A bad expiration time for touch, gat and flush_all.
    pub const BAD_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
    /// A bad incr/decr amount.
    pub const BAD_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
    /// delete with arguments memcached no longer takes.
    pub const DELETE_USAGE: &[u8] = b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
    /// `stats detail` without a valid argument.
    pub const DETAIL_USAGE: &[u8] = b"CLIENT_ERROR usage: stats detail on|off|dump\r\n";
    /// `shutdown` (not enabled).
    pub const SHUTDOWN: &[u8] = b"ERROR: shutdown not enabled\r\n";
    /// Success without data.
    pub const OK: &[u8] = b"OK\r\n";
    /// End of a list.
    pub const END: &[u8] = b"END\r\n";
    /// Meta no-op.
    pub const MN: &[u8] = b"MN\r\n";
}

/// Up to [`MAX_TOKENS`] tokens of a line with their offsets, and the total
/// number of tokens.
struct Tokens<'a> {
    line: &'a [u8],
    tok: [&'a [u8]; MAX_TOKENS],
    at: [usize; MAX_TOKENS],
    n: usize,
}

impl<'a> Tokens<'a> {
    fn new(line: &'a [u8]) -> Tokens<'a> {
        let mut t = Tokens { line, tok: [&[][..]; MAX_TOKENS], at: [0; MAX_TOKENS], n: 0 };
        let mut i = 0;
        while i < line.len() {
            if line[i] == b' ' {
                i += 1;
                continue;
            }
            let start = i;
            i = memchr::memchr(b' ', &line[start..]).map_or(line.len(), |j| start + j);
            if t.n < MAX_TOKENS {
                t.tok[t.n] = &line[start..i];
                t.at[t.n] = start;
            }
            t.n += 1;
        }
        t
    }

    /// Token `i` (empty past the stored ones).
    fn get(&self, i: usize) -> &'a [u8] {
        if i < self.n.min(MAX_TOKENS) {
            self.tok[i]
        } else {
            &[]
        }
    }

    /// The line from token `i` on.
    fn rest(&self, i: usize) -> &'a [u8] {
        if i < self.n.min(MAX_TOKENS) {
            &self.line[self.at[i]..]
        } else {
            &[]
        }
    }

    /// The last token, as memcached's `set_noreply_maybe` sees it.
    fn noreply(&self) -> bool {
        self.n > 0 && self.n <= MAX_TOKENS && c_str(self.tok[self.n - 1]) == b"noreply"
    }

    /// The last token (only when all tokens were stored).
    fn last(&self) -> &'a [u8] {
        if self.n > 0 && self.n <= MAX_TOKENS {
            self.tok[self.n - 1]
        } else {
            &[]
        }
    }
}

fn reply(text: &'static [u8], noreply: bool) -> Command<'static> {
    Command::Reply { text, noreply }
}

/// Parses the first command in `buf`, or returns `None` if it is not
/// complete yet.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Option<Parsed<'a>> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        if buf.len() > LINE_SEARCH_LIMIT {
            let spaces = buf.iter().take_while(|&&b| b == b' ').count();
            let rest = &buf[spaces..];
            let multiget = rest.starts_with(b"get ") || rest.starts_with(b"gets ");
            if spaces > 100 || !multiget || buf.len() > GET_LINE_MAX {
                return Some(Parsed { command: Command::Close, consumed: buf.len(), swallow: 0 });
            }
        }
        return None;
    };
    let mut end = nl;
    if end > 1 && buf[end - 1] == b'\r' {
        end -= 1;
    }
    let consumed = nl + 1;
    let t = Tokens::new(&buf[..end]);
    let done = |command| Some(Parsed { command, consumed, swallow: 0 });

    let cmd = t.get(0);
    if t.n == 0 || cmd.len() < 2 {
        return done(reply(replies::ERROR, false));
    }
    let name = c_str(cmd);
    let n = t.n;
    match cmd[0] {
        b'm' if cmd.len() == 2 => super::meta::parse(buf, &buf[..end], consumed, limits),
        b'g' => {
            if n < 2 {
                return done(reply(replies::ERROR, false));
            }
            match name {
                b"get" => done(get(&t, 1, false, None)),
                b"gets" => done(get(&t, 1, true, None)),
                b"gat" | b"gats" => match safe_strtol(t.get(1)) {
                    Some(exptime) => done(get(&t, 2, name == b"gats", Some(exptime))),
                    None => done(reply(replies::BAD_EXPTIME, false)),
                },
                _ => done(reply(replies::ERROR, false)),
            }
        }
        b's' => match name {
            b"set" => storage(buf, consumed, &t, StoreMode::Set, limits),
            b"stats" => done(stats(&t)),
            b"shutdown" => done(admin::shutdown(t.line)),
            b"slabs" => done(admin::slabs(t.line)),
            _ => done(reply(replies::ERROR, false)),
        },
        b'a' => match name {
            b"add" => storage(buf, consumed, &t, StoreMode::Add, limits),
            b"append" => storage(buf, consumed, &t, StoreMode::Append, limits),
            _ => done(reply(replies::ERROR, false)),
        },
        b'c' => match name {
            b"cas" => storage(buf, consumed, &t, StoreMode::Cas, limits),
            b"cache_memlimit" => done(super::lru::memlimit(&buf[..end])),
            _ => done(reply(replies::ERROR, false)),
        },
        b'r' => match name {
            b"replace" => storage(buf, consumed, &t, StoreMode::Replace, limits),
            _ => done(reply(replies::ERROR, false)),
        },
        b'p' => match name {
            b"prepend" => storage(buf, consumed, &t, StoreMode::Prepend, limits),
            _ => done(reply(replies::ERROR, false)),
        },
        b'i' => match name {
            b"incr" => done(arith(&t, true)),
            _ => done(reply(replies::ERROR, false)),
        },
        b'd' => match name {
            b"delete" => done(delete(&t)),
            b"decr" => done(arith(&t, false)),
            _ => done(reply(replies::ERROR, false)),
        },
        b't' => match name {
            b"touch" => done(touch(&t)),
            _ => done(reply(replies::ERROR, false)),
        },
        _ => match name {
            b"flush_all" => done(flush_all(&t)),
            b"version" => done(Command::Version),
            b"quit" => done(Command::Quit),
            b"verbosity" => done(verbosity(&t)),
            b"lru_crawler" => done(super::lru::lru_crawler(&buf[..end])),
            b"watch" => done(admin::watch(t.line)),
            _ if c_str(t.last()).starts_with(b"HTTP/") => done(Command::Close),
            _ => done(reply(replies::ERROR, false)),
        },
    }
}

fn get<'a>(t: &Tokens<'a>, first_key: usize, cas: bool, touch: Option<i32>) -> Command<'a> {
    let keys = t.rest(first_key);
    if keys.split(|&b| b == b' ').any(|k| k.len() > KEY_MAX) {
        return reply(replies::BAD_FORMAT, false);
    }
    Command::Get { keys, cas, touch }
}

fn storage<'a>(buf: &'a [u8], consumed: usize, t: &Tokens<'a>, mode: StoreMode, limits: &Limits) -> Option<Parsed<'a>> {
    let cas_cmd = mode == StoreMode::Cas;
    let (lo, hi) = if cas_cmd { (6, 7) } else { (5, 6) };
    let done = |command| Some(Parsed { command, consumed, swallow: 0 });
    if t.n < lo || t.n > hi {
        return done(reply(replies::ERROR, false));
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > KEY_MAX {
        return done(reply(replies::BAD_FORMAT, noreply));
    }
    let (Some(flags), Some(exptime), Some(vlen)) =
        (safe_strtoul(t.get(2)), safe_strtol(t.get(3)), safe_strtol(t.get(4)))
    else {
        return done(reply(replies::BAD_FORMAT, noreply));
    };
    let cas = if cas_cmd {
        match safe_strtoull(t.get(5)) {
            Some(c) => c,
            None => return done(reply(replies::BAD_FORMAT, noreply)),
        }
    } else {
        0
    };
    if !(0..=i32::MAX - 2).contains(&vlen) {
        return done(reply(replies::BAD_FORMAT, noreply));
    }
    let vlen = vlen as usize;
    let total = vlen + 2;
    if !item_size_ok(key.len(), flags, vlen, limits.item_size_max) {
        let command = Command::TooLarge { key, unlink: mode == StoreMode::Set, noreply };
        return Some(Parsed { command, consumed, swallow: total });
    }
    if buf.len() < consumed + total {
        return None;
    }
    let block = &buf[consumed..consumed + total];
    let command = if &block[vlen..] == b"\r\n" {
        Command::Store { mode, key, flags, exptime, cas, data: &block[..vlen], noreply }
    } else {
        reply(replies::BAD_CHUNK, noreply)
    };
    Some(Parsed { command, consumed: consumed + total, swallow: 0 })
}

fn delete<'a>(t: &Tokens<'a>) -> Command<'a> {
    if !(2..=4).contains(&t.n) {
        return reply(replies::ERROR, false);
    }
    let mut noreply = false;
    if t.n > 2 {
        let hold_is_zero = c_str(t.get(2)) == b"0";
        noreply = t.noreply();
        let valid = (t.n == 3 && (hold_is_zero || noreply)) || (t.n == 4 && hold_is_zero && noreply);
        if !valid {
            return reply(replies::DELETE_USAGE, noreply);
        }
    }
    let key = t.get(1);
    if key.len() > KEY_MAX {
        return reply(replies::BAD_FORMAT, noreply);
    }
    Command::Delete { key, noreply }
}

fn arith<'a>(t: &Tokens<'a>, incr: bool) -> Command<'a> {
    if !(3..=4).contains(&t.n) {
        return reply(replies::ERROR, false);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > KEY_MAX {
        return reply(replies::BAD_FORMAT, noreply);
    }
    match safe_strtoull(t.get(2)) {
        Some(delta) => Command::Arith { key, incr, delta, noreply },
        None => reply(replies::BAD_DELTA, noreply),
    }
}

fn touch<'a>(t: &Tokens<'a>) -> Command<'a> {
    if !(3..=4).contains(&t.n) {
        return reply(replies::ERROR, false);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > KEY_MAX {
        return reply(replies::BAD_FORMAT, noreply);
    }
    match safe_strtol(t.get(2)) {
        Some(exptime) => Command::Touch { key, exptime, noreply },
        None => reply(replies::BAD_EXPTIME, noreply),
    }
}

fn flush_all<'a>(t: &Tokens<'a>) -> Command<'a> {
    if !(1..=3).contains(&t.n) {
        return reply(replies::ERROR, false);
    }
    let noreply = t.noreply();
    let mut delay = 0;
    if t.n != if noreply { 2 } else { 1 } {
        match safe_strtol(t.get(1)) {
            Some(d) => delay = d,
            None => return reply(replies::BAD_EXPTIME, noreply),
        }
    }
    Command::FlushAll { delay, noreply }
}

fn verbosity<'a>(t: &Tokens<'a>) -> Command<'a> {
    if !(2..=3).contains(&t.n) {
        return reply(replies::ERROR, false);
    }
    let noreply = t.noreply();
    match safe_strtoul(t.get(1)) {
        Some(level) => Command::Verbosity { level: level.min(2), noreply },
        None => reply(replies::BAD_FORMAT, noreply),
    }
}

fn stats<'a>(t: &Tokens<'a>) -> Command<'a> {
    if t.n == 1 {
        return Command::Stats(StatsKind::General);
    }
    match c_str(t.get(1)) {
        b"reset" => Command::Stats(StatsKind::Reset),
        b"settings" => Command::Stats(StatsKind::Settings),
        b"items" => Command::Stats(StatsKind::Items),
        b"slabs" => Command::Stats(StatsKind::Slabs),
        b"sizes" => Command::Stats(StatsKind::Sizes),
        b"conns" => Command::Stats(StatsKind::Conns),
        b"process" => match std::str::from_utf8(t.get(2)).ok().and_then(|r| r.parse().ok()) {
            Some(rank) if t.n == 3 => Command::Stats(StatsKind::Process(rank)),
            _ => reply(replies::BAD_FORMAT, false),
        },
        b"detail" => admin::stats_detail(t.line),
        b"cachedump" => cachedump(t),
        b"sizes_enable" if t.n == 2 => admin::stats_sizes(true),
        b"sizes_disable" if t.n == 2 => admin::stats_sizes(false),
        _ => reply(replies::ERROR, false),
    }
}

/// Slab classes memcached can have (`MAX_NUMBER_OF_SLAB_CLASSES`).
const SLAB_CLASSES: u32 = 64;

/// `stats cachedump <class> <limit>`, with memcached's checks in its
/// order (extra tokens are ignored).
fn cachedump(t: &Tokens<'_>) -> Command<'static> {
    if t.n < 4 {
        return reply(b"CLIENT_ERROR bad command line\r\n", false);
    }
    match (safe_strtoul(t.get(2)), safe_strtoul(t.get(3))) {
        (Some(class), _) if class >= SLAB_CLASSES => reply(b"CLIENT_ERROR Illegal slab id\r\n", false),
        (Some(class), Some(limit)) => Command::Lru(LruCommand::CacheDump { class, limit }),
        _ => reply(replies::BAD_FORMAT, false),
    }
}

#[cfg(test)]
mod tests;
