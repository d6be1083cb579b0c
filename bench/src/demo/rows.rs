//! The demo's rows: three workloads (one hot counter, many counters, a
//! shared map), each at threads = cores and oversubscribed at four threads
//! per core, and for each the Trust<T> form that is idiomatic for it beside
//! `std::sync::Mutex` and `parking_lot::Mutex`.

use crate::faa::{self, Issue};
use crate::keys::Dist;
use crate::locks::LockKind;
use crate::map::{self, MapKind, Point};

/// Counters of the "many objects" rows.
pub const MANY: u64 = 1024;
/// Entries of the shared map.
pub const MAP_SIZE: u64 = 100_000;
/// Percentage of the map's operations that update an entry (the rest read).
pub const MAP_WRITES: u32 = 10;
/// OS threads per core in the oversubscribed rows.
pub const OVERSUBSCRIBE: usize = 4;

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Every thread increments one counter.
    Hot,
    /// Threads increment counters picked uniformly from [`MANY`].
    Many,
    /// Threads read or update uniformly picked entries of a map of [`MAP_SIZE`].
    Map,
}

impl Workload {
    pub fn name(self) -> String {
        match self {
            Workload::Hot => "hot object (1 counter)".into(),
            Workload::Many => format!("many objects ({MANY} counters)"),
            Workload::Map => format!("shared map ({}k entries; {MAP_WRITES}% writes)", MAP_SIZE / 1000),
        }
    }

    /// The objects (or entries) the row's keys are drawn from.
    pub fn keys(self) -> u64 {
        match self {
            Workload::Hot => 1,
            Workload::Many => MANY,
            Workload::Map => MAP_SIZE,
        }
    }

    pub fn write_pct(self) -> u32 {
        match self {
            Workload::Map => MAP_WRITES,
            Workload::Hot | Workload::Many => 0,
        }
    }
}

/// One contestant of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contestant {
    Faa(faa::Variant),
    Map(map::Variant),
}

impl Contestant {
    pub fn is_trust(self) -> bool {
        matches!(self, Contestant::Faa(faa::Variant::Trust { .. }) | Contestant::Map(map::Variant::Trust { .. }))
    }
}

/// One line of the demo's table.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub workload: Workload,
    /// OS threads: runtime workers for Trust<T>, lock threads for the locks.
    pub threads: usize,
    pub oversubscribed: bool,
    /// How the Trust<T> clients issue their requests.
    pub issue: Issue,
}

impl Row {
    /// The Trust<T> form, as the table names it.
    pub fn form(&self) -> &'static str {
        match self.issue {
            Issue::Async => "apply_then",
            Issue::Apply => "apply",
        }
    }

    /// Trust<T> first, then the two locks, then `Adaptive<T>` (with the
    /// same `apply_then` window).
    pub fn contestants(&self) -> [Contestant; 4] {
        let (dedicated, issue) = (false, self.issue);
        match self.workload {
            Workload::Hot | Workload::Many => [
                Contestant::Faa(faa::Variant::Trust { dedicated, issue }),
                Contestant::Faa(faa::Variant::Lock(LockKind::Std)),
                Contestant::Faa(faa::Variant::Lock(LockKind::ParkingLot)),
                Contestant::Faa(faa::Variant::Adaptive),
            ],
            Workload::Map => [
                Contestant::Map(map::Variant::Trust { dedicated, issue }),
                Contestant::Map(map::Variant::Locked(MapKind::Mutex512)),
                Contestant::Map(map::Variant::Locked(MapKind::ParkingLot512)),
                Contestant::Map(map::Variant::Adaptive),
            ],
        }
    }

    /// The map point of a map row.
    pub fn point(&self) -> Point {
        Point { size: self.workload.keys(), write_pct: self.workload.write_pct() }
    }

    pub fn dist(&self) -> Dist {
        Dist::Uniform
    }
}

/// The demo's rows for a machine of `cores` cores.
///
/// Every Trust<T> row uses `apply_then` with a window of requests in
/// flight: a counter increment or a map update whose answer the client
/// does not need at once is what `apply_then` is for, and it lets one
/// thread keep many requests in a batch where `apply` would wait out a
/// round trip per request.
pub fn rows(cores: usize) -> Vec<Row> {
    let fit = cores.max(2);
    let over = cores.max(1) * OVERSUBSCRIBE;
    let mut v = Vec::new();
    for workload in [Workload::Hot, Workload::Many, Workload::Map] {
        for (threads, oversubscribed) in [(fit, false), (over, true)] {
            v.push(Row { workload, threads, oversubscribed, issue: Issue::Async });
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_fits_and_oversubscribes() {
        let rows = rows(2);
        assert_eq!(rows.len(), 6);
        for w in [Workload::Hot, Workload::Many, Workload::Map] {
            let t: Vec<_> = rows.iter().filter(|r| r.workload == w).map(|r| (r.threads, r.oversubscribed)).collect();
            assert_eq!(t, [(2, false), (8, true)], "{w:?}");
        }
        for r in &rows {
            let c = r.contestants();
            assert!(c[0].is_trust() && !c[1].is_trust() && !c[2].is_trust());
        }
    }
}
