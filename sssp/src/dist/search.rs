//! Delta-stepping by delegation (the search's rounds).
//!
//! Rank 0's coordinating fiber drives rounds; in each, a fiber on every
//! thread of the program expands its part's frontier: relaxations of its
//! own vertices apply at once, the others go to their owners' trustees as
//! batches of asynchronous delegation ([`Outbox`]). A round ends when every
//! thread's fiber has ended, and a fiber ends only when every batch it
//! sent has been applied — so when the coordinator has joined them all,
//! no relaxation is in flight anywhere (termination detection by
//! acknowledgement, across threads, processes and hosts alike).
//!
//! Per bucket `b` (in increasing order): light rounds relax the light arcs
//! of the vertices now in `b` until no part has any left; one heavy round
//! relaxes the heavy arcs of every vertex settled in `b`. Each step reports
//! a lower bound of the next non-empty bucket (its own, or the lowest
//! bucket it sent relaxations into), so no extra round is needed to find
//! out whether a bucket is empty or which comes next.

use serde::{Deserialize, Serialize};

use super::on_all;
use super::part::{Arcs, Relax};
use super::peers::{self, Outbox};

/// Relaxations per batch sent to another part.
pub const BATCH: usize = 2048;
/// Arcs a fiber expands before it sends what it has and lets others run.
const BUDGET: usize = 1 << 14;

/// What one search did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchStats {
    /// Buckets processed.
    pub buckets: u64,
    /// Rounds (each a step on every thread).
    pub rounds: u64,
    /// Vertex expansions (a vertex may be expanded more than once).
    pub expansions: u64,
    /// Relaxations sent to other parts.
    pub relaxations_sent: u64,
    /// Relaxations of other parts' vertices not sent, because one no worse
    /// had gone to the same vertex earlier in the search.
    pub relaxations_dropped: u64,
    /// Batches they travelled in.
    pub batches: u64,
}

/// Runs a search from `root` over the installed parts.
pub fn search(root: u32, delta: f32) -> SearchStats {
    let mut stats = SearchStats::default();
    let mut next = on_all(init_step, (root, delta)).into_iter().flatten().min();
    while let Some(b) = next {
        stats.buckets += 1;
        loop {
            let (frontier, after) = round(&mut stats, b, Arcs::Light);
            // Nothing expanded anywhere means nothing was sent either:
            // the bucket is empty.
            if frontier == 0 || after != Some(b) {
                break;
            }
        }
        next = round(&mut stats, b, Arcs::Heavy).1;
        debug_assert!(next.is_none_or(|n| n > b), "a bucket below the current one");
    }
    stats
}

/// One round: (vertices expanded, next bucket).
fn round(stats: &mut SearchStats, b: u64, arcs: Arcs) -> (u64, Option<u64>) {
    stats.rounds += 1;
    let mut frontier = 0;
    let mut next: Option<u64> = None;
    for r in on_all(expand_step, (b, arcs)) {
        frontier += r.0;
        stats.relaxations_sent += r.1;
        stats.batches += r.2;
        stats.relaxations_dropped += r.4;
        next = next.into_iter().chain(r.3).min();
    }
    stats.expansions += frontier;
    (frontier, next)
}

fn me() -> (std::rc::Rc<Vec<gossamer::Trust<super::Part>>>, usize) {
    (peers::get(), gossamer::current_thread().expect("a step runs on a worker"))
}

fn init_step((root, delta): (u32, f32)) -> Option<u64> {
    let (parts, t) = me();
    parts[t].apply(move |p| p.init(root, delta))
}

/// One thread's share of a round: (frontier size, relaxations sent,
/// batches sent, next bucket as this part sees it, relaxations dropped).
fn expand_step((b, arcs): (u64, Arcs)) -> (u64, u64, u64, Option<u64>, u64) {
    let (parts, t) = me();
    let me = &parts[t];
    let frontier = me.apply(move |p| p.begin(b, arcs));
    let mut out = Outbox::<Relax>::new(BATCH);
    if frontier > 0 {
        loop {
            let (ready, done) = me.apply(|p| p.expand(BUDGET, BATCH));
            for (to, batch) in ready {
                out.send(to, batch);
            }
            if done {
                break;
            }
        }
    }
    out.finish();
    let (next, dropped) = me.apply(|p| (p.next_bucket(), p.dropped()));
    (frontier, out.items, out.batches, next, dropped)
}
