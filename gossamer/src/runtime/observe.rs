//! The runtime's face for watching itself: switching profiles on and off,
//! reading them, stuck dumps, and starting the services (the `gossamer top`
//! socket, the `SIGUSR1` dump) that the builder or environment asked for.

use std::path::PathBuf;
use std::sync::Arc;

use super::profile::{counters, Profile, StuckDump, Target};
use super::shared::Shared;
use super::{signal, stuck, top_socket, Runtime};

impl Runtime {
    /// Starts profiling `target` (adding to what is profiled already).
    /// Counting starts now; everything else stays free.
    ///
    /// ```
    /// use gossamer::profile::Target;
    /// let rt = gossamer::Runtime::builder().workers(2).build().unwrap();
    /// rt.profile(Target::Trustee(1));
    /// let t = rt.trustee(1).entrust(0u64);
    /// rt.block_on(move || {
    ///     for _ in 0..100 {
    ///         t.apply(|v| *v += 1);
    ///     }
    /// });
    /// let p = rt.profile_snapshot();
    /// assert_eq!(p.trusts[0].requests, 100);
    /// assert!(p.trustee(1).unwrap().batches_served >= 1);
    /// ```
    pub fn profile(&self, target: Target) {
        self.shared.observe.enable(target);
    }

    /// Stops all profiling (the counters stay readable).
    pub fn profile_off(&self) {
        self.shared.observe.disable_all();
    }

    /// Whether anything is being profiled.
    pub fn profiling(&self) -> bool {
        self.shared.observe.profiling()
    }

    /// Zeroes the counters of every worker.
    pub fn profile_reset(&self) {
        counters::reset(&self.shared);
    }

    /// The counters of every worker, summed. Asks each worker for a copy
    /// through its injection queue (waiting up to 2 s for each); meant for
    /// threads outside the runtime.
    pub fn profile_snapshot(&self) -> Profile {
        counters::collect(&self.shared)
    }

    /// Switches recording of waiting fibers on or off at run time (see
    /// [`Builder::track_waits`](super::Builder::track_waits)).
    pub fn track_waits(&self, on: bool) {
        self.shared.observe.set_track_waits(on);
    }

    /// Every fiber waiting on a trustee, a `launch` or a latch (while wait
    /// tracking is on), and every unanswered request.
    ///
    /// ```
    /// let rt = gossamer::Runtime::builder().workers(2).track_waits(true).build().unwrap();
    /// let d = rt.stuck();
    /// assert!(d.tracking && d.waiting.is_empty());
    /// println!("{d}");
    /// ```
    pub fn stuck(&self) -> StuckDump {
        stuck::dump(&self.shared)
    }

    /// Where this runtime serves `gossamer top`, if it does (see
    /// [`Builder::top_socket`](super::Builder::top_socket)).
    pub fn top_socket_path(&self) -> Option<PathBuf> {
        top_socket::serving(&self.shared)
    }
}

/// Starts what the runtime's options ask for.
pub(crate) fn start_services(sh: &Arc<Shared>) {
    if sh.observe.options.top_socket {
        top_socket::start(sh);
    }
    if sh.observe.options.dump_on_sigusr1 {
        signal::register(sh);
    }
}
