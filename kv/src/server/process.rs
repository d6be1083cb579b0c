//! One process of the server: its listening sockets, pollers and shared
//! state ([`prepare`]), and its connection workers ([`start`]). A server of
//! one process and each process of a multi-process program are set up the
//! same way; only where the shards live differs (see [`super::placement`]).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use gossamer::JoinHandle;
use mio::{Poll, Waker};

use super::listen;
use super::maintainer;
use super::placement::Placement;
use super::reactor;
use super::shared::{Peer, Shared};
use super::watcher::Watcher;
use crate::config::Config;
use crate::error::Error;

/// A process whose sockets are bound and whose workers have not started.
pub struct Prepared {
    /// The process's state.
    pub shared: Arc<Shared>,
    polls: Vec<Poll>,
    listeners: Vec<std::net::TcpListener>,
}

/// The port process `rank` listens on: `-p` plus the rank, so that the
/// processes of one host do not collide (`-p 0`: any free port).
pub fn port_of(config: &Config, rank: usize) -> Result<u16, Error> {
    if config.port == 0 {
        return Ok(0);
    }
    u16::try_from(usize::from(config.port) + rank)
        .map_err(|_| Error::Config(format!("port {} + rank {rank} is not a TCP port", config.port)))
}

/// Binds process `rank` (of `processes`) to its addresses and makes its
/// connection workers' pollers.
pub fn prepare(config: Config, rank: usize, processes: usize) -> Result<Prepared, Error> {
    listen::raise_fd_limit(config.max_connections);
    let listeners = listen::bind(&config, port_of(&config, rank)?)?;
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr()).collect::<Result<_, _>>()?;
    let polls: Vec<Poll> = (0..config.connection_workers()).map(|_| Poll::new()).collect::<Result<_, _>>()?;
    let peers: Vec<Peer> =
        polls.iter().map(|p| Waker::new(p.registry(), reactor::WAKER).map(Peer::new)).collect::<Result<_, _>>()?;
    let listen_fds = listeners.iter().map(AsRawFd::as_raw_fd).collect();
    // Workers of a multi-process program park instead of blocking in their
    // pollers (see the watcher's module).
    let watcher = if processes > 1 { Some(Watcher::start(polls.len())?) } else { None };
    let shared = Arc::new(Shared::new(config, (rank, processes), addrs, listen_fds, peers, watcher));
    // The shards of this process report evictions to its log watchers.
    crate::store::events::set_sink(shared.admin.watchers.clone());
    Ok(Prepared { shared, polls, listeners })
}

impl Prepared {
    /// The addresses this process listens on.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.shared.addrs
    }
}

/// Starts the connection workers of `prepared`, whose first runs on global
/// thread `base`, and the maintainers of the process's shards, with
/// `spawn(thread, body)` (a fiber on that thread of this process). The
/// handles returned end when the process stops.
pub fn start<S>(prepared: Prepared, placement: &Placement, base: usize, mut spawn: S) -> Vec<JoinHandle<()>>
where
    S: FnMut(usize, Box<dyn FnOnce() + Send>) -> JoinHandle<()>,
{
    let Prepared { shared, polls, listeners } = prepared;
    let mut listeners: Vec<_> = listeners.into_iter().map(mio::net::TcpListener::from_std).collect();
    let local_first = shared.config.local_first;
    let mut workers = Vec::with_capacity(polls.len());
    for (index, poll) in polls.into_iter().enumerate() {
        let init = reactor::Init {
            index,
            base,
            poll,
            listeners: if index == 0 { std::mem::take(&mut listeners) } else { Vec::new() },
            shared: shared.clone(),
            placement: placement.clone(),
            local_first,
        };
        workers.push(spawn(base + index, Box::new(move || reactor::run(init))));
    }
    // A maintainer for each of this process's shards, on the shard's thread.
    shared.maintenance.start_timer();
    let own = (0..placement.shards.len()).filter(|&s| placement.shard_ranks[s] == shared.rank);
    for (i, s) in own.enumerate() {
        let (sh, shard) = (shared.clone(), placement.shards[s].clone());
        workers.push(spawn(placement.shard_threads[s], Box::new(move || maintainer::run(sh, shard, i == 0))));
    }
    for a in &shared.addrs {
        tracing::info!(rank = shared.rank, "listening on {a}");
    }
    workers
}
