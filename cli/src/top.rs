//! `gossamer top`: the hottest trusts and trustees of a running program.
//!
//! A program started with `GOSSAMER_TOP=1` (or `Builder::top_socket`)
//! serves its profile on a Unix socket (`$GOSSAMER_TOP_SOCKET`, else
//! `$XDG_RUNTIME_DIR/gossamer-<pid>.sock`, else `/tmp/gossamer-<pid>.sock`).
//! This module connects to it, switches profiling on, and every interval
//! reads a snapshot in the line format documented in the `gossamer` crate's
//! `profile` module, and prints the trusts and trustees that were busiest
//! since the last one, with the program's dedicated-trustee count and
//! trustee parameters (`settings`), and its adaptive trusts with their
//! policy and current mode (`adaptive`), and the properties that follow
//! their requests (`follow`, see `top_follow`). `--set-dedicated`, `--set`,
//! `--set-policy` and `--set-follow` change those while the program runs. Nothing here depends on the `gossamer`
//! crate: the format is parsed, as bytes from another process, with checks.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::top_follow::render_follow;
use crate::CliError;

/// The line-format version this parser reads.
pub const FORMAT_VERSION: u32 = 1;

/// Lines in one answer at most (a malformed peer cannot make us read forever).
const MAX_LINES: usize = 1_000_000;

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopError {
    /// The first line is not `gossamer-profile <version> <pid> <workers>`.
    #[error("not a gossamer profile (first line {0:?})")]
    NotAProfile(String),
    /// Another version of the format.
    #[error("profile format version {0}, this gossamer top reads version {FORMAT_VERSION}")]
    Version(u32),
    /// A line that does not parse.
    #[error("line {line}: {reason}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The answer ended before its `end` line.
    #[error("the answer ended before its end line")]
    Truncated,
    /// The program answered with an error.
    #[error("the program said: {0}")]
    Refused(String),
}

/// One property's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustRow {
    /// Its id (the property's address in the program).
    pub id: u64,
    /// Its trustee.
    pub trustee: usize,
    /// Requests issued to it.
    pub requests: u64,
    /// Of those, local shortcuts.
    pub local_hits: u64,
    /// Closures served by the trustee.
    pub served: u64,
    /// Service time in total (ns).
    pub service_ns: u64,
    /// Round trips measured.
    pub rtt_count: u64,
    /// Median round trip (ns).
    pub rtt_p50: u64,
    /// 99th percentile round trip (ns).
    pub rtt_p99: u64,
    /// The property's type.
    pub type_name: String,
}

/// One trustee's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrusteeRow {
    /// The trustee.
    pub trustee: usize,
    /// Batches sent to it.
    pub batches_sent: u64,
    /// Requests in them.
    pub requests_sent: u64,
    /// Median time the oldest request of a batch was queued (ns).
    pub queued_p50: u64,
    /// 99th percentile of it (ns).
    pub queued_p99: u64,
    /// Batches it served.
    pub batches_served: u64,
    /// Requests in them.
    pub requests_served: u64,
    /// Time spent serving (ns).
    pub busy_ns: u64,
}

/// One snapshot of a program's profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The program's process id.
    pub pid: u32,
    /// Its worker threads.
    pub workers: usize,
    /// Per property.
    pub trusts: Vec<TrustRow>,
    /// Per trustee.
    pub trustees: Vec<TrusteeRow>,
    /// Workers that did not answer.
    pub missing: Vec<usize>,
}

fn num<T: std::str::FromStr>(line: usize, what: &str, s: Option<&str>) -> Result<T, TopError> {
    let s = s.ok_or_else(|| TopError::BadLine { line, reason: format!("missing {what}") })?;
    s.parse().map_err(|_| TopError::BadLine { line, reason: format!("{what} {s:?} is not a number") })
}

