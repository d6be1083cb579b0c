//! Where the table's shards and the processes' agents live, as every
//! connection worker of the program sees it.
//!
//! A key belongs to shard `shard_of(key, S)` (see [`crate::store::shard_of`]:
//! FNV-1a over the key's bytes, a final 64-bit mix, modulo the shard count
//! `S`). Shards are numbered process by process: a program of `P` processes
//! with `k` shards each has `S = P * k`, and shard `s` lives in process
//! `s / k`, on that process's `s % k`-th shard thread (every thread, or the
//! dedicated trustees when there are some). Every process therefore owns
//! exactly `k` of the `S` shards, and since the hash spreads keys evenly
//! over shard numbers, its share of the keys. The same placement value is
//! handed to every connection worker, in every process: trusts travel as
//! tokens, so each worker holds its own clones.

use gossamer::Trust;
use serde::{Deserialize, Serialize};

use super::agent::Agent;
use crate::store::Shard;

/// The shards and agents of a program.
#[derive(Clone, Serialize, Deserialize)]
pub struct Placement {
    /// Shard `s` of the table.
    pub shards: Vec<Trust<Shard>>,
    /// The global thread id of shard `s`'s trustee.
    pub shard_threads: Vec<usize>,
    /// The rank of the process holding shard `s`.
    pub shard_ranks: Vec<usize>,
    /// The agent of each process, by rank.
    pub agents: Vec<Trust<Agent>>,
    /// The global thread id of each agent's trustee.
    pub agent_threads: Vec<usize>,
}

impl Placement {
    /// Checks that the parts agree.
    pub fn check(&self) -> Result<(), String> {
        let s = self.shards.len();
        if s == 0 || self.shard_threads.len() != s || self.shard_ranks.len() != s {
            return Err(format!(
                "{s} shards, {} shard threads and {} shard ranks",
                self.shard_threads.len(),
                self.shard_ranks.len()
            ));
        }
        if self.agents.is_empty() || self.agents.len() != self.agent_threads.len() {
            return Err(format!("{} agents on {} threads", self.agents.len(), self.agent_threads.len()));
        }
        if let Some(r) = self.shard_ranks.iter().find(|&&r| r >= self.agents.len()) {
            return Err(format!("a shard in process {r} of {}", self.agents.len()));
        }
        Ok(())
    }

    /// Threads the placement refers to: one more than the highest id.
    pub fn threads(&self) -> usize {
        self.shard_threads.iter().chain(&self.agent_threads).max().map_or(0, |t| t + 1)
    }
}
