//! One connection, from accept to close: the handshake under its deadline
//! and caps, then the launcher's requests, then killing what the launcher
//! left running.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::limits::Pending;
use super::ranks::{self, Rank};
use super::{handshake, wire, Shared};
use crate::proto::{self, ClientMsg, DaemonMsg, RunningRank};

/// Serves one accepted connection until it ends; never panics the daemon.
pub async fn serve(mut stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, slot: Pending) {
    let _ = stream.set_nodelay(true);
    let hs = tokio::time::timeout(proto::HANDSHAKE, handshake::accept(&mut stream, &shared.psk)).await;
    let (sealer, opener, protocol) = match hs {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            if shared.limits.handshake_failed() {
                warn!(%peer, "handshake failed: {e}; connection closed, nothing started");
            }
            return;
        }
        Err(_) => {
            if shared.limits.handshake_failed() {
                warn!(%peer, "handshake not finished within {} s; connection closed", proto::HANDSHAKE.as_secs());
            }
            return;
        }
    };
    let host = shared.host.clone();
    let (first, slot) = if protocol != proto::PROTOCOL {
        let reason = format!("protocol {protocol} is not {}", proto::PROTOCOL);
        warn!(%peer, "refused: {reason}");
        (DaemonMsg::Refused { host, reason }, None)
    } else {
        match slot.authenticated() {
            Some(s) => (DaemonMsg::Welcome { host, version: env!("CARGO_PKG_VERSION").into() }, Some(s)),
            None => {
                let reason = format!("the daemon serves {} sessions already; try again later", super::limits::SESSIONS);
                warn!(%peer, "refused an authenticated launcher: {reason}");
                (DaemonMsg::Refused { host: shared.host.clone(), reason }, None)
            }
        }
    };
    let local_ip = stream.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
    let (rd, wr) = stream.into_split();
    let (out, queue) = wire::queue();
    let (lost_tx, lost) = mpsc::unbounded_channel::<String>();
    let mut writer = tokio::spawn(wire::writer(wr, sealer, queue, lost_tx));
    let _ = out.send(first).await;
    let Some(_slot) = slot else {
        // The refusal goes out (bounded), then the connection closes.
        drop(out);
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut writer).await;
        writer.abort();
        return;
    };
    info!(%peer, "launcher authenticated");
    let (msgs_tx, msgs) = mpsc::channel(2);
    let reader = tokio::spawn(wire::reader(rd, opener, msgs_tx, peer));
    let heartbeat = {
        let out = out.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(proto::HEARTBEAT_MS));
            loop {
                tick.tick().await;
                // A full queue is traffic enough; a closed one is the end.
                if let Err(Some(wire::Closed)) = out.try_send(DaemonMsg::Heartbeat) {
                    return;
                }
            }
        })
    };
    let mut conn = Conn { peer, local_ip, shared, out, ranks: vec![], exited: mpsc::unbounded_channel() };
    conn.run(msgs, lost).await;
    heartbeat.abort();
    reader.abort();
    writer.abort();
}

struct Conn {
    peer: SocketAddr,
    /// The daemon's address on this connection.
    local_ip: String,
    shared: Arc<Shared>,
    out: wire::Out,
    ranks: Vec<Rank>,
    exited: (mpsc::UnboundedSender<u32>, mpsc::UnboundedReceiver<u32>),
}

