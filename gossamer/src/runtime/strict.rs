//! Strict mode: one process that keeps the rules of many. The workers are
//! split into *simulated processes*, and every rule that holds between
//! processes holds between them: a generic closure for a trustee in another
//! simulated process is refused with the panic a real process boundary
//! gives, `spawn_on` and `TrusteeRef::entrust` there are refused, values
//! given to the `_with` forms and `entrust_on` are copied through the bytes
//! another process would get, and placement stays inside the caller's own
//! simulated process. The data still moves through this process's memory.
//!
//! Everything here answers one question, "is thread `t` in another process
//! *by the rules*?" (`Shared::crosses`), and the paths that answer it reuse
//! the process boundary's own checks and encodings (`channel::remote`).

use std::ops::Range;

use super::shared::Shared;

/// The environment variable that switches strict mode on when the builder
/// did not say: a number, as for [`Builder::strict`](crate::Builder::strict).
pub(crate) const ENV: &str = "GOSSAMER_STRICT";

/// How many simulated processes the workers form: 0 off, 1 one per worker,
/// `n` ≥ 2 that many (at most one per worker).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Strict(pub(crate) usize);

impl Strict {
    /// The builder's choice, else `GOSSAMER_STRICT`.
    pub(crate) fn resolve(chosen: Option<usize>) -> Strict {
        if let Some(n) = chosen {
            return Strict(n);
        }
        match std::env::var(ENV) {
            Ok(v) if v.trim().is_empty() => Strict(0),
            Ok(v) => match v.trim() {
                "on" | "true" | "yes" => Strict(1),
                "off" | "false" | "no" => Strict(0),
                n => Strict(n.parse().unwrap_or_else(|_| {
                    panic!(
                        "gossamer: {ENV}={v:?} is not a number; set {ENV}=1 (every worker its own simulated \
                         process), {ENV}=N (N simulated processes) or {ENV}=0 (off)"
                    )
                })),
            },
            Err(_) => Strict(0),
        }
    }

    pub(crate) fn is_on(self) -> bool {
        self.0 > 0
    }
}

impl Shared {
    /// The simulated process of local worker `t` (0 when strict mode is
    /// off). Workers are split into contiguous, near-equal groups, as a rack
    /// spreads threads over its processes.
    fn simulated(&self, t: usize) -> usize {
        (t - self.local.start) * self.groups() / self.local.len().max(1)
    }

    /// How many simulated processes this process's workers form (1 when
    /// strict mode is off).
    fn groups(&self) -> usize {
        let n = self.local.len().max(1);
        match self.config.strict.0 {
            0 => 1,
            1 => n,
            k => k.min(n),
        }
    }

    /// The workers of simulated process `g`: those whose
    /// `i * groups / n` is `g`, i.e. from `ceil(g * n / groups)` on.
    fn simulated_range(&self, g: usize) -> Range<usize> {
        let (n, groups) = (self.local.len().max(1), self.groups());
        let first = |g: usize| self.local.start + (g * n).div_ceil(groups);
        first(g)..first(g + 1)
    }

    /// The simulated process of the caller: its worker's, or, for a thread
    /// outside the runtime, that of the first worker of this process (where
    /// such threads' messages enter, see `trust::toggle_anywhere`).
    fn simulated_caller(&self, from: Option<usize>) -> usize {
        self.simulated(from.filter(|&c| self.is_local(c)).unwrap_or(self.local.start))
    }

    /// Whether thread `t` is, by the rules, in another process than the
    /// caller (worker `from`, or `None` outside the runtime): truly, or
    /// under strict mode.
    #[inline]
    pub(crate) fn crosses(&self, from: Option<usize>, t: usize) -> bool {
        if !self.is_local(t) {
            return true;
        }
        self.config.strict.is_on() && self.simulated_caller(from) != self.simulated(t)
    }

    /// Whether thread `t` is in this process but, under strict mode, in
    /// another simulated process than the caller: the data path is this
    /// process's, the rules are those of another process.
    #[inline]
    pub(crate) fn simulated_foreign(&self, from: Option<usize>, t: usize) -> bool {
        self.is_local(t) && self.crosses(from, t)
    }

    /// The trustees that placement from the caller picks among: this
    /// process's (see `trustee_range`), narrowed under strict mode to the
    /// caller's simulated process, as a process of a rack places only on
    /// its own threads.
    pub(crate) fn placement_range(&self, from: Option<usize>) -> Range<usize> {
        self.narrow_to_caller(from, self.trustee_range())
    }

    /// `all` (threads of this process), narrowed under strict mode to the
    /// caller's simulated process; to all of that process where the two do
    /// not meet.
    pub(crate) fn narrow_to_caller(&self, from: Option<usize>, all: Range<usize>) -> Range<usize> {
        if !self.config.strict.is_on() {
            return all;
        }
        let own = self.simulated_range(self.simulated_caller(from));
        let narrowed = all.start.max(own.start)..all.end.min(own.end);
        if narrowed.is_empty() {
            own
        } else {
            narrowed
        }
    }
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests {
    /// Every worker belongs to exactly one simulated process, whose range
    /// holds it, for every split of every size.
    #[test]
    fn simulated_processes_partition_the_workers() {
        for workers in 1..9 {
            for strict in 1..11 {
                let rt = crate::Runtime::builder().workers(workers).strict(strict).build().unwrap();
                let s = &rt.shared;
                let mut seen = 0;
                for g in 0..s.groups() {
                    let r = s.simulated_range(g);
                    assert!(!r.is_empty(), "{workers} workers, strict {strict}: group {g} is empty");
                    for t in r {
                        assert_eq!(s.simulated(t), g, "{workers} workers, strict {strict}: worker {t}");
                        seen += 1;
                    }
                }
                assert_eq!(seen, workers);
            }
        }
    }
}