/// Parses one answer to `snapshot` (the whole text, `end` line included).
pub fn parse(text: &str) -> Result<Snapshot, TopError> {
    let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    let (_, first) = lines.next().ok_or(TopError::Truncated)?;
    if let Some(e) = first.strip_prefix("error ") {
        return Err(TopError::Refused(e.to_string()));
    }
    let mut head = first.split(' ');
    if head.next() != Some("gossamer-profile") {
        return Err(TopError::NotAProfile(first.chars().take(80).collect()));
    }
    let version: u32 = num(1, "version", head.next())?;
    if version != FORMAT_VERSION {
        return Err(TopError::Version(version));
    }
    let mut snap =
        Snapshot { pid: num(1, "pid", head.next())?, workers: num(1, "workers", head.next())?, ..Snapshot::default() };
    for (n, line) in lines {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "" if rest.is_empty() => {} // the end of the text, or a blank line
            "end" if rest.is_empty() => return Ok(snap),
            "trust" => {
                let mut f = rest.splitn(10, ' ');
                let id = f.next().ok_or_else(|| TopError::BadLine { line: n, reason: "missing id".into() })?;
                let id = u64::from_str_radix(id, 16)
                    .map_err(|_| TopError::BadLine { line: n, reason: format!("id {id:?} is not hexadecimal") })?;
                snap.trusts.push(TrustRow {
                    id,
                    trustee: num(n, "trustee", f.next())?,
                    requests: num(n, "requests", f.next())?,
                    local_hits: num(n, "local hits", f.next())?,
                    served: num(n, "served", f.next())?,
                    service_ns: num(n, "service time", f.next())?,
                    rtt_count: num(n, "round trips", f.next())?,
                    rtt_p50: num(n, "round-trip p50", f.next())?,
                    rtt_p99: num(n, "round-trip p99", f.next())?,
                    type_name: f
                        .next()
                        .filter(|t| !t.is_empty())
                        .ok_or_else(|| TopError::BadLine { line: n, reason: "missing type name".into() })?
                        .to_string(),
                });
            }
            "trustee" => {
                let mut f = rest.split(' ');
                snap.trustees.push(TrusteeRow {
                    trustee: num(n, "trustee", f.next())?,
                    batches_sent: num(n, "batches sent", f.next())?,
                    requests_sent: num(n, "requests sent", f.next())?,
                    queued_p50: num(n, "queued p50", f.next())?,
                    queued_p99: num(n, "queued p99", f.next())?,
                    batches_served: num(n, "batches served", f.next())?,
                    requests_served: num(n, "requests served", f.next())?,
                    busy_ns: num(n, "busy time", f.next())?,
                });
                if f.next().is_some() {
                    return Err(TopError::BadLine { line: n, reason: "extra fields".into() });
                }
            }
            "missing" => snap.missing.push(num(n, "worker", Some(rest))?),
            _ => {
                return Err(TopError::BadLine {
                    line: n,
                    reason: format!("unknown record {:?}", kind.chars().take(20).collect::<String>()),
                })
            }
        }
    }
    Err(TopError::Truncated)
}

/// Workers listed in one `settings` answer at most.
const MAX_WORKERS: usize = 65_536;

/// The parameter names of a `params` line, in order.
pub const PARAM_KEYS: [&str; 4] = ["tight_polls", "idle_spin_us", "sleep_poll_us", "fiber_yield"];

/// One trustee's polling parameters, as the program reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamsRow {
    /// The trustee.
    pub trustee: usize,
    /// Values in the order of [`PARAM_KEYS`].
    pub values: [u64; 4],
}

/// The answer to `settings`: the dedicated trustees and every trustee's
/// polling parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Dedicated trustees right now.
    pub dedicated: usize,
    /// Whether the program's controller picks that count.
    pub auto: bool,
    /// This process's workers.
    pub workers: usize,
    /// Per worker.
    pub params: Vec<ParamsRow>,
}

