//! Per-trust and per-trustee profiles, switched on at run time.
//!
//! Off by default, and then free: the delegation path tests one
//! process-wide flag (`active`) with a plain load and takes a cold path
//! only when some runtime of the process profiles something or tracks
//! waiting fibers. Counters live in thread-locals written only by their
//! owner worker (no atomic read-modify-write, and no allocation per
//! request: a trust's counters are allocated the first time it is seen);
//! readers ask every worker for a copy through its injection queue and sum
//! the copies. This module owns the switch (`Control`) and the public
//! values; `counters` the recording, `histogram` the latency buckets,
//! `table` the text table, `tracing` export and the line format that
//! `gossamer top` reads.
//!
//! ```
//! use gossamer::profile::Target;
//! let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
//! let counter = rt.trustee(1).entrust(0u64);
//! rt.profile(Target::trust(&counter));
//! let c = counter.clone();
//! rt.block_on(move || {
//!     for _ in 0..10 {
//!         c.apply(|v| *v += 1);
//!     }
//! });
//! let p = rt.profile_snapshot();
//! let t = p.trust(counter.profile_id()).unwrap();
//! assert_eq!(t.requests, 10);
//! assert_eq!(t.type_name, "u64");
//! println!("{p}");
//! ```

pub(crate) mod counters;
mod histogram;
mod table;

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

pub use crate::runtime::stuck::{Backlog, StuckDump, WaitOn, WaitingFiber};
pub use histogram::{bucket, bucket_high, Histogram, BUCKETS};
pub use table::FORMAT_VERSION;

/// Runtimes of this process that profile or track waits right now.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// True when some runtime of this process profiles something or tracks
/// waiting fibers: the only test on the delegation path when all is off.
#[inline(always)]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// Identifies a trusted property (all trusts to it share it): the address
/// of its cell, unique while the property lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TrustId(pub u64);

impl std::fmt::Display for TrustId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// What to profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Every trust and trustee.
    All,
    /// One property (see [`Target::trust`]): its requests, local hits,
    /// round trips and service time.
    Property(TrustId),
    /// One trustee: the trusts it owns, and the batches sent to it.
    Trustee(usize),
}

/// Profiles of the trusts and trustees of a runtime, summed over its
/// workers. Counting starts when profiling is switched on for them.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// One entry per profiled property, hottest (most requests) first.
    pub trusts: Vec<TrustProfile>,
    /// One entry per profiled trustee, by index.
    pub trustees: Vec<TrusteeProfile>,
    /// Workers that did not answer in time (a fiber that never yields
    /// holds its thread); their counters are missing.
    pub missing_workers: Vec<usize>,
}

impl Profile {
    /// The profile of one property, if it was profiled.
    pub fn trust(&self, id: TrustId) -> Option<&TrustProfile> {
        self.trusts.iter().find(|t| t.id == id)
    }

    /// The profile of one trustee, if it was profiled.
    pub fn trustee(&self, index: usize) -> Option<&TrusteeProfile> {
        self.trustees.iter().find(|t| t.trustee == index)
    }
}

/// What happened to one property while profiled.
///
/// A worker keeps at most 2048 properties apart; requests to others it
/// sees are summed in one entry per trustee, with `type_name`
/// `"(other trusts)"` and the trustee's index as its id.
#[derive(Clone, Debug)]
pub struct TrustProfile {
    /// The property.
    pub id: TrustId,
    /// `std::any::type_name` of the property.
    pub type_name: &'static str,
    /// Its trustee.
    pub trustee: usize,
    /// Closures issued to it (`apply`, `apply_then`, `apply_with`, …),
    /// local shortcuts included.
    pub requests: u64,
    /// Of those, run directly because the caller was on the trustee.
    pub local_hits: u64,
    /// Closures the trustee ran from its request slots.
    pub served: u64,
    /// Time the trustee spent in them, in nanoseconds.
    pub service_ns: u64,
    /// Service time per closure (ns).
    pub service: Histogram,
    /// Round trip of each waiting `apply` that crossed threads (ns): from
    /// queueing the request to the caller's resumption.
    pub round_trip: Histogram,
    /// For an adaptive property ([`Adaptive`](crate::Adaptive)), who ran
    /// its closures when the profile was read: `"lock"` (callers in place)
    /// or `"delegate"` (the trustee). `None` for a plain trust.
    pub mode: Option<&'static str>,
}

