//! Parsing of the administrative text commands: `stats detail`, `watch`,
//! `slabs automove|reassign`, `shutdown` and `stats sizes_enable|disable`,
//! with memcached 1.6.18's token rules and error replies.

use super::command::Command;
use super::parse::replies;
use crate::numeric::{c_str, safe_strtol, safe_strtoul};

/// memcached's log types that `watch` takes, as bits of a mask.
pub mod log {
    /// Background events (`sysevents`).
    pub const SYSEVENTS: u16 = 1 << 1;
    /// Item lookups (`fetchers`).
    pub const FETCHERS: u16 = 1 << 2;
    /// Stores (`mutations`).
    pub const MUTATIONS: u16 = 1 << 3;
    /// Connections opened and closed (`connevents`).
    pub const CONNEVENTS: u16 = 1 << 5;
    /// Items evicted (`evictions`).
    pub const EVICTIONS: u16 = 1 << 6;
    /// Raw commands (`rawcmds`).
    pub const RAWCMDS: u16 = 1 << 9;
    /// Proxy requests (`proxyreqs`).
    pub const PROXYREQS: u16 = 1 << 10;
    /// Proxy events (`proxyevents`).
    pub const PROXYEVENTS: u16 = 1 << 11;
    /// Proxy user logs (`proxyuser`).
    pub const PROXYUSER: u16 = 1 << 12;

    /// The bit of a log type name.
    pub fn by_name(name: &[u8]) -> Option<u16> {
        Some(match name {
            b"rawcmds" => RAWCMDS,
            b"evictions" => EVICTIONS,
            b"fetchers" => FETCHERS,
            b"mutations" => MUTATIONS,
            b"sysevents" => SYSEVENTS,
            b"connevents" => CONNEVENTS,
            b"proxyreqs" => PROXYREQS,
            b"proxyevents" => PROXYEVENTS,
            b"proxyuser" => PROXYUSER,
            _ => return None,
        })
    }
}

/// What `stats detail` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Start counting per prefix.
    On,
    /// Stop counting (the counts stay).
    Off,
    /// List the counts.
    Dump,
}

/// An administrative command that needs the server's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admin<'a> {
    /// `stats detail on|off|dump`.
    Detail(Detail),
    /// `watch [types...]`: stream log lines of these types.
    Watch {
        /// The log types, a mask of [`log`] bits.
        mask: u16,
    },
    /// `slabs automove <0|1|2>`.
    Automove {
        /// The level.
        level: u32,
    },
    /// `slabs automove ratio <ratio>` (the token, a valid number).
    AutomoveRatio {
        /// The ratio as sent.
        ratio: &'a [u8],
    },
    /// `slabs reassign <src> <dst>`: the classes, or `None` when they do
    /// not parse (memcached first checks that reassignment is enabled).
    Reassign {
        /// Source and destination class.
        classes: Option<(i32, i32)>,
    },
    /// `shutdown` or `shutdown graceful`; `None` for any other mode.
    Shutdown {
        /// `graceful`, or `None` for an invalid mode.
        graceful: Option<bool>,
    },
    /// `stats sizes_enable` / `stats sizes_disable`.
    TrackSizes {
        /// Enable (true) or disable.
        on: bool,
    },
}

/// The tokens of `line` as memcached's tokenizer sees them (split on
/// single spaces, each cut at a NUL byte).
fn words(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&b| b == b' ').filter(|w| !w.is_empty()).map(c_str).collect()
}

fn reply(text: &'static [u8], noreply: bool) -> Command<'static> {
    Command::Reply { text, noreply }
}

fn admin(cmd: Admin<'_>, noreply: bool) -> Command<'_> {
    Command::Admin { cmd, noreply }
}

/// `stats detail ...` (the line starts with `stats detail`).
pub fn stats_detail(line: &[u8]) -> Command<'_> {
    let w = words(line);
    match w.get(2).copied() {
        Some(b"on") => admin(Admin::Detail(Detail::On), false),
        Some(b"off") => admin(Admin::Detail(Detail::Off), false),
        Some(b"dump") => admin(Admin::Detail(Detail::Dump), false),
        _ => reply(replies::DETAIL_USAGE, false),
    }
}

/// `stats sizes_enable|sizes_disable` (exactly one argument).
pub fn stats_sizes(on: bool) -> Command<'static> {
    admin(Admin::TrackSizes { on }, false)
}

/// Whether the last token is `noreply` (memcached's `set_noreply_maybe`).
fn noreply(w: &[&[u8]]) -> bool {
    w.last().is_some_and(|t| *t == b"noreply")
}

/// `watch [type ...]`.
pub fn watch(line: &[u8]) -> Command<'_> {
    let w = words(line);
    let noreply = noreply(&w);
    if w.len() < 2 {
        return admin(Admin::Watch { mask: log::FETCHERS }, noreply);
    }
    let mut mask = 0;
    for t in &w[1..] {
        match log::by_name(t) {
            Some(bit) => mask |= bit,
            None => return reply(replies::ERROR, noreply),
        }
    }
    admin(Admin::Watch { mask }, noreply)
}

/// memcached's `safe_strtod`: a number followed by the end or a space.
pub fn safe_strtod(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    let trimmed = text.trim_start_matches(|c: char| c.is_ascii() && crate::numeric::is_c_space(c as u8));
    if trimmed.is_empty() {
        return None;
    }
    let v = trimmed.parse::<f64>().ok()?;
    // strtod reports overflow (ERANGE); only "inf" and "infinity" are infinite.
    if v.is_infinite() && !trimmed.trim_start_matches(['+', '-']).to_ascii_lowercase().starts_with("inf") {
        return None;
    }
    Some(v)
}

/// `slabs ...`.
pub fn slabs(line: &[u8]) -> Command<'_> {
    let w = words(line);
    match (w.len(), w.get(1).copied()) {
        (4, Some(b"reassign")) => {
            let classes = safe_strtol(w[2]).zip(safe_strtol(w[3]));
            admin(Admin::Reassign { classes }, false)
        }
        (n, Some(b"automove")) if n >= 3 => {
            let noreply = noreply(&w);
            if w[2] == b"ratio" {
                return match w.get(3) {
                    Some(r) if safe_strtod(r).is_some() => admin(Admin::AutomoveRatio { ratio: r }, noreply),
                    _ => reply(replies::ERROR, noreply),
                };
            }
            match safe_strtoul(w[2]) {
                None => reply(replies::BAD_FORMAT, noreply),
                Some(level @ 0..=2) => admin(Admin::Automove { level }, noreply),
                Some(_) => reply(replies::ERROR, noreply),
            }
        }
        _ => reply(replies::ERROR, false),
    }
}

/// `shutdown [graceful]`.
pub fn shutdown(line: &[u8]) -> Command<'_> {
    let w = words(line);
    let graceful = match &w[1..] {
        [] => Some(false),
        [b"graceful"] => Some(true),
        _ => None,
    };
    admin(Admin::Shutdown { graceful }, false)
}

#[cfg(test)]
mod tests;