/// Parses one answer to `settings` (the whole text, `end` line included).
pub fn parse_settings(text: &str) -> Result<Settings, TopError> {
    let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    let (_, first) = lines.next().ok_or(TopError::Truncated)?;
    if let Some(e) = first.strip_prefix("error ") {
        return Err(TopError::Refused(e.chars().take(200).collect()));
    }
    let mut head = first.split(' ');
    if head.next() != Some("dedicated") {
        return Err(TopError::BadLine { line: 1, reason: "not a settings answer".into() });
    }
    let dedicated = num(1, "dedicated count", head.next())?;
    let auto = match head.next() {
        Some("auto") => true,
        Some("fixed") => false,
        _ => return Err(TopError::BadLine { line: 1, reason: "policy is neither fixed nor auto".into() }),
    };
    let workers: usize = num(1, "workers", head.next())?;
    if head.next().is_some() {
        return Err(TopError::BadLine { line: 1, reason: "extra fields".into() });
    }
    if workers > MAX_WORKERS || dedicated >= workers.max(1) {
        return Err(TopError::BadLine { line: 1, reason: format!("{dedicated} dedicated of {workers} workers") });
    }
    let mut out = Settings { dedicated, auto, workers, params: Vec::new() };
    for (n, line) in lines {
        match line.split_once(' ').unwrap_or((line, "")) {
            ("end", "") => return Ok(out),
            ("params", rest) if out.params.len() < workers => {
                let mut f = rest.split(' ');
                let trustee = num(n, "trustee", f.next())?;
                let mut values = [0u64; 4];
                for (key, v) in PARAM_KEYS.iter().zip(values.iter_mut()) {
                    let field =
                        f.next().ok_or_else(|| TopError::BadLine { line: n, reason: format!("missing {key}") })?;
                    let val = field
                        .strip_prefix(key)
                        .and_then(|r| r.strip_prefix('='))
                        .ok_or_else(|| TopError::BadLine { line: n, reason: format!("expected {key}=…") })?;
                    *v = num(n, key, Some(val))?;
                }
                if f.next().is_some() {
                    return Err(TopError::BadLine { line: n, reason: "extra fields".into() });
                }
                out.params.push(ParamsRow { trustee, values });
            }
            _ => {
                return Err(TopError::BadLine {
                    line: n,
                    reason: format!("unexpected line {:?}", line.chars().take(40).collect::<String>()),
                })
            }
        }
    }
    Err(TopError::Truncated)
}

/// One line saying the dedicated count and the parameters (those of the
/// first worker, and `*` when others differ).
pub fn render_settings(s: &Settings) -> String {
    let mut line =
        format!("dedicated trustees: {} of {} ({})", s.dedicated, s.workers, if s.auto { "auto" } else { "fixed" });
    if let Some(first) = s.params.first() {
        line.push_str(" — params");
        for (k, v) in PARAM_KEYS.iter().zip(first.values) {
            line.push_str(&format!(" {k}={v}"));
        }
        if s.params.iter().any(|p| p.values != first.values) {
            line.push_str(" (trustee 0; others differ)");
        }
    }
    line.push('\n');
    line
}

/// Adaptive trusts listed in one `adaptive` answer at most (the program
/// lists at most 10,000 and counts the rest on a `more` line).
const MAX_ADAPTIVE: usize = 10_000;

/// The policies of an adaptive trust, as the program names them.
pub const POLICIES: [&str; 3] = ["delegate", "adaptive", "lock"];

/// The modes an adaptive trust can be in.
const MODES: [&str; 2] = ["delegate", "lock"];

/// One adaptive trust, as the program reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdaptiveRow {
    /// Its id (as in the trust table).
    pub id: u64,
    /// Its trustee.
    pub trustee: usize,
    /// `delegate`, `adaptive` or `lock`.
    pub policy: String,
    /// Who runs its closures now: `delegate` (the trustee) or `lock`
    /// (callers in place).
    pub mode: String,
}

impl AdaptiveRow {
    /// The MODE column: the fixed policy, or `adaptive:` and the mode it
    /// measured its way to.
    pub fn label(&self) -> String {
        if self.policy == "adaptive" {
            format!("adaptive:{}", self.mode)
        } else {
            self.policy.clone()
        }
    }
}

