//! `gossamer top` and the properties that follow their requests
//! (`MigrationPolicy::Follow`): the program's `follow` answer, read as
//! bytes from another process, with checks; the FOLLOW table; and the
//! `follow ID …` command that `--set-follow` sends, checked before it
//! leaves.

use std::fmt::Write as _;

use crate::top::{parse_rows, TopError};
use crate::CliError;

/// The parameters of the policy, in the order the program lists them.
pub const KEYS: [&str; 5] = ["window", "window_ms", "share_percent", "return_percent", "rest_windows"];

/// Rows in one `follow` answer at most (the program lists at most 10,000
/// and counts the rest on a `more` line).
const MAX_ROWS: usize = 10_000;

/// One property that follows its requests, as the program reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowRow {
    /// Its id (as in the trust table).
    pub id: u64,
    /// The trustee that holds its value now.
    pub holder: usize,
    /// Whether it follows now (`false`: paused with `--set-follow ID=off`).
    pub on: bool,
    /// How often it has moved since it was given the policy.
    pub moves: u64,
    /// Its parameters, in the order of [`KEYS`].
    pub params: [u64; 5],
}

/// The answer to `follow`: its rows, and how many the program left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FollowList {
    /// Per property that follows.
    pub rows: Vec<FollowRow>,
    /// Properties beyond those listed.
    pub more: u64,
}

fn number(n: usize, what: &str, s: &str) -> Result<u64, TopError> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TopError::BadLine { line: n, reason: format!("{what} {:?} is not a number", clip(s)) });
    }
    s.parse().map_err(|_| TopError::BadLine { line: n, reason: format!("{what} {:?} is too large", clip(s)) })
}

fn clip(s: &str) -> String {
    s.chars().take(20).collect()
}

/// Parses one `follow ID HOLDER on|off MOVES KEY=V …` line (after `follow `).
fn parse_row(n: usize, rest: &str) -> Result<FollowRow, TopError> {
    let bad = |reason: String| TopError::BadLine { line: n, reason };
    let f: Vec<&str> = rest.split(' ').collect();
    let [id, holder, on, moves, p0, p1, p2, p3, p4] = f[..] else {
        return Err(bad(format!("expected: follow ID HOLDER on|off MOVES {}=…", KEYS.join("=… "))));
    };
    let id = (!id.is_empty() && id.len() <= 16)
        .then(|| u64::from_str_radix(id, 16).ok())
        .flatten()
        .ok_or_else(|| bad(format!("id {:?} is not hexadecimal", clip(id))))?;
    let on = match on {
        "on" => true,
        "off" => false,
        other => return Err(bad(format!("{:?} is neither on nor off", clip(other)))),
    };
    let mut params = [0u64; 5];
    for ((slot, key), pair) in params.iter_mut().zip(KEYS).zip([p0, p1, p2, p3, p4]) {
        let v = pair
            .strip_prefix(key)
            .and_then(|v| v.strip_prefix('='))
            .ok_or_else(|| bad(format!("expected {key}=…, found {:?}", clip(pair))))?;
        *slot = number(n, key, v)?;
    }
    let holder = usize::try_from(number(n, "holder", holder)?).map_err(|_| bad("holder too large".into()))?;
    Ok(FollowRow { id, holder, on, moves: number(n, "moves", moves)?, params })
}

/// Parses one answer to `follow` (the whole text, `end` line included).
pub fn parse_follow(text: &str) -> Result<FollowList, TopError> {
    let (rows, more) = parse_rows(text, "follow", MAX_ROWS, parse_row)?;
    Ok(FollowList { rows, more })
}

/// The properties that follow, at most `limit` of them: id, holder, on or
/// off, moves and parameters.
pub fn render_follow(list: &FollowList, limit: usize) -> String {
    let mut s = String::new();
    if list.rows.is_empty() && list.more == 0 {
        return s;
    }
    let _ = writeln!(
        s,
        "\n{:<16} {:>6} {:<3} {:>6} {:>7} {:>9} {:>5} {:>6} {:>4}",
        "FOLLOW", "HOLDER", "ON", "MOVES", "WINDOW", "WINDOW_MS", "SHARE", "RETURN", "REST"
    );
    for r in list.rows.iter().take(limit) {
        let [w, ms, share, ret, rest] = r.params;
        let _ = writeln!(
            s,
            "{:<16} {:>6} {:<3} {:>6} {w:>7} {ms:>9} {share:>4}% {ret:>5}% {rest:>4}",
            format!("{:#x}", r.id),
            r.holder,
            if r.on { "on" } else { "off" },
            r.moves,
        );
    }
    let hidden = list.rows.len().saturating_sub(limit) as u64 + list.more;
    if hidden > 0 {
        let _ = writeln!(s, "… and {hidden} more properties that follow");
    }
    s
}

/// The socket command for `--set-follow TRUST_ID=CHANGES`: the id in
/// hexadecimal as the table shows it (`0x` optional), and a
/// comma-separated list of `on`, `off` and `KEY=NUMBER` (e.g.
/// `0x7f3a10=off`, `0x7f3a10=on,window=256,share_percent=70`). The program
/// checks the bounds, with the property's other parameters.
pub fn follow_command(value: &str) -> Result<String, CliError> {
    let usage = || {
        CliError::Usage(format!(
            "--set-follow {value:?}: expected TRUST_ID=CHANGES, with the id as the FOLLOW table shows it (e.g. \
             0x7f3a10) and CHANGES a comma-separated list of on, off and KEY=NUMBER, KEY one of {}",
            KEYS.join(", ")
        ))
    };
    let (id, changes) = value.trim().split_once('=').ok_or_else(usage)?;
    let digits = id.strip_prefix("0x").unwrap_or(id);
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(usage());
    }
    let mut cmd = format!("follow {digits}");
    let (mut switch, mut keys) = (false, Vec::new());
    for item in changes.split(',') {
        match item.split_once('=') {
            None if (item == "on" || item == "off") && !switch && keys.is_empty() => switch = true,
            Some((k, v))
                if KEYS.contains(&k)
                    && !keys.contains(&k)
                    && !v.is_empty()
                    && v.len() <= 20
                    && v.bytes().all(|b| b.is_ascii_digit()) =>
            {
                keys.push(k)
            }
            _ => return Err(usage()),
        }
        cmd.push(' ');
        cmd.push_str(item);
    }
    Ok(cmd)
}

impl crate::top::Conn {
    /// Reads the program's properties that follow their requests.
    pub fn follow(&mut self) -> Result<FollowList, CliError> {
        Ok(parse_follow(&self.ask("follow", true)?)?)
    }
}
