//! Gossamer proper: one program made of several processes of the same
//! binary (chapter 3 of the thesis), on one host over shared memory.
//!
//! [`main`] is the entry point (Table II(b)): it finds out the process's
//! rank (see [`launch`]), starts the other processes when it is rank 0 and
//! was asked for several, runs the bootstrap ([`bootstrap`]), starts this
//! process's worker threads over the shared region, and then rank 0 runs the
//! program's `gsm_main` while the others serve until it returns. Threads have
//! global ids: process 0 has threads `0..k`, process 1 the next ones, and so
//! on; trusts and fibers refer to threads by these ids.
//!
//! Fate is shared: when a process dies (a crash, a signal, an early exit),
//! every process stops and rank 0 exits non-zero, naming the rank and the
//! cause.

mod bootstrap;
mod control;
mod launch;
mod monitor;
mod remote_ops;
mod shm;
mod stream;

use std::ops::Range;

pub use remote_ops::{entrust_on, spawn_with};

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
/// `threads` is the number of worker threads of the whole program, spread
/// evenly over its processes (at least one each). The process count comes
/// from the launcher's environment, `GOSSAMER_PROCESSES`, or the
/// `--gossamer-processes N` argument (see the `launch` module); with one
/// process this is a plain runtime.
///
/// Rank 0 runs `gsm_main` and returns when it and the whole program have
/// finished; the other ranks never return (they exit when the program
/// ends). On failure, any rank prints the cause and exits non-zero.
pub fn main(gsm_main: fn(), threads: usize) {
    match bootstrap::run(gsm_main, threads) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("gossamer: {e}");
            std::process::exit(1);
        }
    }
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
pub fn load_address() -> usize {
    load_address as fn() -> usize as usize
}

/// The name of this host, as the program groups processes by host:
/// `GOSSAMER_HOST` when set (so that network namespaces on one machine can
/// stand for separate hosts), else the kernel's host name.
pub fn host_name() -> String {
    if let Ok(h) = std::env::var("GOSSAMER_HOST") {
        if !h.is_empty() {
            return h;
        }
    }
    if cfg!(miri) {
        return "localhost".into();
    }
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates
    // within it on success.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "localhost".into()
    }
}

/// Puts and bytes this process has sent to other hosts through the fabric
/// so far (`(0, 0)` in a program of one host, or outside the runtime).
pub fn fabric_counters() -> (u64, u64) {
    crate::runtime::context::current().and_then(|w| w.shared.fabric.as_ref().map(|f| f.counters())).unwrap_or((0, 0))
}
