//! The server: a Gossamer runtime whose trustees own the shards of the
//! table, and a connection worker fiber on each worker thread that serves
//! its share of the client connections.

mod admin;
mod agent;
mod conn;
mod dispatch;
mod listen;
mod local;
mod maintainer;
mod outq;
mod placement;
mod process;
pub mod program;
mod reactor;
pub mod report;
mod shards;
mod shared;
mod wake;
mod watcher;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gossamer::{JoinHandle, Runtime};

use crate::clock;
use crate::config::{Config, DedicatedTrustees};
use crate::error::Error;
use crate::store::shard::share;
use crate::store::{Shard, ShardConfig};
use agent::Agent;
use placement::Placement;
use shared::Shared;

/// A running server of one process.
pub struct Server {
    runtime: Option<Runtime>,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

/// The global thread ids of the shards of a process whose threads are
/// `threads`: its dedicated trustees (its last threads) if it has some,
/// else every thread.
pub(crate) fn shard_threads(config: &Config, threads: std::ops::Range<usize>) -> Vec<usize> {
    if config.dedicated_trustees.count() > 0 {
        (threads.start + config.connection_workers()..threads.end).collect()
    } else {
        threads.collect()
    }
}

/// The settings of shard `index` of `count`, for a process with
/// `per_process` shards.
pub(crate) fn shard_config(config: &Config, index: usize, count: usize, per_process: usize) -> ShardConfig {
    let extended = config.extended_options().unwrap_or_default();
    ShardConfig {
        index,
        count,
        // The process's memory, split exactly over its shards.
        mem_limit: share(config.memory_bytes(), index % per_process.max(1), per_process),
        item_size_max: config.item_size_max,
        // Without the background reclaim, stores reclaim from the tail.
        tail_reclaim: !extended.lru_maintainer,
        lru: extended.lru,
    }
}

impl Server {
    /// Checks `config`, listens, and starts serving, in this process alone
    /// (for a server over several processes, see [`program`]).
    pub fn start(config: Config) -> Result<Server, Error> {
        config.validate()?;
        clock::init();
        let mut builder = Runtime::builder();
        if config.dedicated_trustees == DedicatedTrustees::Auto {
            builder = builder.dedicated_trustees_auto();
        }
        let runtime = builder
            .workers(config.threads)
            .dedicated_trustees(config.dedicated_trustees.count())
            .pin_threads(config.pin)
            .idle_spin(Duration::from_micros(config.idle_spin_us.max(1)))
            .thread_name("gossamer-kv")
            .build()?;

        let threads = shard_threads(&config, 0..config.threads);
        let count = threads.len();
        let shards = threads
            .iter()
            .enumerate()
            .map(|(index, &w)| runtime.trustee(w).entrust(Shard::new(shard_config(&config, index, count, count))))
            .collect();
        let prepared = process::prepare(config, 0, 1)?;
        let shared = prepared.shared.clone();
        let placement = Placement {
            shards,
            shard_ranks: vec![0; count],
            shard_threads: threads,
            agents: vec![runtime.trustee(0).entrust(Agent::new(shared.clone()))],
            agent_threads: vec![0],
        };
        let workers = process::start(prepared, &placement, 0, |t, body| runtime.spawn_on(t, body));
        drop(placement);
        Ok(Server { runtime: Some(runtime), shared, workers })
    }

    /// The addresses the server listens on.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.shared.addrs
    }

    /// Stops serving, closes every connection, and shuts the runtime down.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(runtime) = self.runtime.take() else { return };
        let start = std::time::Instant::now();
        self.shared.request_stop();
        for w in self.workers.drain(..) {
            if let Err(p) = w.join() {
                tracing::error!("a connection worker panicked: {}", p.message());
            }
        }
        tracing::info!("connection workers stopped after {:?}", start.elapsed());
        let report = runtime.shutdown();
        if report.clean {
            tracing::info!("runtime shut down after {:?}", start.elapsed());
        } else {
            tracing::warn!("the runtime did not shut down cleanly ({:?})", start.elapsed());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