/// The current mode of the adaptive property with a given profile key, if
/// it is one: a hook that the trust layer installs with its first adaptive
/// property.
pub(crate) static MODE_OF: std::sync::OnceLock<fn(usize) -> Option<&'static str>> = std::sync::OnceLock::new();

/// What happened at one trustee while profiled.
#[derive(Clone, Debug, Default)]
pub struct TrusteeProfile {
    /// The trustee.
    pub trustee: usize,
    /// Batches clients published to it.
    pub batches_sent: u64,
    /// Requests in those batches (the runtime's own messages included).
    pub requests_sent: u64,
    /// Requests per batch.
    pub batch_sizes: Histogram,
    /// How long the oldest profiled request of a batch waited in its
    /// client's queue before the batch left (ns), per batch.
    pub queued: Histogram,
    /// Batches it served.
    pub batches_served: u64,
    /// Requests in them.
    pub requests_served: u64,
    /// Time spent serving batches, in nanoseconds.
    pub busy_ns: u64,
}

impl TrusteeProfile {
    /// Mean requests per batch sent to this trustee.
    pub fn mean_batch(&self) -> f64 {
        if self.batches_sent == 0 {
            0.0
        } else {
            self.requests_sent as f64 / self.batches_sent as f64
        }
    }
}

/// How a runtime watches itself; set by the [`Builder`](crate::Builder)
/// or the environment (see the builder's methods).
#[derive(Clone, Debug, Default)]
pub(crate) struct Options {
    /// Profile everything from the start.
    pub(crate) profile_all: bool,
    /// Record which fiber waits on what, for [`StuckDump`]s.
    pub(crate) track_waits: bool,
    /// Print a stuck dump on `SIGUSR1`.
    pub(crate) dump_on_sigusr1: bool,
    /// Serve profiles on a Unix socket for `gossamer top`.
    pub(crate) top_socket: bool,
}

impl Options {
    /// Adds what the environment asks for: `GOSSAMER_TOP=1` (the socket),
    /// `GOSSAMER_DUMP_ON_SIGUSR1=1`, `GOSSAMER_TRACK_WAITS=1`,
    /// `GOSSAMER_PROFILE=all`.
    pub(crate) fn with_env(mut self) -> Self {
        let on = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty() && v != "0");
        self.top_socket |= on("GOSSAMER_TOP");
        self.dump_on_sigusr1 |= on("GOSSAMER_DUMP_ON_SIGUSR1");
        self.track_waits |= on("GOSSAMER_TRACK_WAITS") || self.top_socket || self.dump_on_sigusr1;
        self.profile_all |= std::env::var("GOSSAMER_PROFILE").is_ok_and(|v| v == "all");
        self
    }
}

const OFF: u8 = 0;
const ALL: u8 = 1;
const SOME: u8 = 2;
const TRUST_SLOTS: usize = 16;

