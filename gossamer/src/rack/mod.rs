//! Gossamer proper: one program made of several processes of the same
//! binary (chapter 3 of the thesis), on one host or over several. The
//! processes of one host share that host's region (shared memory); between
//! hosts, batches travel by one-sided puts through UCX (`fabric::hosts`).
//!
//! [`main`] is the entry point (Table II(b)): it finds out the process's
//! rank (see `rack::launch`: a process count on one host, or `gossamer run`,
//! Slurm or Open MPI over several), starts the other processes when it is
//! rank 0 and was asked for several, runs the bootstrap (`rack::bootstrap`:
//! the ranks meet at rank 0's rendezvous, a Unix socket or a TCP address),
//! starts this process's worker threads over its host's region and the
//! fabric between hosts, and then rank 0 runs the
//! program's `gsm_main` while the others serve until it returns. Threads have
//! global ids: process 0 has threads `0..k`, process 1 the next ones, and so
//! on; trusts and fibers refer to threads by these ids.
//!
//! Fate is shared: when a process dies (a crash, a signal, an early exit),
//! every process stops and rank 0 exits non-zero, naming the rank and the
//! cause. A panic in `gsm_main` does the same at once: rank 0 prints it
//! with its rank, stops the others and exits with status 101.
//!
//! # Heartbeats, and a bad network
//!
//! Rank 0 and every other rank exchange a heartbeat every 200 ms on their
//! control connection (`rack::control`). A peer that stays silent for the
//! *heartbeat window* — 1.5 s, or `GOSSAMER_SILENCE_MS` milliseconds (at
//! least 100; the heartbeat then comes every fifth of the window at most) —
//! is taken for lost, as one whose connection closes is. The window is the
//! one setting that trades two promises against each other:
//!
//! * **A lost host stops the program within the window and a little.** A
//!   host whose link goes down sends no FIN and no RST: its peers hear
//!   nothing more. Rank 0 notices the silence, tells every rank still
//!   connected which rank failed, on which host and at which address
//!   (`gossamer: rank 1: rank 2 failed: stopped answering for 1.5s, the
//!   heartbeat window (hung, or its host unreachable) (on host h2,
//!   10.231.60.3:58076); the program stops`), and exits; each rank prints
//!   that line and exits. When rank 0's own host is the one cut off, the
//!   other ranks notice its silence themselves and name it. The ranks of
//!   the lost host, hearing nothing either, give up after the same window.
//!   With the defaults, the program is gone about 1.4 s after the link.
//! * **An interruption well within the window is survived.** TCP
//!   retransmits what the interruption lost, its retransmission timeout at
//!   least 200 ms and doubling on each loss in a row, so the retransmission
//!   that gets through may come some time after the link is back: a link
//!   down for `p` silences a connection for about one heartbeat plus `p`
//!   plus that wait, about 0.8 s for 300 ms. With the default window, links
//!   down for 300 ms and for 0.9 s were survived in tests, and one down for
//!   1.2 s was not. Delay and loss that a network has all the time (2 ms and
//!   1 % in the tests) cost a retransmission each, mostly within
//!   milliseconds (TCP's tail-loss probes), far below the window.
//!
//! Raise the window where processes may be starved for long (heavy builds
//! beside the program on few cores) or where the network may go away for
//! longer without the program giving up; lower it to notice a lost host
//! sooner. Between hosts the data goes over UCX. Over TCP, UCX rides out an
//! interruption on TCP's own retransmissions, whose limit is many minutes,
//! and its keepalive (`UCX_KEEPALIVE_INTERVAL`, 20 s) did not end a
//! connection cut for 45 s under a longer window (UCX 1.13): the window,
//! not UCX, decides. Over RDMA transports UCX's own transport timeouts
//! (`UCX_RC_TIMEOUT` and `UCX_RC_RETRY_COUNT`, `UCX_UD_TIMEOUT`) may end an
//! endpoint first, failing the program with "a put to another host
//! failed": raise them with a long window.

mod bootstrap;
mod control;
mod gate;
mod launch;
mod monitor;
mod secret;
mod stale;
mod stream;

use std::ops::Range;

pub use crate::runtime::host_name;
pub use bootstrap::exit_now;

/// Errors starting or running a multi-process program.
#[derive(Debug, thiserror::Error)]
pub enum RackError {
    /// Bad environment or arguments.
    #[error("configuration: {0}")]
    Config(String),
    /// The other processes could not be started.
    #[error("launch: {0}")]
    Launch(String),
    /// The processes could not agree on the program.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// A process of the program failed.
    #[error("rank {rank} failed: {cause}")]
    Failed {
        /// The rank that failed.
        rank: usize,
        /// What happened to it.
        cause: String,
    },
}

