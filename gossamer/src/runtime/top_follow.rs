//! What the `gossamer top` socket shows and sets of properties that follow
//! their requests (`MigrationPolicy::Follow`): each one's holder, whether
//! it is on, its moves and its parameters, and changes to them by id. The
//! runtime layer knows nothing of the policy; the trust layer installs the
//! [`HOOKS`] with the first property that follows, and until then a
//! program simply has none.

use std::sync::OnceLock;

/// The parameters of the policy, in the order the socket lists them.
pub(crate) const KEYS: [&str; 5] = ["window", "window_ms", "share_percent", "return_percent", "rest_windows"];

/// One property that follows, as the socket lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FollowRow {
    /// Its profile id (the address of its origin cell).
    pub(crate) id: u64,
    /// The trustee that holds its value now.
    pub(crate) holder: usize,
    /// Whether it follows now (`false`: paused from `gossamer top`).
    pub(crate) on: bool,
    /// How many times it has moved since it was given the policy.
    pub(crate) moves: u64,
    /// Its parameters, in the order of [`KEYS`].
    pub(crate) params: [u64; 5],
}

/// A change asked for by `follow ID …`, already decoded.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct FollowChange {
    /// `on` or `off`, if given.
    pub(crate) on: Option<bool>,
    /// Parameters to set: an index into [`KEYS`] and the value.
    pub(crate) params: Vec<(usize, u64)>,
}

/// The trust layer's answers for one runtime (by its id).
pub(crate) struct Hooks {
    /// Every property of the runtime that follows.
    pub(crate) list: fn(runtime: u64) -> Vec<FollowRow>,
    /// Applies a change to the property `id` of the runtime, all of it or
    /// none; an error names why nothing changed.
    pub(crate) change: fn(runtime: u64, id: u64, change: &FollowChange) -> Result<(), String>,
}

/// Installed with the first property of the process that follows.
pub(crate) static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// The most rows one `follow` answer lists.
pub(crate) const MAX_ROWS: usize = 10_000;

/// The answer to `follow`: one line per property that follows, `follow ID
/// HOLDER on|off MOVES window=… window_ms=… share_percent=…
/// return_percent=… rest_windows=…` (ID in hexadecimal, as `snapshot`
/// writes it), at most [`MAX_ROWS`] of them, then `more N` if some were
/// left out, then `end`.
pub(crate) fn answer_list(runtime: u64) -> String {
    let mut rows = HOOKS.get().map_or_else(Vec::new, |h| (h.list)(runtime));
    rows.sort_by_key(|r| r.id);
    let lines = rows.iter().map(|r| {
        let mut l = format!("follow {:x} {} {} {}", r.id, r.holder, if r.on { "on" } else { "off" }, r.moves);
        for (k, v) in KEYS.iter().zip(r.params) {
            l.push_str(&format!(" {k}={v}"));
        }
        l + "\n"
    });
    super::top_socket::listing(lines.collect(), MAX_ROWS)
}

/// Carries out `follow ID …` (already decoded).
pub(crate) fn change(runtime: u64, id: u64, change: &FollowChange) -> Result<(), String> {
    match HOOKS.get() {
        Some(h) => (h.change)(runtime, id, change),
        None => Err(format!("no property {id:#x} follows its requests in this process (none does)")),
    }
}
