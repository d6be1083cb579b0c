//! What the `gossamer top` socket shows and sets of adaptive properties:
//! each one's policy and current mode, and a policy change by id. The
//! runtime layer knows nothing of adaptive properties; the trust layer
//! installs the [`HOOKS`] with its first adaptive property, and until then
//! a program simply has none.

use std::sync::OnceLock;

/// One live adaptive property, as the socket lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AdaptiveRow {
    /// Its profile id (the address of its owner property).
    pub(crate) id: u64,
    /// The trustee that serves its delegated requests.
    pub(crate) trustee: usize,
    /// `delegate`, `adaptive` or `lock`.
    pub(crate) policy: &'static str,
    /// Who runs closures now: `delegate` or `lock`.
    pub(crate) mode: &'static str,
}

/// The trust layer's answers for one runtime (by its id).
pub(crate) struct Hooks {
    /// Every live adaptive property of the runtime, by id.
    pub(crate) list: fn(runtime: u64) -> Vec<AdaptiveRow>,
    /// Sets the policy (a name from [`POLICIES`]) of the adaptive property
    /// `id` of the runtime; an error names why nothing changed.
    pub(crate) set_policy: fn(runtime: u64, id: u64, policy: &str) -> Result<(), String>,
}

/// Installed with the first adaptive property of the process.
pub(crate) static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// The policy names the socket takes and shows.
pub(crate) const POLICIES: [&str; 3] = ["delegate", "adaptive", "lock"];

/// The most rows one `adaptive` answer lists (the hottest are not known
/// here: a program with more shows the first ones and says so).
pub(crate) const MAX_ROWS: usize = 10_000;

/// The answer to `adaptive`: one line per live adaptive property of the
/// runtime, `adaptive ID TRUSTEE POLICY MODE` (ID in hexadecimal, as
/// `snapshot` writes it), at most [`MAX_ROWS`] of them, then `more N` if
/// some were left out, then `end`.
pub(crate) fn answer_list(runtime: u64) -> String {
    let mut rows = HOOKS.get().map_or_else(Vec::new, |h| (h.list)(runtime));
    rows.sort_by_key(|r| r.id);
    let lines = rows.iter().map(|r| format!("adaptive {:x} {} {} {}\n", r.id, r.trustee, r.policy, r.mode));
    super::top_socket::listing(lines.collect(), MAX_ROWS)
}

/// Carries out `policy ID NAME` (already decoded and checked).
pub(crate) fn set_policy(runtime: u64, id: u64, policy: &str) -> Result<(), String> {
    match HOOKS.get() {
        Some(h) => (h.set_policy)(runtime, id, policy),
        None => Err(format!("no adaptive trust {id:#x} in this process (it has none)")),
    }
}