/// Runs `gsm_main` as one program over several processes (Table II(b)).
///
/// ```
/// fn program() {
///     // Every thread of every process: a counter on each.
///     let counters: Vec<_> = (0..gossamer::threads()).map(|t| gossamer::entrust_on(t, 0u64)).collect();
///     for c in &counters {
///         c.apply_with(|v, n| *v += n, 1);
///     }
///     let sum: u64 = counters.iter().map(|c| c.apply_with(|v, ()| *v, ())).sum();
///     assert_eq!(sum, gossamer::threads() as u64);
/// }
///
/// fn main() {
///     // 4 threads in all. Started plainly, this is one process; started
///     // with `--gossamer-processes 2` (or `GOSSAMER_PROCESSES=2`, or by
///     // `mpirun -n 2`), two processes of this binary, two threads each.
///     gossamer::main(program, 4);
/// }
/// ```
///
/// `threads` is the number of worker threads of the whole program, spread
/// evenly over its processes (at least one each). The process count comes
/// from the launcher's environment, `GOSSAMER_PROCESSES`, or the
/// `--gossamer-processes N` argument (see the `launch` module); with one
/// process this is a plain runtime.
///
/// Rank 0 runs `gsm_main` and returns when it and the whole program have
/// finished; the other ranks never return (they exit when the program
/// ends). On failure, any rank prints the cause and exits non-zero; a
/// panic in `gsm_main` of a program of several processes ends the whole
/// program at once, rank 0 printing the panic's message and exiting with
/// status 101 (with one process it unwinds out of `main`, as usual).
pub fn main(gsm_main: fn(), threads: usize) {
    match bootstrap::run(gsm_main, threads) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("gossamer: {e}");
            bootstrap::exit_now(1);
        }
    }
}

/// How many processes the program started by [`main`] will have, as this
/// process learns it from its launcher's environment (`GOSSAMER_SIZE`,
/// Slurm's `SLURM_NTASKS`, Open MPI's `OMPI_COMM_WORLD_SIZE`), from
/// `GOSSAMER_PROCESSES`, or from the `--gossamer-processes N` argument (1
/// when none is set). Call it before [`main`], for instance to give each
/// process the same number of threads:
///
/// ```
/// let processes = gossamer::rack::planned_processes().unwrap();
/// assert!(processes >= 1);
/// // gossamer::main(gsm_main, 4 * processes);
/// ```
///
/// # Errors
/// If the environment or the argument is malformed, as [`main`] would
/// report it.
pub fn planned_processes() -> Result<usize, RackError> {
    launch::detect().map(|role| role.size)
}

/// Where the threads of the program are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// This process's rank.
    pub rank: usize,
    /// The global thread ids of each rank.
    pub processes: Vec<Range<usize>>,
    /// The hosts, by name, with the global thread ids of each.
    pub hosts: Vec<(String, Range<usize>)>,
}

impl Topology {
    /// Threads in the whole program.
    pub fn threads(&self) -> usize {
        self.processes.last().map_or(0, |r| r.end)
    }

    /// The rank that runs thread `t`.
    pub fn rank_of(&self, t: usize) -> usize {
        self.processes.iter().position(|r| r.contains(&t)).expect("no such thread")
    }

    /// This process's threads.
    pub fn local(&self) -> Range<usize> {
        self.processes[self.rank].clone()
    }
}

/// The topology of the calling thread's program.
///
/// # Panics
/// Outside the runtime's threads.
pub fn topology() -> Topology {
    let w = crate::runtime::context::current().expect("gossamer: topology() called outside the runtime's threads");
    let p = &w.shared.placement;
    Topology {
        rank: p.rank,
        processes: p.ranks.clone(),
        hosts: p.host_names.iter().cloned().zip(p.hosts.iter().cloned()).collect(),
    }
}

/// This process's rank (0 outside a multi-process program).
pub fn rank() -> usize {
    crate::runtime::context::current().map_or(0, |w| w.shared.placement.rank)
}

/// Address of a function of this binary, for checking that processes load
/// it at different addresses (ASLR) while code offsets still agree.
#[doc(hidden)]
pub fn load_address() -> usize {
    load_address as fn() -> usize as usize
}

/// Puts and bytes this process has sent to other hosts through the fabric
/// so far (`(0, 0)` in a program of one host, or outside the runtime).
pub fn fabric_counters() -> (u64, u64) {
    crate::runtime::context::current().and_then(|w| w.shared.fabric.as_ref().map(|f| f.counters())).unwrap_or((0, 0))
}

/// Large payloads from other hosts that this process kept beside its
/// region, and how many of them the receiving code took there, so far: a
/// `Vec<u8>` argument or result of 16 KiB or more, sent by active messages
/// to a thread of the process that takes in the message, lands in a buffer
/// of its own and becomes the receiver's value without a second copy.
/// `(0, 0)` where the fabric uses one-sided puts, or with one host.
#[doc(hidden)]
pub fn detached_payloads() -> (u64, u64) {
    crate::fabric::landed::counts()
}