/// The answer to `adaptive`: its rows, and how many the program left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdaptiveList {
    /// Per adaptive trust.
    pub rows: Vec<AdaptiveRow>,
    /// Adaptive trusts beyond those listed.
    pub more: u64,
}

/// Parses an answer of `TAG …` rows (at most `max`, each read by `row`
/// with its line number), an optional `more N` after them (N > 0), and
/// `end`: the rows and N. A first line `error …` is the program's refusal.
pub(crate) fn parse_rows<R>(
    text: &str,
    tag: &str,
    max: usize,
    row: impl Fn(usize, &str) -> Result<R, TopError>,
) -> Result<(Vec<R>, u64), TopError> {
    let (mut rows, mut more) = (Vec::new(), 0u64);
    for (n, line) in text.split('\n').enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l))) {
        if n == 1 {
            if let Some(e) = line.strip_prefix("error ") {
                return Err(TopError::Refused(e.chars().take(200).collect()));
            }
        }
        let bad = |reason: String| TopError::BadLine { line: n, reason };
        match line.split_once(' ').unwrap_or((line, "")) {
            ("end", "") => return Ok((rows, more)),
            (t, rest) if t == tag && rows.len() < max && more == 0 => rows.push(row(n, rest)?),
            ("more", rest) if more == 0 => {
                more = num(n, "count", Some(rest))?;
                if more == 0 {
                    return Err(bad("more 0".into()));
                }
            }
            _ => return Err(bad(format!("unexpected line {:?}", line.chars().take(40).collect::<String>()))),
        }
    }
    Err(TopError::Truncated)
}

/// Parses one answer to `adaptive` (the whole text, `end` line included).
pub fn parse_adaptive(text: &str) -> Result<AdaptiveList, TopError> {
    let (rows, more) = parse_rows(text, "adaptive", MAX_ADAPTIVE, |n, rest| {
        let bad = |reason: String| TopError::BadLine { line: n, reason };
        let f: Vec<&str> = rest.split(' ').collect();
        let [id, trustee, policy, mode] = f[..] else {
            return Err(bad("expected: adaptive ID TRUSTEE POLICY MODE".into()));
        };
        let id = (!id.is_empty() && id.len() <= 16)
            .then(|| u64::from_str_radix(id, 16).ok())
            .flatten()
            .ok_or_else(|| bad(format!("id {:?} is not hexadecimal", id.chars().take(20).collect::<String>())))?;
        let policy = POLICIES
            .into_iter()
            .find(|p| *p == policy)
            .ok_or_else(|| bad(format!("unknown policy {:?}", policy.chars().take(20).collect::<String>())))?;
        let mode = MODES
            .into_iter()
            .find(|m| *m == mode)
            .ok_or_else(|| bad(format!("unknown mode {:?}", mode.chars().take(20).collect::<String>())))?;
        Ok(AdaptiveRow { id, trustee: num(n, "trustee", Some(trustee))?, policy: policy.into(), mode: mode.into() })
    })?;
    Ok(AdaptiveList { rows, more })
}

/// The adaptive trusts, at most `limit` of them: id, trustee, policy and
/// current mode.
pub fn render_adaptive(list: &AdaptiveList, limit: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if list.rows.is_empty() && list.more == 0 {
        return s;
    }
    let _ = writeln!(s, "\n{:<16} {:>7} {:<9} {:<9}", "ADAPTIVE", "TRUSTEE", "POLICY", "MODE");
    for r in list.rows.iter().take(limit) {
        let _ = writeln!(s, "{:<16} {:>7} {:<9} {:<9}", format!("{:#x}", r.id), r.trustee, r.policy, r.mode);
    }
    let hidden = list.rows.len().saturating_sub(limit) as u64 + list.more;
    if hidden > 0 {
        let _ = writeln!(s, "… and {hidden} more adaptive trusts");
    }
    s
}