/// A runtime's switches: what is profiled, whether waits are tracked.
/// Written rarely (by the API), read with relaxed loads on the cold path.
pub(crate) struct Control {
    mode: AtomicU8,
    trustees: Box<[AtomicBool]>,
    trusts: [AtomicUsize; TRUST_SLOTS],
    track_waits: AtomicBool,
    /// Whether this runtime counts in `ACTIVE`; changes under the lock.
    counted: Mutex<bool>,
    pub(crate) options: Options,
    /// Stops the services started for this runtime (socket, signal).
    pub(crate) services: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl Control {
    pub(crate) fn new(n: usize, options: Options) -> Control {
        let c = Control {
            mode: AtomicU8::new(OFF),
            trustees: (0..n).map(|_| AtomicBool::new(false)).collect(),
            trusts: std::array::from_fn(|_| AtomicUsize::new(0)),
            track_waits: AtomicBool::new(false),
            counted: Mutex::new(false),
            options,
            services: Mutex::new(Vec::new()),
        };
        if c.options.profile_all {
            c.enable(Target::All);
        }
        if c.options.track_waits {
            c.set_track_waits(true);
        }
        c
    }

    fn update_active(&self) {
        let mut counted = self.counted.lock().unwrap_or_else(|e| e.into_inner());
        let want = self.mode.load(Ordering::Relaxed) != OFF || self.track_waits.load(Ordering::Relaxed);
        if want && !*counted {
            ACTIVE.fetch_add(1, Ordering::Relaxed);
        } else if !want && *counted {
            ACTIVE.fetch_sub(1, Ordering::Relaxed);
        }
        *counted = want;
    }

    pub(crate) fn enable(&self, target: Target) {
        match target {
            Target::All => self.mode.store(ALL, Ordering::Relaxed),
            Target::Trustee(t) => {
                assert!(t < self.trustees.len(), "gossamer: no trustee {t} to profile");
                self.trustees[t].store(true, Ordering::Relaxed);
                let _ = self.mode.compare_exchange(OFF, SOME, Ordering::Relaxed, Ordering::Relaxed);
            }
            Target::Property(id) => {
                let key = id.0 as usize;
                if !self.trusts.iter().any(|s| s.load(Ordering::Relaxed) == key) {
                    let free = self.trusts.iter().find(|s| s.load(Ordering::Relaxed) == 0);
                    let Some(free) = free else {
                        panic!("gossamer: at most {TRUST_SLOTS} trusts can be profiled one by one; use Target::All")
                    };
                    free.store(key, Ordering::Relaxed);
                }
                let _ = self.mode.compare_exchange(OFF, SOME, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        self.update_active();
    }

    pub(crate) fn disable_all(&self) {
        self.mode.store(OFF, Ordering::Relaxed);
        for t in self.trustees.iter() {
            t.store(false, Ordering::Relaxed);
        }
        for s in &self.trusts {
            s.store(0, Ordering::Relaxed);
        }
        self.update_active();
    }

    pub(crate) fn set_track_waits(&self, on: bool) {
        self.track_waits.store(on, Ordering::Relaxed);
        self.update_active();
    }

    pub(crate) fn tracking_waits(&self) -> bool {
        self.track_waits.load(Ordering::Relaxed)
    }

    pub(crate) fn profiling(&self) -> bool {
        self.mode.load(Ordering::Relaxed) != OFF
    }

    /// Whether requests to property `key` on trustee `t` are profiled.
    #[inline]
    pub(crate) fn wants(&self, key: usize, t: usize) -> bool {
        match self.mode.load(Ordering::Relaxed) {
            OFF => false,
            ALL => true,
            _ => {
                self.trustees.get(t).is_some_and(|b| b.load(Ordering::Relaxed))
                    || self.trusts.iter().any(|s| s.load(Ordering::Relaxed) == key)
            }
        }
    }

    /// Whether batches to or at trustee `t` are profiled.
    #[inline]
    pub(crate) fn wants_trustee(&self, t: usize) -> bool {
        match self.mode.load(Ordering::Relaxed) {
            OFF => false,
            ALL => true,
            _ => self.trustees.get(t).is_some_and(|b| b.load(Ordering::Relaxed)),
        }
    }

    /// Stops the services and leaves `ACTIVE` (at shutdown).
    pub(crate) fn shut_down(&self) {
        let stops = std::mem::take(&mut *self.services.lock().unwrap_or_else(|e| e.into_inner()));
        for stop in stops {
            stop();
        }
        self.mode.store(OFF, Ordering::Relaxed);
        self.track_waits.store(false, Ordering::Relaxed);
        self.update_active();
    }
}
