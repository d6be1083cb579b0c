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
    /// While polling tightly, rounds between polls of the fabric's
    /// receiver; set in the first round.
    fabric_every: u32,
}

/// While polling tightly for an answer from a thread of this host, rounds
/// between polls of the fabric's receiver: over TCP each poll is a system
/// call, which would delay seeing the answer. Otherwise every round polls:
/// on 2 simulated hosts (2 cores) polling every 32 rounds made a blocking
/// round trip 40–45 µs, every round 29–36 µs.
const FABRIC_POLL_LOCAL_WAIT: u32 = 32;

/// Between hosts, the most times over `idle_spin` (as a power of two) a
/// worker polls before sleeping (see `Worker::adapt_spin`).
const MAX_SPIN_BOOST: u32 = 4;

/// A sleep shorter than this many times `idle_spin` was cut short by work.
const SHORT_SLEEP: u32 = 4;

impl Worker {
    /// Takes in what other hosts put into this process, if no other thread
    /// of it is at that; when anything arrived, wakes the process's other
    /// sleeping workers, since the slot that changed may be theirs.
    fn poll_fabric(&self) -> bool {
        let Some(f) = &self.shared.fabric else { return false };
        if !f.poll() {
            return false;
        }
        // We are awake: waking ourselves only reads our own flag.
        self.shared.wake_local();
        true
    }

    /// Whether we wait for an answer from a thread of this host.
    fn waits_on_host(&self) -> bool {
        let sh = &self.shared;
        self.lanes.iter().enumerate().any(|(t, l)| l.borrow().in_flight != 0 && sh.same_host(t))
    }

    pub(super) fn lanes_idle(&self) -> bool {
        self.lanes.iter().all(|l| l.borrow().idle())
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
            if !sh.same_host(t) {
                return self.far_response_waiting(t);
            }
            let l = self.lanes[t].borrow();
            l.in_flight != 0 && sh.matrix.response(me, t).flag() == l.flag
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
        let tight = idle.rounds < tune.tight_polls();
        if self.shared.fabric.is_some() {
            if idle.fabric_every == 0 {
                idle.fabric_every = if self.waits_on_host() { FABRIC_POLL_LOCAL_WAIT } else { 1 };
            }
            // Between hosts, what another host put here is only written by
            // a progress of the fabric's receiver: take it in ourselves, and
            // do not wait for the receiver thread to be scheduled.
            if (!tight || idle.rounds % idle.fabric_every == 0) && self.poll_fabric() {
                return;
            }
        }
        if tight {
            // One pause between polls: a pause costs from a few to over a
            // hundred cycles depending on the processor, and every one of
            // them delays noticing the answer (on a Zen core, 16 pauses
            // between polls were 0.4 µs and doubled an apply round trip).
            std::hint::spin_loop();
            return;
        }
        let start = *idle.since.get_or_insert_with(Instant::now);
        let spin = tune.idle_spin() * (1 << self.spin_boost.get());
        if start.elapsed() < spin {
            thread::yield_now();
            return;
        }
        let bell = self.shared.doorbell(self.index);
        bell.sleeping.store(1, Ordering::Relaxed);
        crate::runtime::fence::heavy();
        let ticket = crate::runtime::park::ticket(&bell.futex);
        let slept = Instant::now();
        if !self.has_incoming() {
            // Between hosts a put may land without anyone ringing: look again soon.
            let poll = tune.sleep_poll();
            let nap = if self.shared.fabric.is_some() { poll.min(Duration::from_millis(2)) } else { poll };
            crate::runtime::park::wait(&bell.futex, ticket, nap);
        }
        bell.sleeping.store(0, Ordering::Relaxed);
        if self.shared.fabric.is_some() {
            self.adapt_spin(slept.elapsed(), spin, tune.idle_spin());
        }
    }

    /// Between hosts: polls longer before sleeping after a sleep that
    /// work cut short (shorter than `SHORT_SLEEP` times `idle_spin`), and
    /// less long after a sleep that lasted longer than it polled. A worker
    /// asleep is woken through the fabric's receiver thread, which costs
    /// more than `idle_spin` on a loaded machine; a peer that waits for
    /// our answer then waits longer than `idle_spin` for its next request,
    /// sleeps too, and the round trip stays slow (2 simulated hosts, 2
    /// cores: 150–200 µs against 25–35 µs while both poll).
    fn adapt_spin(&self, slept: Duration, spin: Duration, base: Duration) {
        let boost = self.spin_boost.get();
        if slept < base * SHORT_SLEEP {
            self.spin_boost.set((boost + 1).min(MAX_SPIN_BOOST));
        } else if slept > spin {
            self.spin_boost.set(boost.saturating_sub(1));
        }
    }
}