/// Where process `pid` serves `gossamer top` (the rule the runtime uses).
pub fn socket_path(pid: u32) -> PathBuf {
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|d| d.is_dir());
    let name = format!("gossamer-{pid}.sock");
    match xdg {
        Some(d) if d.join(&name).exists() => d.join(name),
        _ => PathBuf::from("/tmp").join(name),
    }
}

/// A connection to a program's top socket.
pub struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    path: PathBuf,
}

impl Conn {
    /// Connects to the socket at `path`.
    pub fn connect(path: &Path) -> Result<Conn, CliError> {
        let what = || format!("connect to {} (is the program running with GOSSAMER_TOP=1?)", path.display());
        let s = UnixStream::connect(path).map_err(CliError::io(what()))?;
        s.set_read_timeout(Some(Duration::from_secs(10))).map_err(CliError::io(what()))?;
        let writer = s.try_clone().map_err(CliError::io(what()))?;
        Ok(Conn { reader: BufReader::new(s), writer, path: path.to_path_buf() })
    }

    /// Sends one command and returns the answer: one line, or the lines up
    /// to and including `end` when `multi`.
    pub fn ask(&mut self, cmd: &str, multi: bool) -> Result<String, CliError> {
        let what = format!("talk to {}", self.path.display());
        self.writer.write_all(format!("{cmd}\n").as_bytes()).map_err(CliError::io(what.clone()))?;
        let mut all = String::new();
        for _ in 0..MAX_LINES {
            let mut line = String::new();
            if self.reader.read_line(&mut line).map_err(CliError::io(what.clone()))? == 0 {
                return Err(CliError::Top(TopError::Truncated));
            }
            all.push_str(&line);
            let l = line.trim_end();
            if !multi || l == "end" || (all.len() == line.len() && l.starts_with("error ")) {
                return Ok(all);
            }
        }
        Err(CliError::Top(TopError::Truncated))
    }

    /// Sends a command answered by `ok`.
    pub fn command(&mut self, cmd: &str) -> Result<(), CliError> {
        let a = self.ask(cmd, false)?;
        match a.trim_end() {
            "ok" => Ok(()),
            other => Err(CliError::Top(TopError::Refused(other.strip_prefix("error ").unwrap_or(other).to_string()))),
        }
    }

    /// Reads a snapshot.
    pub fn snapshot(&mut self) -> Result<Snapshot, CliError> {
        Ok(parse(&self.ask("snapshot", true)?)?)
    }

    /// Reads the dedicated count and the trustees' parameters.
    pub fn settings(&mut self) -> Result<Settings, CliError> {
        Ok(parse_settings(&self.ask("settings", true)?)?)
    }

    /// Reads the program's adaptive trusts.
    pub fn adaptive(&mut self) -> Result<AdaptiveList, CliError> {
        Ok(parse_adaptive(&self.ask("adaptive", true)?)?)
    }

    /// Reads the program's stuck dump (text).
    pub fn stuck(&mut self) -> Result<String, CliError> {
        let a = self.ask("stuck", true)?;
        Ok(a.strip_suffix("end\n").unwrap_or(&a).to_string())
    }
}

fn human_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns}ns"),
        10_000..=9_999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.1}s", ns as f64 / 1e9),
    }
}

fn short_type(t: &str) -> String {
    let mut out = String::new();
    let mut rest = t;
    while let Some(i) = rest.find("::") {
        out.push_str(&rest[..i]);
        let cut = out.rfind(['<', ' ', '(', ',', '[', '&']).map_or(0, |p| p + 1);
        out.truncate(cut);
        rest = &rest[i + 2..];
    }
    out.push_str(rest);
    if out.chars().count() > 32 {
        out = out.chars().take(31).collect::<String>() + "…";
    }
    out
}

/// The table for snapshot `cur`: rates per second since `prev` (taken
/// `secs` earlier) when given, else totals; the `limit` hottest trusts.
pub fn render(prev: Option<&Snapshot>, cur: &Snapshot, secs: f64, limit: usize) -> String {
    render_with_modes(prev, cur, secs, limit, &[])
}

