//! Stuck requests: which fiber waits on what, since when, and each
//! trustee's backlog.
//!
//! While wait tracking is on (see [`Builder::track_waits`](crate::Builder::track_waits)),
//! a fiber that suspends for a trustee's answer, a `launch`, or a held
//! [`Latch`](crate::Latch) leaves one record in its worker's thread-local
//! list, removed when it resumes; suspending is already the slow path. A
//! [`StuckDump`] gathers the records and the request queues of every
//! worker.

use std::cell::RefCell;
use std::fmt;
use std::time::{Duration, Instant};

use super::profile::counters::{on_each_worker, ANSWER_TIMEOUT};
use super::profile::{active, TrustId};
use super::shared::Shared;
use super::worker::Worker;

/// What a fiber waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOn {
    /// The answer of an `apply` (or `apply_with`) from trustee `.0`.
    Apply(usize),
    /// The result of a `launch` on trustee `.0`.
    Launch(usize),
    /// [`Latch::lock`](crate::Latch::lock) on a latch another fiber of its
    /// thread holds.
    Lock,
}

impl fmt::Display for WaitOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitOn::Apply(t) => write!(f, "apply on trustee {t}"),
            WaitOn::Launch(t) => write!(f, "launch on trustee {t}"),
            WaitOn::Lock => write!(f, "latch"),
        }
    }
}

/// One waiting fiber.
#[derive(Clone, Debug)]
pub struct WaitingFiber {
    /// The worker (thread index) the fiber runs on.
    pub worker: usize,
    /// That worker's thread name.
    pub thread: String,
    /// The fiber's index on its worker (reused after it finishes).
    pub fiber: u32,
    /// What it waits for.
    pub on: WaitOn,
    /// How long it has waited.
    pub waited: Duration,
    /// `std::any::type_name` of the property (for a latch: of its value).
    pub type_name: &'static str,
    /// The property (for a latch: the latch's address).
    pub trust: TrustId,
}

/// Requests from one worker to one trustee not yet answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backlog {
    /// The trustee.
    pub trustee: usize,
    /// The client worker.
    pub client: usize,
    /// Requests still in the client's queue.
    pub queued: usize,
    /// Requests published in a batch the trustee has not answered.
    pub in_flight: usize,
}

/// A snapshot of who waits on whom; see [`Runtime::stuck`](crate::Runtime::stuck).
#[derive(Clone, Debug, Default)]
pub struct StuckDump {
    /// Whether waits were being recorded (without it, `waiting` is empty).
    pub tracking: bool,
    /// Waiting fibers, longest wait first.
    pub waiting: Vec<WaitingFiber>,
    /// Unanswered requests per (client, trustee) pair.
    pub backlogs: Vec<Backlog>,
    /// Live fibers per worker.
    pub live_fibers: Vec<(usize, usize)>,
    /// Workers that did not answer in time (a fiber holds the thread).
    pub missing_workers: Vec<usize>,
}

impl StuckDump {
    /// The waiting fibers of worker `w`.
    pub fn on_worker(&self, w: usize) -> impl Iterator<Item = &WaitingFiber> {
        self.waiting.iter().filter(move |f| f.worker == w)
    }

    /// Outstanding requests to trustee `t`, over all clients.
    pub fn backlog_of(&self, t: usize) -> usize {
        self.backlogs.iter().filter(|b| b.trustee == t).map(|b| b.queued + b.in_flight).sum()
    }
}

impl fmt::Display for StuckDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "gossamer stuck dump: {} waiting fiber(s){}",
            self.waiting.len(),
            if self.tracking { "" } else { " (wait tracking is off: Builder::track_waits or GOSSAMER_TRACK_WAITS=1)" }
        )?;
        for w in &self.waiting {
            writeln!(
                f,
                "  worker {} ({}) fiber {} waits {:.3}s on {} [{} {}]",
                w.worker,
                w.thread,
                w.fiber,
                w.waited.as_secs_f64(),
                w.on,
                w.type_name,
                w.trust
            )?;
        }
        let mut trustees: Vec<usize> = self.backlogs.iter().map(|b| b.trustee).collect();
        trustees.sort_unstable();
        trustees.dedup();
        writeln!(f, "trustee backlogs:{}", if trustees.is_empty() { " none" } else { "" })?;
        for t in trustees {
            let (q, i): (usize, usize) = self
                .backlogs
                .iter()
                .filter(|b| b.trustee == t)
                .fold((0, 0), |(q, i), b| (q + b.queued, i + b.in_flight));
            let clients: Vec<usize> = self.backlogs.iter().filter(|b| b.trustee == t).map(|b| b.client).collect();
            writeln!(f, "  trustee {t}: {} outstanding ({q} queued, {i} in flight) from workers {clients:?}", q + i)?;
        }
        let live: Vec<String> = self.live_fibers.iter().map(|(w, n)| format!("{w}:{n}")).collect();
        writeln!(f, "live fibers (worker:count): {}", live.join(" "))?;
        if !self.missing_workers.is_empty() {
            writeln!(f, "no answer from workers {:?} (a fiber that never yields holds them)", self.missing_workers)?;
        }
        Ok(())
    }
}

