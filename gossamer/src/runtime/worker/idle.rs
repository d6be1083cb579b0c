//! Idling: what a worker does when an iteration found nothing to do, and
//! the checks that decide whether it may sleep.

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use super::Worker;

// The polling parameters are live (`TrusteeParams`, read per idle round).
// The default of 128 tight rounds (a few microseconds) was measured on a
// 2-core virtual machine: spinning tightly much longer made the first
// request after an idle period slower (86 µs after 512 rounds, 40 µs after
// 128), and the round trip no faster.

/// How long the worker has found nothing to do.
#[derive(Default)]
pub(super) struct Idle {
    pub(super) rounds: u32,
    pub(super) since: Option<Instant>,
}

impl Worker {
    pub(super) fn lanes_idle(&self) -> bool {
        self.lanes.iter().all(|l| {
            let l = l.borrow();
            l.in_flight == 0 && l.pending.is_empty()
        })
    }

    /// Anything for us to do, as seen from shared memory?
    pub(super) fn has_incoming(&self) -> bool {
        let me = self.index;
        let sh = &self.shared;
        let local = sh.local_worker(me);
        if local.has_inject.load(Ordering::Relaxed) || !local.submissions.is_empty() || sh.stopped() {
            return true;
        }
        (0..sh.n).any(|c| {
            if sh.same_host(c) {
                sh.matrix.request(c, me).flag() != self.served[c].get()
            } else {
                self.far_request_waiting(c)
            }
        }) || (0..sh.n).any(|t| {
            let l = self.lanes[t].borrow();
            if l.in_flight == 0 {
                false
            } else if sh.same_host(t) {
                sh.matrix.response(me, t).flag() == l.flag
            } else {
                self.far_response_waiting(t, l.flag)
            }
        }) || self.fabric_busy()
    }

    pub(super) fn set_quiet(&self, q: bool) {
        if self.quiet.get() != q {
            self.quiet.set(q);
            self.shared.doorbell(self.index).quiet.store(q as u32, Ordering::SeqCst);
        }
    }

    /// Called when an iteration found nothing to do. Polls tightly at
    /// first (a response is usually a fraction of a microsecond away), then
    /// yields the core between polls, and after `idle_spin` sleeps until
    /// someone sends work.
    pub(super) fn idle(&self, idle: &mut Idle) {
        idle.rounds += 1;
        let tune = self.shared.tune(self.index);
        if idle.rounds < tune.tight_polls() {
            // One pause between polls: a pause costs from a few to over a
            // hundred cycles depending on the processor, and every one of
            // them delays noticing the answer (on a Zen core, 16 pauses
            // between polls were 0.4 µs and doubled an apply round trip).
            std::hint::spin_loop();
            return;
        }
        let start = *idle.since.get_or_insert_with(Instant::now);
        if start.elapsed() < tune.idle_spin() {
            thread::yield_now();
            return;
        }
        let bell = self.shared.doorbell(self.index);
        bell.sleeping.store(1, Ordering::Relaxed);
        crate::runtime::fence::heavy();
        let ticket = crate::runtime::park::ticket(&bell.futex);
        if !self.has_incoming() {
            // Between hosts a put may land without anyone ringing: look again soon.
            let poll = tune.sleep_poll();
            let nap = if self.shared.fabric.is_some() { poll.min(Duration::from_millis(2)) } else { poll };
            crate::runtime::park::wait(&bell.futex, ticket, nap);
        }
        bell.sleeping.store(0, Ordering::Relaxed);
    }
}
