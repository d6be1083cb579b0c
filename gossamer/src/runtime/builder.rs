//! `Builder`: how many workers, which of them only serve, pinning, stacks,
//! idling and shutdown.

use std::time::Duration;

use super::shared::Config;
use super::Runtime;
use crate::error::Error;

/// Configures and starts a [`Runtime`].
///
/// ```
/// use std::time::Duration;
/// let rt = gossamer::Runtime::builder()
///     .workers(2)
///     .stack_size(128 * 1024)
///     .idle_spin(Duration::from_micros(50))
///     .build()
///     .unwrap();
/// assert_eq!(rt.block_on(|| 6 * 7), 42);
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    workers: Option<usize>,
    dedicated: usize,
    dedicated_auto: bool,
    dedicated_window: Duration,
    pin: bool,
    stack_size: usize,
    stack_pool: usize,
    worker_stack_size: usize,
    idle_spin: Duration,
    shutdown_timeout: Duration,
    name: String,
    observe: super::profile::Options,
    trust_ids_issued: u64,
    strict: Option<usize>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            workers: None,
            dedicated: 0,
            dedicated_auto: false,
            dedicated_window: Duration::from_millis(20),
            pin: false,
            stack_size: 256 * 1024,
            stack_pool: 1024,
            worker_stack_size: 8 * 1024 * 1024,
            idle_spin: Duration::from_micros(100),
            shutdown_timeout: Duration::from_secs(10),
            name: "gossamer".into(),
            observe: super::profile::Options::default(),
            trust_ids_issued: 0,
            strict: None,
        }
    }
}

impl Builder {
    /// Number of worker threads (default: the available cores). Every worker
    /// is a trustee; all but the dedicated ones also run fibers.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// Makes the last `n` workers dedicated trustees: they only serve
    /// delegated closures (and fibers started by `launch`), and pool-level
    /// `entrust` places properties on them.
    ///
    /// The count can change while the runtime runs: see
    /// [`Runtime::set_dedicated`] and [`dedicated_trustees_auto`](Self::dedicated_trustees_auto).
    pub fn dedicated_trustees(mut self, n: usize) -> Self {
        self.dedicated = n;
        self
    }

    /// Lets a controller pick the number of dedicated trustees while the
    /// runtime runs, starting from [`dedicated_trustees`](Self::dedicated_trustees)
    /// (default 0): every window (see [`dedicated_window`](Self::dedicated_window))
    /// it measures how long each worker spent serving delegated closures,
    /// running fibers and idle, and moves the count one step when three
    /// windows in a row ask for it. The program or `gossamer top` can fix a
    /// count at any time ([`Runtime::set_dedicated`]) or hand the choice back
    /// ([`Runtime::set_dedicated_policy`]).
    ///
    /// ```
    /// use gossamer::DedicatedPolicy;
    /// let rt = gossamer::Runtime::builder().workers(2).dedicated_trustees_auto().build()?;
    /// assert_eq!(rt.dedicated_policy(), DedicatedPolicy::Auto);
    /// let c = rt.entrust(0u64);
    /// let c2 = c.clone();
    /// rt.block_on(move || (0..1000).for_each(|_| c2.apply(|v| *v += 1)));
    /// assert!(rt.dedicated() < 2);
    /// # Ok::<(), gossamer::Error>(())
    /// ```
    pub fn dedicated_trustees_auto(mut self) -> Self {
        self.dedicated_auto = true;
        self
    }

    /// The window over which the dedicated-trustee controller measures the
    /// load (default 20 ms; at least 1 ms).
    pub fn dedicated_window(mut self, d: Duration) -> Self {
        self.dedicated_window = d.max(Duration::from_millis(1));
        self
    }