/// As [`render`], with the MODE column of the trusts found in `adaptive`
/// (see [`AdaptiveRow::label`]; `-` for plain trusts).
pub fn render_with_modes(
    prev: Option<&Snapshot>,
    cur: &Snapshot,
    secs: f64,
    limit: usize,
    adaptive: &[AdaptiveRow],
) -> String {
    let mode = |id: u64| adaptive.iter().find(|a| a.id == id).map_or_else(|| "-".to_string(), AdaptiveRow::label);
    use std::fmt::Write as _;
    let secs = secs.max(1e-9);
    let rate = |now: u64, before: Option<u64>| match before {
        Some(b) => format!("{:.0}/s", now.saturating_sub(b) as f64 / secs),
        None => now.to_string(),
    };
    // Rows new since `prev` started from zero.
    let zero = TrustRow {
        id: 0,
        trustee: 0,
        requests: 0,
        local_hits: 0,
        served: 0,
        service_ns: 0,
        rtt_count: 0,
        rtt_p50: 0,
        rtt_p99: 0,
        type_name: String::new(),
    };
    let before_trust = |id: u64| prev.map(|p| p.trusts.iter().find(|t| t.id == id).unwrap_or(&zero));
    let mut trusts: Vec<&TrustRow> = cur.trusts.iter().collect();
    let heat = |t: &TrustRow| t.requests.saturating_sub(before_trust(t.id).map_or(0, |b| b.requests));
    trusts.sort_by_key(|t| std::cmp::Reverse((heat(t), t.requests)));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "gossamer top — pid {}, {} workers, {} trusts profiled{}",
        cur.pid,
        cur.workers,
        cur.trusts.len(),
        if prev.is_some() { format!(", rates over {secs:.1}s") } else { ", totals".into() }
    );
    let _ = writeln!(
        s,
        "{:<16} {:<32} {:>7} {:>12} {:>12} {:>9} {:>9} {:>9} {:<17}",
        "TRUST", "TYPE", "TRUSTEE", "REQUESTS", "LOCAL", "SVC-MEAN", "RTT-P50", "RTT-P99", "MODE"
    );
    for t in trusts.iter().take(limit) {
        let b = before_trust(t.id);
        let _ = writeln!(
            s,
            "{:<16} {:<32} {:>7} {:>12} {:>12} {:>9} {:>9} {:>9} {:<17}",
            format!("{:#x}", t.id),
            short_type(&t.type_name),
            t.trustee,
            rate(t.requests, b.map(|b| b.requests)),
            rate(t.local_hits, b.map(|b| b.local_hits)),
            human_ns(t.service_ns.checked_div(t.served).unwrap_or(0)),
            human_ns(t.rtt_p50),
            human_ns(t.rtt_p99),
            mode(t.id),
        );
    }
    if trusts.len() > limit {
        let _ = writeln!(s, "… and {} more", trusts.len() - limit);
    }
    let _ = writeln!(
        s,
        "\n{:<7} {:>12} {:>12} {:>10} {:>10} {:>10} {:>7}",
        "TRUSTEE", "REQUESTS-IN", "BATCHES-IN", "MEAN-BATCH", "QUEUED-P50", "QUEUED-P99", "BUSY"
    );
    let mut trustees: Vec<&TrusteeRow> = cur.trustees.iter().collect();
    let zero_tee = TrusteeRow {
        trustee: 0,
        batches_sent: 0,
        requests_sent: 0,
        queued_p50: 0,
        queued_p99: 0,
        batches_served: 0,
        requests_served: 0,
        busy_ns: 0,
    };
    let before_tee = |t: usize| prev.map(|p| p.trustees.iter().find(|x| x.trustee == t).unwrap_or(&zero_tee));
    trustees.sort_by_key(|t| {
        std::cmp::Reverse(t.requests_served.saturating_sub(before_tee(t.trustee).map_or(0, |b| b.requests_served)))
    });
    for t in trustees {
        let b = before_tee(t.trustee);
        let (req, bat, busy) = match b {
            Some(b) => (
                t.requests_sent.saturating_sub(b.requests_sent),
                t.batches_sent.saturating_sub(b.batches_sent),
                t.busy_ns.saturating_sub(b.busy_ns),
            ),
            None => (t.requests_sent, t.batches_sent, t.busy_ns),
        };
        let busy = match b {
            Some(_) => format!("{:.0}%", busy as f64 / (secs * 1e9) * 100.0),
            None => human_ns(busy),
        };
        let _ = writeln!(
            s,
            "{:<7} {:>12} {:>12} {:>10.1} {:>10} {:>10} {:>7}",
            t.trustee,
            rate(t.requests_sent, b.map(|b| b.requests_sent)),
            rate(t.batches_sent, b.map(|b| b.batches_sent)),
            if bat == 0 { 0.0 } else { req as f64 / bat as f64 },
            human_ns(t.queued_p50),
            human_ns(t.queued_p99),
            busy,
        );
    }
    if !cur.missing.is_empty() {
        let _ = writeln!(s, "(no answer from workers {:?})", cur.missing);
    }
    s
}