/// The bytes of one host's shared region, part by part: what
/// [`region_bytes`] returns.
///
/// The region is mapped whole by every process of the host, but the kernel
/// backs only the pages that are written: `total` is address space, while
/// [`slots_touched`](RegionBytes::slots_touched) is about what a running
/// program actually uses (the bulk areas are touched only by payloads too
/// large for a slot, and then only as far as those payloads reach).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionBytes {
    /// The whole region: the address space each process of the host maps.
    pub total: usize,
    /// Slots between the host's own threads: a request and a response slot
    /// (a 128-byte primary block and a 1 KiB overflow block each) for every
    /// pair of the host's threads.
    pub host_slots: usize,
    /// Bulk areas between the host's own threads, for payloads too large
    /// for a slot: one per pair and direction.
    pub host_bulk: usize,
    /// Slots between hosts: four arrays of contiguous slots, two (one per
    /// batch in flight) for every (thread of this host, thread of the
    /// program) — requests and responses landing here, requests and
    /// responses staged here.
    pub far_slots: usize,
    /// Bulk areas between hosts: four more arrays of that shape.
    pub far_bulk: usize,
    /// The host's shared heap, where `SharedBytes` live: one arena per
    /// thread of the host, as large as one in-host bulk area. Never
    /// registered with the fabric; only the pages blocks were carved from
    /// are used.
    pub shared_heap: usize,
    /// The rest: the header, one doorbell per thread of the program, and
    /// padding to page boundaries.
    pub other: usize,
    /// The slot bytes that a program whose threads all delegate to each
    /// other writes: every in-host slot, and the slots between hosts for
    /// pairs whose other thread is on another host (the entries of the
    /// arrays between hosts for pairs within the host stay untouched). The
    /// kernel backs whole pages, so the memory used is this rounded up to
    /// pages, plus the header and doorbells.
    pub slots_touched: usize,
}

/// The size of the region that one host of a multi-process program maps,
/// with its breakdown, for a program of `threads` worker threads of which
/// `host_threads` run on this host (every host the same size).
///
/// This is the layout [`main`] creates: with `host_threads == threads` the
/// region of a program of several processes on one host; with fewer, one
/// host's region in a program over several hosts. The bulk-area sizes are
/// the ones the program would pick (`GOSSAMER_BULK_BYTES` and
/// `GOSSAMER_FAR_BULK_BYTES` apply). A program of one process uses a
/// private region without bulk areas instead.
///
/// ```
/// // One host of the thesis's rack: 12 hosts x 32 threads.
/// let r = gossamer::rack::region_bytes(12 * 32, 32);
/// assert_eq!(r.total, r.host_slots + r.host_bulk + r.far_slots + r.far_bulk + r.shared_heap + r.other);
/// assert!(r.slots_touched < r.host_slots + r.far_slots);
/// // Every part is counted: what is left is the header, the doorbells
/// // and page padding.
/// assert!(r.other < 1 << 20);
/// println!("{} MiB reserved, {} MiB of slots touched", r.total >> 20, r.slots_touched >> 20);
/// ```
///
/// # Panics
/// If `host_threads` is 0 or more than `threads`.
pub fn region_bytes(threads: usize, host_threads: usize) -> RegionBytes {
    use crate::channel::remote_slot::REMOTE_SLOT_BYTES;
    use crate::channel::slot::{Overflow, Primary};
    use crate::fabric::shm::region::{bulk_bytes_for, far_bulk_for, Region, Shape, FAR_DEPTH};

    assert!(
        (1..=threads).contains(&host_threads),
        "region_bytes: {host_threads} threads per host do not fit a program of {threads} threads"
    );
    let multi_host = host_threads < threads;
    let bulk = bulk_bytes_for(threads);
    let far = if multi_host { far_bulk_for(threads, host_threads) } else { 0 };
    let size =
        |bulk_bytes, far_bulk| Region::size_for(&Shape { n: threads, host: 0..host_threads, bulk_bytes, far_bulk });
    // The bulk areas are whole pages: taking them out of the layout takes
    // out exactly their bytes.
    let total = size(bulk, far);
    let shared_heap = host_threads * bulk;
    let host_bulk = total - size(0, far) - shared_heap;
    let far_bulk = size(0, far) - size(0, 0);
    let slot = std::mem::size_of::<Primary>() + std::mem::size_of::<Overflow>();
    let host_slots = 2 * host_threads * host_threads * slot;
    // Each lane between hosts has `FAR_DEPTH` slots in every square.
    let far_slots = if multi_host { 4 * host_threads * threads * FAR_DEPTH * REMOTE_SLOT_BYTES } else { 0 };
    let far_touched = 4 * host_threads * (threads - host_threads) * FAR_DEPTH * REMOTE_SLOT_BYTES;
    RegionBytes {
        total,
        host_slots,
        host_bulk,
        far_slots,
        far_bulk,
        shared_heap,
        other: total - host_slots - host_bulk - far_slots - far_bulk - shared_heap,
        slots_touched: host_slots + far_touched,
    }
}