    /// Pins worker `i` to core `i` modulo the core count.
    pub fn pin_threads(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Stack size of each fiber (default 256 KiB; pages are touched lazily).
    /// Below each stack lies a guard page: a fiber that runs off its end
    /// (deep recursion) ends the process, as an overflowing thread does,
    /// with a message naming this size and this setting.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// How many finished fibers' stacks each worker keeps for reuse.
    pub fn stack_pool(mut self, stacks: usize) -> Self {
        self.stack_pool = stacks;
        self
    }

    /// Stack size of the worker threads, where delegated closures run.
    pub fn worker_stack_size(mut self, bytes: usize) -> Self {
        self.worker_stack_size = bytes;
        self
    }

    /// How long an idle worker keeps polling before it sleeps (default
    /// 100 µs; at most 10 s). Sleeping workers are woken by whoever sends
    /// them work. This and the other polling parameters can be changed
    /// while the runtime runs: see [`Runtime::set_trustee_params`].
    pub fn idle_spin(mut self, d: Duration) -> Self {
        self.idle_spin = d;
        self
    }

    /// How long shutdown waits for running fibers and outstanding requests
    /// before abandoning them (default 10 s).
    pub fn shutdown_timeout(mut self, d: Duration) -> Self {
        self.shutdown_timeout = d;
        self
    }

    /// Prefix of the worker threads' names.
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Records which fiber waits on which trustee, `launch` or latch, and
    /// since when, for [`Runtime::stuck`] (default off; also switched on by
    /// `GOSSAMER_TRACK_WAITS=1`, `GOSSAMER_TOP=1`, and by
    /// [`dump_on_sigusr1`](Builder::dump_on_sigusr1)). Costs a clock read
    /// per suspension for a request, nothing when off.
    pub fn track_waits(mut self, on: bool) -> Self {
        self.observe.track_waits = on;
        self
    }

    /// Prints a [`StuckDump`](crate::profile::StuckDump) to standard error
    /// (and a `tracing` warning) when the process gets `SIGUSR1` (default
    /// off; also `GOSSAMER_DUMP_ON_SIGUSR1=1`). Implies
    /// [`track_waits`](Builder::track_waits).
    pub fn dump_on_sigusr1(mut self, on: bool) -> Self {
        self.observe.dump_on_sigusr1 = on;
        self.observe.track_waits |= on;
        self
    }

    /// Profiles every trust and trustee from the start (default off; also
    /// `GOSSAMER_PROFILE=all`). See [`Runtime::profile`].
    pub fn profile_all(mut self, on: bool) -> Self {
        self.observe.profile_all = on;
        self
    }

    /// Serves profiles and stuck dumps to `gossamer top` on a Unix socket
    /// (default off; also `GOSSAMER_TOP=1`); see
    /// [`Runtime::top_socket_path`]. Implies
    /// [`track_waits`](Builder::track_waits).
    pub fn top_socket(mut self, on: bool) -> Self {
        self.observe.top_socket = on;
        self.observe.track_waits |= on;
        self
    }

    /// Strict mode: this process keeps every rule of a program of many
    /// processes, so that what would fail on two processes fails here too
    /// (default off; also `GOSSAMER_STRICT=N`, which this setting overrides).
    ///
    /// The workers are split into `processes` *simulated processes*
    /// (contiguous groups, as a rack spreads threads over its processes);
    /// `1` makes every worker a process of its own, `0` is off. Between
    /// simulated processes, as between real ones:
    /// * a generic closure (`apply`, `apply_then`, `apply_async`, `launch`,
    ///   ...) for a trustee in another one panics in the caller with the
    ///   message a real process boundary gives, naming the `_with` form;
    /// * `spawn_on` and `TrusteeRef::entrust` to a thread of another one are
    ///   refused, naming `spawn_with` and `entrust_on`;
    /// * the `_with` forms, `spawn_with` and `entrust_on` copy their
    ///   argument and result through the bytes another process would get
    ///   (serialized, the original dropped, rebuilt by serde), and refuse a
    ///   `fn` that is not code of the program's binary;
    /// * `entrust` places properties, and threads outside the runtime
    ///   delegate, only within the caller's own (for a thread outside the
    ///   runtime, that of worker 0).
    ///
    /// Data still moves through this process's memory: strict mode checks
    /// the rules, not the fabric.
    ///
    /// ```
    /// let rt = gossamer::Runtime::builder().workers(2).strict(2).build().unwrap();
    /// rt.block_on(|| {
    ///     let far = gossamer::entrust_on(1, 0u64); // thread 1: the other simulated process
    ///     let step = 5u64;
    ///     // The `_with` form crosses: its code is a `fn`, its data an argument.
    ///     assert_eq!(far.apply_with(|c, step| { *c += step; *c }, step), 5);
    ///     // A capturing closure does not, here as on two processes.
    ///     let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| far.apply(move |c| *c += step)));
    ///     assert!(refused.is_err());
    /// });
    /// ```
    pub fn strict(mut self, processes: usize) -> Self {
        self.strict = Some(processes);
        self
    }

    /// Starts every worker as if it had already issued `n` trust ids, to
    /// test what happens near the end of the id space without issuing
    /// billions of them.
    #[doc(hidden)]
    pub fn trust_ids_issued(mut self, n: u64) -> Self {
        self.trust_ids_issued = n;
        self
    }

    /// The configuration this builder describes, workers not checked.
    pub(crate) fn config(self) -> Config {
        let workers = self.workers.unwrap_or(1);
        Config {
            workers,
            dedicated: 0,
            pin: self.pin,
            stack_size: self.stack_size.max(16 * 1024),
            stack_pool: self.stack_pool,
            worker_stack_size: self.worker_stack_size,
            idle_spin: self.idle_spin.min(super::tuning::MAX_IDLE_SPIN),
            dedicated_auto: self.dedicated_auto,
            dedicated_window: self.dedicated_window,
            shutdown_timeout: self.shutdown_timeout,
            name: self.name,
            observe: self.observe.with_env(),
            trust_ids_issued: self.trust_ids_issued,
            strict: super::strict::Strict::resolve(self.strict),
        }
    }

    /// Starts the runtime.
    pub fn build(self) -> Result<Runtime, Error> {
        let workers = self.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if workers == 0 {
            return Err(Error::NoWorkers);
        }
        if self.dedicated >= workers {
            return Err(Error::TooManyDedicated { workers, dedicated: self.dedicated });
        }
        let dedicated = self.dedicated;
        let mut config = self.workers(workers).config();
        config.dedicated = dedicated;
        Runtime::start(config)
    }
}