/// What `gossamer top` was asked to do.
#[derive(Clone, Debug)]
pub struct TopOpts {
    /// The socket.
    pub socket: PathBuf,
    /// Between refreshes.
    pub interval: Duration,
    /// Refreshes before exiting (`None`: until interrupted).
    pub iterations: Option<u64>,
    /// Trusts shown.
    pub limit: usize,
    /// Print the stuck dump after each table.
    pub stuck: bool,
    /// Leave profiling on when exiting.
    pub keep: bool,
    /// Commands that change the program's settings (`dedicated …`,
    /// `set …`, `policy …`, `follow …`): sent first, each checked by the
    /// program before it changes anything; then the settings (and the
    /// adaptive trusts, or the properties that follow, when changed) are
    /// printed and top exits.
    pub set: Vec<String>,
}

/// The socket command for `--set-dedicated VALUE` (`N` or `auto`).
pub fn dedicated_command(value: &str) -> Result<String, CliError> {
    let v = value.trim();
    if v == "auto" || (!v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit())) {
        Ok(format!("dedicated {v}"))
    } else {
        Err(CliError::Usage(format!("--set-dedicated {value:?}: give a number of trustees or `auto`")))
    }
}

/// The socket command for `--set KEY=VALUE …` on `trustee` (all when `None`).
pub fn set_command(pairs: &[String], trustee: Option<usize>) -> Result<String, CliError> {
    let mut cmd = format!("set {}", trustee.map_or("all".to_string(), |t| t.to_string()));
    for p in pairs {
        let ok = p.split_once('=').is_some_and(|(k, v)| {
            PARAM_KEYS.contains(&k) && !v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit())
        });
        if !ok {
            return Err(CliError::Usage(format!(
                "--set {p:?}: expected KEY=NUMBER with KEY one of {}",
                PARAM_KEYS.join(", ")
            )));
        }
        cmd.push(' ');
        cmd.push_str(p);
    }
    Ok(cmd)
}

/// The socket command for `--set-policy TRUST_ID=POLICY` (the id in
/// hexadecimal, as the table shows it, `0x` optional).
pub fn policy_command(value: &str) -> Result<String, CliError> {
    let usage = || {
        CliError::Usage(format!(
            "--set-policy {value:?}: expected TRUST_ID=POLICY, with the id as the table shows it (e.g. 0x7f3a10) \
             and POLICY one of {}",
            POLICIES.join(", ")
        ))
    };
    let (id, policy) = value.trim().split_once('=').ok_or_else(usage)?;
    let digits = id.strip_prefix("0x").unwrap_or(id);
    let id_ok = !digits.is_empty() && digits.len() <= 16 && digits.bytes().all(|b| b.is_ascii_hexdigit());
    if !id_ok || !POLICIES.contains(&policy) {
        return Err(usage());
    }
    Ok(format!("policy {digits} {policy}"))
}

