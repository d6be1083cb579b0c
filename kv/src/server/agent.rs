//! One property per process of the program, entrusted to the process's
//! first connection worker: what a connection worker in any process
//! delegates when it needs something of a whole process rather than of a
//! shard — its counters for `stats`, resetting them, noting a `flush_all`
//! or a verbosity level, and stopping it.
//!
//! Requests and replies are plain owned data, so they cross processes as
//! `apply_with` arguments and results; the property itself (the process's
//! [`Shared`]) never leaves its process.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::shared::{CounterValues, Shared};
use super::wake;
use crate::protocol::text::CrawlerSetting;

/// A process of the server, as its agent property.
pub struct Agent {
    shared: Arc<Shared>,
}

/// What a connection worker asks of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentOp {
    /// Report the process's counters.
    Stats,
    /// `stats reset`: zero the process's counters and detail counts.
    Reset,
    /// `flush_all` with this client delay: noted for `stats settings`.
    Flush(i64),
    /// `verbosity`: the new level.
    Verbosity(u32),
    /// `lru_crawler enable` (true) or `disable`.
    Crawler(bool),
    /// `lru_crawler sleep` or `tocrawl`.
    CrawlerSetting(CrawlerSetting),
    /// `lru_crawler crawl` has started: the maintainers walk it.
    CrawlStarted,
    /// Stop serving (the program is ending).
    Stop,
}

/// What a process answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentReply {
    /// Done.
    Done,
    /// The counters asked for by [`AgentOp::Stats`].
    Stats(Box<ProcessStats>),
}

/// A process's own counters (the shards report theirs separately).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStats {
    /// The process's rank.
    pub rank: usize,
    /// Its process id.
    pub pid: u32,
    /// Its connection workers' counters, since the last reset.
    pub counters: CounterValues,
    /// Open client connections.
    pub curr_connections: u64,
    /// Connections accepted since the last reset.
    pub total_connections: u64,
    /// Connections refused over the limit since the last reset.
    pub rejected_connections: u64,
    /// Connections with a read buffer.
    pub read_buf_count: u64,
    /// Bytes of those read buffers.
    pub read_buf_bytes: u64,
    /// CPU time in user mode, microseconds.
    pub rusage_user_us: u64,
    /// CPU time in the kernel, microseconds.
    pub rusage_system_us: u64,
    /// Background reclaim passes (memcached's `lru_maintainer_juggles`).
    #[serde(default)]
    pub juggles: u64,
    /// `lru_crawler crawl` commands run (memcached's `lru_crawler_starts`).
    #[serde(default)]
    pub crawls: u64,
}

impl ProcessStats {
    /// Sums `all` (the rank and pid of the first are kept).
    pub fn sum(all: &[ProcessStats]) -> ProcessStats {
        let mut total = all.first().cloned().unwrap_or_default();
        for p in all.iter().skip(1) {
            total.counters.add(&p.counters);
            total.curr_connections += p.curr_connections;
            total.total_connections += p.total_connections;
            total.rejected_connections += p.rejected_connections;
            total.read_buf_count += p.read_buf_count;
            total.read_buf_bytes += p.read_buf_bytes;
            total.rusage_user_us += p.rusage_user_us;
            total.rusage_system_us += p.rusage_system_us;
            total.juggles += p.juggles;
            total.crawls += p.crawls;
        }
        total
    }
}

/// CPU time used by this process: (user, system) in microseconds.
pub fn rusage_us() -> (u64, u64) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } == 0;
    if !ok {
        return (0, 0);
    }
    // SAFETY: zero-initialized, and filled in by the successful call.
    let ru = unsafe { ru.assume_init() };
    let us = |t: libc::timeval| (t.tv_sec.max(0) as u64) * 1_000_000 + t.tv_usec.max(0) as u64;
    (us(ru.ru_utime), us(ru.ru_stime))
}

impl Agent {
    /// The agent of the process whose state is `shared`.
    pub fn new(shared: Arc<Shared>) -> Agent {
        Agent { shared }
    }

    /// Runs `op` for connection worker `origin` (a global thread id).
    pub fn run(&mut self, op: AgentOp, origin: usize) -> AgentReply {
        wake::note_served(origin);
        let sh = &self.shared;
        match op {
            AgentOp::Stats => AgentReply::Stats(Box::new(self.stats())),
            AgentOp::Reset => {
                sh.reset_counters();
                sh.admin.detail.clear();
                AgentReply::Done
            }
            AgentOp::Flush(delay) => {
                sh.note_flush(delay);
                AgentReply::Done
            }
            AgentOp::Verbosity(level) => {
                sh.verbosity.store(level, Ordering::Relaxed);
                AgentReply::Done
            }
            AgentOp::Crawler(enable) => {
                sh.admin.lru_crawler.store(enable, Ordering::Relaxed);
                AgentReply::Done
            }
            AgentOp::CrawlerSetting(CrawlerSetting::Sleep(us)) => {
                sh.admin.crawler_sleep.store(us, Ordering::Relaxed);
                AgentReply::Done
            }
            AgentOp::CrawlerSetting(CrawlerSetting::ToCrawl(n)) => {
                sh.admin.crawler_tocrawl.store(n, Ordering::Relaxed);
                AgentReply::Done
            }
            AgentOp::CrawlStarted => {
                sh.maintenance.wake();
                AgentReply::Done
            }
            AgentOp::Stop => {
                sh.request_stop();
                AgentReply::Done
            }
        }
    }

    fn stats(&self) -> ProcessStats {
        let sh = &self.shared;
        let conns = sh.connections();
        let (user, system) = rusage_us();
        ProcessStats {
            rank: sh.rank,
            pid: std::process::id(),
            counters: sh.counters(),
            curr_connections: sh.curr_connections.load(Ordering::Relaxed) as u64,
            total_connections: sh.total_connections.load(Ordering::Relaxed),
            rejected_connections: sh.rejected_connections.load(Ordering::Relaxed),
            read_buf_count: conns.len() as u64,
            read_buf_bytes: conns.iter().map(|c| c.read_buf() as u64).sum(),
            rusage_user_us: user,
            rusage_system_us: system,
            juggles: sh.admin.juggles.load(Ordering::Relaxed),
            crawls: sh.admin.crawls.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_keep_the_first_rank_and_add_the_rest() {
        let a = ProcessStats { rank: 0, pid: 7, curr_connections: 2, rusage_user_us: 5, ..Default::default() };
        let b = ProcessStats { rank: 1, pid: 8, curr_connections: 3, rusage_user_us: 1_000_001, ..Default::default() };
        let s = ProcessStats::sum(&[a, b]);
        assert_eq!((s.rank, s.pid, s.curr_connections, s.rusage_user_us), (0, 7, 5, 1_000_006));
        assert_eq!(ProcessStats::sum(&[]), ProcessStats::default());
    }
}