impl Conn {
    async fn run(
        &mut self,
        mut msgs: mpsc::Receiver<Result<ClientMsg, String>>,
        mut lost: mpsc::UnboundedReceiver<String>,
    ) {
        let peer = self.peer;
        let why = loop {
            tokio::select! {
                m = msgs.recv() => match m {
                    Some(Ok(m)) => {
                        if let Err(e) = self.handle(m).await {
                            break e;
                        }
                    }
                    Some(Err(e)) => break e,
                    None => break "the connection's reader ended".to_string(),
                },
                Some(rank) = self.exited.1.recv() => self.reaped(rank),
                Some(e) = lost.recv() => break e,
            }
        };
        let alive = self.ranks.iter().filter(|r| r.alive).count();
        if alive > 0 {
            warn!(%peer, "{why}: killing {alive} rank(s)");
            ranks::signal_all(&self.ranks, libc::SIGKILL);
            // Stay (bounded) until they are reaped, so their ends are logged.
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                while self.ranks.iter().any(|r| r.alive) {
                    match self.exited.1.recv().await {
                        Some(rank) => self.reaped(rank),
                        None => return,
                    }
                }
            })
            .await;
        } else {
            debug!(%peer, "{why}");
        }
    }

    fn reaped(&mut self, rank: u32) {
        for r in self.ranks.iter_mut().filter(|r| r.rank == rank) {
            r.alive = false;
        }
    }

    /// Queues `msg`; an error when the launcher has not taken messages for
    /// as long as it may stay silent.
    async fn send(&self, msg: DaemonMsg) -> Result<(), String> {
        match tokio::time::timeout(Duration::from_millis(proto::SILENCE_MS), self.out.send(msg)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err("the connection's writer ended".into()),
            Err(_) => Err(format!("the launcher took no message for {} ms", proto::SILENCE_MS)),
        }
    }

    fn refused(&self, reason: impl Into<String>) -> DaemonMsg {
        DaemonMsg::Refused { host: self.shared.host.clone(), reason: reason.into() }
    }

    async fn handle(&mut self, m: ClientMsg) -> Result<(), String> {
        let peer = self.peer;
        let answer = match m {
            ClientMsg::Heartbeat => return Ok(()),
            ClientMsg::Hello { .. } => self.refused("already authenticated"),
            ClientMsg::FreePort => match std::net::TcpListener::bind(("0.0.0.0", 0)).and_then(|l| l.local_addr()) {
                Ok(a) => DaemonMsg::Port { port: a.port(), addr: self.local_ip.clone() },
                Err(e) => self.refused(format!("no free port: {e}")),
            },
            ClientMsg::Check { binary, sha256 } => match self.shared.hasher.check(&binary, sha256).await {
                Ok(_) => DaemonMsg::Checked,
                Err(reason) => self.refused(reason),
            },
            ClientMsg::Start { binary, sha256, args, ranks } => match self.start(binary, sha256, args, ranks).await? {
                Some(refusal) => refusal,
                None => return Ok(()),
            },
            ClientMsg::Signal(sig) => {
                if (1..=64).contains(&sig) {
                    info!(%peer, sig, "forwarding signal to the ranks");
                    ranks::signal_all(&self.ranks, sig);
                }
                return Ok(());
            }
            ClientMsg::Kill => {
                info!(%peer, "killing the ranks on request");
                ranks::signal_all(&self.ranks, libc::SIGKILL);
                return Ok(());
            }
            ClientMsg::Query => DaemonMsg::Info(super::info::host_info_async(&self.shared.host).await),
            ClientMsg::Status => {
                // As many ranks as fit half the queue's budget (all of them,
                // short of thousands of ranks with long paths).
                let mut room = wire::OUT_BUDGET / 2;
                let ranks = self
                    .shared
                    .registry
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .take_while(|(r, _)| {
                        let size = r.binary.len() + r.launcher.len() + 32;
                        room = room.saturating_sub(size);
                        room > 0
                    })
                    .map(|(r, t)| RunningRank { seconds: t.elapsed().as_secs(), ..r.clone() })
                    .collect();
                DaemonMsg::Running { host: self.shared.host.clone(), ranks }
            }
        };
        self.send(answer).await
    }

    async fn start(
        &mut self,
        binary: String,
        sha256: [u8; 32],
        args: Vec<String>,
        specs: Vec<proto::RankSpec>,
    ) -> Result<Option<DaemonMsg>, String> {
        let peer = self.peer;
        // Names only: values may be secrets (GOSSAMER_SECRET).
        let mut names: Vec<&str> = specs.iter().flat_map(|s| s.env.iter().map(|(k, _)| k.as_str())).collect();
        names.sort_unstable();
        names.dedup();
        let ranks: Vec<u32> = specs.iter().map(|s| s.rank).collect();
        if let Err(reason) = super::policy::check_length(&binary) {
            warn!(%peer, "refused to start: {reason}");
            return Ok(Some(self.refused(reason)));
        }
        info!(%peer, %binary, ?args, variables = ?names, ?ranks, "start requested");
        if !self.ranks.is_empty() {
            return Ok(Some(self.refused("this connection already started ranks")));
        }
        if specs.len() > super::MAX_RANKS {
            let reason = format!("{} ranks asked; a connection may start at most {}", specs.len(), super::MAX_RANKS);
            return Ok(Some(self.refused(reason)));
        }
        let checked = self.shared.policy.check_env(&specs);
        let path = match checked {
            Ok(()) => self.shared.hasher.check(&binary, sha256).await,
            Err(e) => Err(e),
        };
        let started =
            path.and_then(|p| ranks::spawn(&p, &args, &specs, &self.shared.registry, &peer.to_string(), &binary));
        let children = match started {
            Ok(c) => c,
            Err(reason) => {
                warn!(%peer, %binary, "refused to start: {reason}");
                return Ok(Some(self.refused(reason)));
            }
        };
        let pids: Vec<(u32, u32)> = children.iter().map(|(r, _)| (r.rank, r.pid)).collect();
        info!(%peer, %binary, ?pids, "started ranks");
        // Started goes out before any of the ranks' output.
        let sent = self.send(DaemonMsg::Started { pids }).await;
        for (r, child) in children {
            ranks::watch(r.rank, child, self.out.clone(), self.exited.0.clone(), self.shared.registry.clone());
            self.ranks.push(r);
        }
        sent.map(|()| None)
    }
}
