//! The controller behind `DedicatedPolicy::Auto`: a thread that, every
//! window, reads how much of it each local worker spent serving request
//! slots and how much on its client side (running fibers, issuing and
//! completing requests), and moves the number of dedicated trustees one
//! step at a time, with hysteresis, toward the split the load asks for.
//!
//! The rule (`Decider::step`), with `S` and `F` the serving and client time
//! of all workers in the window and `s = S / (S + F)` the serving share:
//!
//! * one more dedicated trustee when `s` exceeds `(k + 1) / n` by a margin
//!   (serving needs more than the cores it would get);
//! * one fewer when `s` is below `k / n` by the margin, or when the
//!   dedicated trustees spend most of the window idle (they wait for
//!   requests that the fewer clients cannot produce);
//! * a move only after `STREAK` windows in a row agree, and never while
//!   the workers are nearly idle (nothing to judge by).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::shared::Shared;

/// The margin around the break-even shares.
const MARGIN: f64 = 0.15;
/// Windows in a row that must agree before `k` moves.
const STREAK: u32 = 3;
/// Below this busy fraction of all workers, a window says nothing.
const QUIET: f64 = 0.05;
/// Dedicated trustees busy less than this fraction of a window are idle.
const IDLE_DEDICATED: f64 = 0.25;

/// One worker's share of a window: serving, and client side (0 to 1 each).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Load {
    pub(crate) serve: f64,
    pub(crate) client: f64,
}

/// The controller's memory between windows.
#[derive(Debug, Default)]
pub(crate) struct Decider {
    up: u32,
    down: u32,
}

impl Decider {
    /// The count for the next window, given the count `k` in force and the
    /// last window's load of each of the `loads.len()` local workers (the
    /// dedicated ones last).
    pub(crate) fn step(&mut self, k: usize, loads: &[Load]) -> usize {
        let n = loads.len();
        let serve: f64 = loads.iter().map(|l| l.serve).sum();
        let client: f64 = loads.iter().map(|l| l.client).sum();
        let busy = serve + client;
        if n < 2 || busy < QUIET * n as f64 {
            self.up = 0;
            self.down = 0;
            return k;
        }
        let share = serve / busy;
        let dedicated_busy =
            if k > 0 { loads[n - k..].iter().map(|l| l.serve + l.client).sum::<f64>() / k as f64 } else { 1.0 };
        let want_up = k + 1 < n && share > (k + 1) as f64 / n as f64 + MARGIN;
        let want_down = k > 0 && (share < k as f64 / n as f64 - MARGIN || dedicated_busy < IDLE_DEDICATED);
        self.up = if want_up { self.up + 1 } else { 0 };
        self.down = if want_down && !want_up { self.down + 1 } else { 0 };
        if self.up >= STREAK {
            self.up = 0;
            k + 1
        } else if self.down >= STREAK {
            self.down = 0;
            k - 1
        } else {
            k
        }
    }
}

/// Starts the controller thread of `sh` unless it runs already. It stops
/// with the runtime's other services.
pub(crate) fn ensure_started(sh: &Arc<Shared>) {
    if !sh.tuning.claim_controller() {
        return;
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (weak, stop2) = (Arc::downgrade(sh), stop.clone());
    let window = sh.config.dedicated_window;
    let spawned = std::thread::Builder::new()
        .name(format!("{}-dedicate", sh.config.name))
        .spawn(move || run(weak, &stop2, window));
    match spawned {
        Ok(handle) => {
            let thread = handle.thread().clone();
            sh.observe.services.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(move || {
                stop.store(true, Ordering::Relaxed);
                thread.unpark();
                let _ = handle.join();
            }));
        }
        Err(e) => tracing::warn!("cannot start the dedicated-trustee controller: {e}; the count stays fixed"),
    }
}

/// The controller's loop: one decision per window while the policy is
/// `Auto`; the counters are read every window either way, so that a
/// switch to `Auto` judges by the latest window only.
fn run(sh: Weak<Shared>, stop: &std::sync::atomic::AtomicBool, window: Duration) {
    let mut decider = Decider::default();
    let mut last: Option<(Instant, Vec<(u64, u64)>)> = None;
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(window);
        let Some(sh) = sh.upgrade().filter(|s| !s.stopped()) else { return };
        let now = Instant::now();
        let counts: Vec<(u64, u64)> = sh
            .local
            .clone()
            .map(|t| {
                let w = sh.tune(t);
                (w.serve_ns.load(Ordering::Relaxed), w.fiber_ns.load(Ordering::Relaxed))
            })
            .collect();
        if let Some((then, before)) = last.replace((now, counts.clone())) {
            let span = now.duration_since(then).as_nanos().max(1) as f64;
            if !sh.tuning.auto() {
                decider = Decider::default();
                continue;
            }
            let loads: Vec<Load> = counts
                .iter()
                .zip(&before)
                .map(|(&(s, f), &(s0, f0))| Load {
                    serve: (s.saturating_sub(s0) as f64 / span).min(1.0),
                    client: (f.saturating_sub(f0) as f64 / span).min(1.0),
                })
                .collect();
            let k = sh.tuning.dedicated();
            let next = decider.step(k, &loads);
            // The program may fix a count meanwhile: `change_dedicated`
            // moves only while the policy is still ours.
            if next != k {
                tracing::debug!(?loads, from = k, to = next, "controller moves the dedicated count");
                sh.change_dedicated(next, true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Decider, Load, STREAK};

    fn loads(v: &[(f64, f64)]) -> Vec<Load> {
        v.iter().map(|&(serve, client)| Load { serve, client }).collect()
    }

    fn settle(k: usize, l: &[Load]) -> usize {
        let mut d = Decider::default();
        let mut k = k;
        for _ in 0..20 * STREAK {
            k = d.step(k, l);
        }
        k
    }

    #[test]
    fn serving_heavy_load_dedicates_and_client_heavy_load_releases() {
        // Two workers: one serves all the time, the other waits.
        assert_eq!(settle(0, &loads(&[(0.05, 0.05), (1.0, 0.0)])), 1);
        // Fibers compute everywhere, little serving.
        assert_eq!(settle(1, &loads(&[(0.0, 1.0), (0.1, 0.0)])), 0);
        // Balanced: stays where it is.
        assert_eq!(settle(0, &loads(&[(0.5, 0.5), (0.5, 0.5)])), 0);
        // Four workers, three quarters serving: up to three, never four.
        assert_eq!(settle(0, &loads(&[(0.0, 0.2), (1.0, 0.0), (1.0, 0.0), (1.0, 0.0)])), 3);
    }

    #[test]
    fn one_window_moves_nothing_and_quiet_windows_say_nothing() {
        let mut d = Decider::default();
        let heavy = loads(&[(0.0, 0.0), (1.0, 0.0)]);
        for _ in 0..STREAK - 1 {
            assert_eq!(d.step(0, &heavy), 0);
        }
        // A quiet window in between resets the streak.
        assert_eq!(d.step(0, &loads(&[(0.0, 0.0), (0.01, 0.0)])), 0);
        for _ in 0..STREAK - 1 {
            assert_eq!(d.step(0, &heavy), 0);
        }
        assert_eq!(d.step(0, &heavy), 1);
    }

    #[test]
    fn idle_dedicated_trustees_are_released() {
        // The client is busy, the dedicated trustee mostly waits for it.
        assert_eq!(settle(1, &loads(&[(0.3, 0.7), (0.1, 0.0)])), 0);
    }
}
