//! The one-line verdict of a demo row: who wins on this machine, and the
//! usual reason for it in a few words. The reasons are the mechanisms the
//! benchmarks were built to show (thesis §2.6); the win or loss itself is
//! always the measured ratio.

use super::rows::{Row, Workload};

/// Ratios within this factor of 1 are called a draw: the repetitions of a
/// short run on a shared machine scatter about that much.
const DRAW: f64 = 0.10;

/// Who came out ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Wins,
    Draw,
    Loses,
}

impl Outcome {
    pub fn of(ratio: f64) -> Outcome {
        if ratio >= 1.0 + DRAW {
            Outcome::Wins
        } else if ratio <= 1.0 - DRAW {
            Outcome::Loses
        } else {
            Outcome::Draw
        }
    }
}

/// The verdict of `row` whose Trust-over-best-lock ratio is `ratio`.
pub fn verdict(row: &Row, ratio: f64) -> String {
    let outcome = Outcome::of(ratio);
    let head = match outcome {
        Outcome::Wins => "delegation wins",
        Outcome::Draw => "a draw",
        Outcome::Loses => "the lock wins",
    };
    let why = match (row.workload, row.oversubscribed, outcome) {
        (Workload::Hot, false, Outcome::Wins) => {
            "one lock line bounces between cores; the trustee keeps the counter in its cache"
        }
        (Workload::Hot, false, _) => "with so few threads the lock is barely contended; delegation pays a message each",
        (Workload::Hot, true, Outcome::Wins) => {
            "preempted lock holders stall every waiter; a trustee holds nothing across a switch"
        }
        (Workload::Hot, true, _) => "more threads than cores: requests wait for their trustee's turn on a core",
        (Workload::Many, false, Outcome::Wins) => {
            "counters stay in their trustee's cache instead of moving to each locking thread"
        }
        (Workload::Many, false, _) => {
            "objects outnumber threads: locks rarely collide, a message costs more than an atomic"
        }
        (Workload::Many, true, Outcome::Wins) => {
            "requests ride in batches while preempted lock holders stall their counters"
        }
        (Workload::Many, true, _) => "objects outnumber threads, and workers take turns on the cores",
        (Workload::Map, false, Outcome::Wins) => "each trustee keeps its part of the table in its own cache",
        (Workload::Map, false, _) => "512 lock shards rarely collide; delegation pays a message per lookup",
        (Workload::Map, true, Outcome::Wins) => {
            "table parts stay in their trustees' caches; preempted holders stall lock shards"
        }
        (Workload::Map, true, _) => "lock shards rarely collide, and workers take turns on the cores",
    };
    format!("{head}: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::rows::rows;

    #[test]
    fn outcome_follows_the_ratio() {
        assert_eq!(Outcome::of(2.0), Outcome::Wins);
        assert_eq!(Outcome::of(1.05), Outcome::Draw);
        assert_eq!(Outcome::of(0.95), Outcome::Draw);
        assert_eq!(Outcome::of(0.5), Outcome::Loses);
    }

    #[test]
    fn every_row_has_a_verdict_that_names_the_winner() {
        for row in rows(2) {
            assert!(verdict(&row, 3.0).starts_with("delegation wins: "));
            assert!(verdict(&row, 1.0).starts_with("a draw: "));
            assert!(verdict(&row, 0.3).starts_with("the lock wins: "));
        }
    }
}
