//! The server: a Gossamer runtime whose trustees own the shards of the
//! table, and a connection worker fiber on each worker thread that serves
//! its share of the client connections.

mod admin;
mod conn;
mod dispatch;
mod local;
mod outq;
mod reactor;
pub mod report;
mod shards;
mod shared;
mod wake;

use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use gossamer::{JoinHandle, Runtime};
use mio::{Poll, Waker};

use crate::clock;
use crate::config::Config;
use crate::error::Error;
use crate::store::{Shard, ShardConfig};
use shared::{Peer, Shared};

/// A running server.
pub struct Server {
    runtime: Option<Runtime>,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

fn bind(config: &Config) -> Result<Vec<std::net::TcpListener>, Error> {
    let mut listeners = Vec::new();
    for host in config.listen.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let addrs = (host, config.port)
            .to_socket_addrs()
            .map_err(|source| Error::Resolve { addr: host.to_string(), source })?;
        for addr in addrs {
            let l = std::net::TcpListener::bind(addr).map_err(|source| Error::Bind { addr, source })?;
            l.set_nonblocking(true)?;
            listeners.push(l);
        }
    }
    if listeners.is_empty() {
        return Err(Error::Config(format!("no address to listen on in {:?}", config.listen)));
    }
    Ok(listeners)
}

impl Server {
    /// Checks `config`, listens, and starts serving.
    pub fn start(config: Config) -> Result<Server, Error> {
        config.validate()?;
        clock::init();
        let listeners = bind(&config)?;
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr()).collect::<Result<_, _>>()?;
        let runtime = Runtime::builder()
            .workers(config.threads)
            .dedicated_trustees(config.dedicated_trustees)
            .pin_threads(config.pin)
            .idle_spin(Duration::from_micros(config.idle_spin_us.max(1)))
            .thread_name("gossamer-kv")
            .build()?;

        // One shard per trustee: the dedicated ones if any, else every worker.
        let conn_workers = config.connection_workers();
        let shard_workers: Vec<usize> = if config.dedicated_trustees > 0 {
            (conn_workers..config.threads).collect()
        } else {
            (0..config.threads).collect()
        };
        let count = shard_workers.len();
        let mem_limit = (config.memory_bytes() / count as u64).max(1);
        let trusts: Vec<_> = shard_workers
            .iter()
            .enumerate()
            .map(|(index, &w)| {
                runtime.trustee(w).entrust(Shard::new(ShardConfig {
                    index,
                    count,
                    mem_limit,
                    item_size_max: config.item_size_max,
                }))
            })
            .collect();

        let polls: Vec<Poll> = (0..conn_workers).map(|_| Poll::new()).collect::<Result<_, _>>()?;
        let peers: Vec<Peer> =
            polls.iter().map(|p| Waker::new(p.registry(), reactor::WAKER).map(Peer::new)).collect::<Result<_, _>>()?;
        let threads = config.threads;
        let listen_fds = listeners.iter().map(AsRawFd::as_raw_fd).collect();
        let shared = Arc::new(Shared::new(config, addrs, listen_fds, peers));

        let mut listeners: Vec<_> = listeners.into_iter().map(mio::net::TcpListener::from_std).collect();
        let mut workers = Vec::with_capacity(conn_workers);
        for (index, poll) in polls.into_iter().enumerate() {
            let init = reactor::Init {
                index,
                poll,
                listeners: if index == 0 { std::mem::take(&mut listeners) } else { Vec::new() },
                shared: shared.clone(),
                trusts: trusts.clone(),
                shard_workers: shard_workers.clone(),
                workers: threads,
                connection_workers: conn_workers,
            };
            workers.push(runtime.spawn_on(index, move || reactor::run(init)));
        }
        drop(trusts);
        for a in &shared.addrs {
            tracing::info!("listening on {a}");
        }
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