/// Runs `gossamer top`, writing tables to `out`.
pub fn run(opts: &TopOpts, out: &mut dyn Write) -> Result<i32, CliError> {
    let mut conn = Conn::connect(&opts.socket)?;
    if !opts.set.is_empty() {
        for cmd in &opts.set {
            conn.command(cmd)?;
        }
        let mut text = render_settings(&conn.settings()?);
        if opts.set.iter().any(|c| c.starts_with("policy ")) {
            text.push_str(&render_adaptive(&conn.adaptive()?, opts.limit));
        }
        if opts.set.iter().any(|c| c.starts_with("follow ")) {
            text.push_str(&render_follow(&conn.follow()?, opts.limit));
        }
        out.write_all(text.as_bytes()).map_err(CliError::io("write the settings"))?;
        return Ok(0);
    }
    conn.command("profile all")?;
    let result = (|| {
        let mut prev = conn.snapshot()?;
        let mut done = 0u64;
        let clear = opts.iterations != Some(1) && std::io::IsTerminal::is_terminal(&std::io::stdout());
        while opts.iterations.is_none_or(|n| done < n) {
            std::thread::sleep(opts.interval);
            let cur = conn.snapshot()?;
            // Programs without adaptive trusts, or older ones, list none.
            let adaptive = conn.adaptive().unwrap_or_default();
            let mut text =
                render_with_modes(Some(&prev), &cur, opts.interval.as_secs_f64(), opts.limit, &adaptive.rows);
            text.push_str(&render_adaptive(&adaptive, opts.limit));
            // Older programs do not know `follow`: no table then.
            if let Ok(follow) = conn.follow() {
                text.push_str(&render_follow(&follow, opts.limit));
            }
            // Programs without live settings answer an error: no line then.
            if let Ok(settings) = conn.settings() {
                let at = text.find('\n').map_or(text.len(), |i| i + 1);
                text.insert_str(at, &render_settings(&settings));
            }
            if opts.stuck {
                text.push('\n');
                text.push_str(&conn.stuck()?);
            }
            if clear {
                text.insert_str(0, "\x1b[H\x1b[2J");
            }
            out.write_all(text.as_bytes()).map_err(CliError::io("write the table"))?;
            out.flush().map_err(CliError::io("write the table"))?;
            prev = cur;
            done += 1;
        }
        Ok(0)
    })();
    if !opts.keep {
        let _ = conn.command("profile off");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "gossamer-profile 1 42 2\n\
        trust 7f00aa 1 1000 10 990 99000 800 1500 9000 std::collections::hash::map::HashMap<u64, alloc::string::String>\n\
        trustee 1 500 1000 300 2000 500 1000 120000\n\
        missing 0\n\
        end\n";

    #[test]
    fn a_sample_parses() {
        let s = parse(SAMPLE).unwrap();
        assert_eq!((s.pid, s.workers), (42, 2));
        assert_eq!(s.trusts[0].id, 0x7f00aa);
        assert_eq!(s.trusts[0].type_name, "std::collections::hash::map::HashMap<u64, alloc::string::String>");
        assert_eq!(s.trustees[0].busy_ns, 120000);
        assert_eq!(s.missing, vec![0]);
        let t = render(None, &s, 1.0, 10);
        assert!(t.contains("HashMap<u64, String>"), "{t}");
    }

    #[test]
    fn bad_answers_are_errors() {
        assert_eq!(parse("error no\n"), Err(TopError::Refused("no".into())));
        assert!(matches!(parse("gossamer-profile 2 1 1\nend\n"), Err(TopError::Version(2))));
        assert!(matches!(parse("gossamer-profile 1 1 1\n"), Err(TopError::Truncated)));
        assert!(matches!(parse("gossamer-profile 1 1 1\ntrust zz 1\nend\n"), Err(TopError::BadLine { line: 2, .. })));
        assert!(matches!(parse("hello\n"), Err(TopError::NotAProfile(_))));
    }
}