struct Record {
    fiber: u32,
    on: WaitOn,
    since: Instant,
    type_name: &'static str,
    trust: usize,
}

thread_local! {
    /// Indexed by fiber id (fibers wait for one thing at a time).
    static WAITS: RefCell<Vec<Option<Record>>> = const { RefCell::new(Vec::new()) };
}

/// A recorded wait, removed when dropped (the fiber resumed, or unwound).
pub(crate) struct Waiting {
    fiber: u32,
}

impl Waiting {
    /// Records that the running fiber of `w` is about to wait for `on`,
    /// if wait tracking is on.
    #[inline]
    pub(crate) fn begin(w: &Worker, on: WaitOn, type_name: &'static str, trust: usize) -> Option<Waiting> {
        Self::begin_at(w, on, type_name, trust, None)
    }

    /// As [`begin`](Self::begin), with the time the wait started if the
    /// caller has read the clock already.
    #[inline]
    pub(crate) fn begin_at(
        w: &Worker,
        on: WaitOn,
        type_name: &'static str,
        trust: usize,
        since: Option<Instant>,
    ) -> Option<Waiting> {
        if !active() || !w.shared.observe.tracking_waits() {
            return None;
        }
        Some(Self::record(w.current_fiber(), on, type_name, trust, since))
    }

    #[cold]
    #[inline(never)]
    fn record(fiber: u32, on: WaitOn, type_name: &'static str, trust: usize, since: Option<Instant>) -> Waiting {
        let r = Record { fiber, on, since: since.unwrap_or_else(Instant::now), type_name, trust };
        WAITS.with(|l| {
            let mut l = l.borrow_mut();
            let i = fiber as usize;
            if l.len() <= i {
                l.resize_with(i + 1, || None);
            }
            l[i] = Some(r);
        });
        Waiting { fiber }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let _ = WAITS.try_with(|l| {
            if let Some(r) = l.borrow_mut().get_mut(self.fiber as usize) {
                *r = None;
            }
        });
    }
}

struct WorkerPart {
    waiting: Vec<WaitingFiber>,
    backlogs: Vec<Backlog>,
    live: usize,
}

fn take_part(w: &Worker) -> WorkerPart {
    let thread = std::thread::current().name().unwrap_or("?").to_string();
    let now = Instant::now();
    let waiting = WAITS.with(|l| {
        l.borrow()
            .iter()
            .flatten()
            .map(|r| WaitingFiber {
                worker: w.index,
                thread: thread.clone(),
                fiber: r.fiber,
                on: r.on,
                waited: now.saturating_duration_since(r.since),
                type_name: r.type_name,
                trust: TrustId(r.trust as u64),
            })
            .collect()
    });
    let backlogs = (0..w.shared.n)
        .filter_map(|t| {
            let (queued, in_flight) = w.backlog(t);
            (queued + in_flight > 0).then_some(Backlog { trustee: t, client: w.index, queued, in_flight })
        })
        .collect();
    WorkerPart { waiting, backlogs, live: w.live_fibers() }
}

/// Gathers a dump from every local worker of `sh`.
pub(crate) fn dump(sh: &Shared) -> StuckDump {
    let (parts, missing_workers) = on_each_worker(sh, ANSWER_TIMEOUT, take_part);
    let mut d = StuckDump { tracking: sh.observe.tracking_waits(), missing_workers, ..StuckDump::default() };
    for (w, p) in parts {
        d.waiting.extend(p.waiting);
        d.backlogs.extend(p.backlogs);
        d.live_fibers.push((w, p.live));
    }
    d.waiting.sort_by_key(|f| std::cmp::Reverse(f.waited));
    d
}
