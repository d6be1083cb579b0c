//! An authenticated session's two directions as tasks.
//!
//! * [`reader`]: opens every record with the session's [`Opener`] (at most
//!   [`RECORD_MAX`] bytes a record, [`proto::MAX_FRAME`] a message) and
//!   hands whole messages over a small bounded channel. A record that fails
//!   to open (forged, replayed, reordered, injected) or silence longer than
//!   [`proto::SILENCE_MS`] ends it with the reason.
//! * [`writer`]: seals and writes the messages of a bounded queue ([`Out`]:
//!   at most [`OUT_QUEUE`] messages and [`OUT_BUDGET`] bytes of them), so a
//!   launcher that reads slowly slows those who queue (the ranks' output
//!   relays), and no one's memory grows.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gossamer_session::{Opener, Sealer, RECORD_MAX};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use crate::proto::{self, ClientMsg, DaemonMsg};

/// Messages waiting to be sealed and written, per session, at most.
pub const OUT_QUEUE: usize = 16;
/// Bytes of the messages waiting to be sealed and written (the one being
/// written included), per session, at most.
pub const OUT_BUDGET: usize = 1 << 20;

/// The sending end of a session's queue: bounded in messages and in bytes.
#[derive(Clone)]
pub struct Out {
    tx: mpsc::Sender<(DaemonMsg, OwnedSemaphorePermit)>,
    budget: Arc<Semaphore>,
}

/// The writer's end of the queue.
pub type Queue = mpsc::Receiver<(DaemonMsg, OwnedSemaphorePermit)>;

/// A session's queue.
pub fn queue() -> (Out, Queue) {
    let (tx, rx) = mpsc::channel(OUT_QUEUE);
    (Out { tx, budget: Arc::new(Semaphore::new(OUT_BUDGET)) }, rx)
}

/// About how many bytes `m` holds.
fn cost(m: &DaemonMsg) -> usize {
    let n = match m {
        DaemonMsg::Output { bytes, .. } => bytes.len(),
        DaemonMsg::Refused { reason, .. } => reason.len(),
        DaemonMsg::Running { ranks, .. } => ranks.iter().map(|r| r.binary.len() + r.launcher.len() + 32).sum(),
        DaemonMsg::Info(i) => {
            i.transports.as_ref().map_or(0, |t| t.iter().map(String::len).sum::<usize>())
                + i.devices.iter().map(String::len).sum::<usize>()
        }
        _ => 0,
    };
    (n + 64).min(OUT_BUDGET)
}

/// The queue is closed: the session is over.
#[derive(Debug)]
pub struct Closed;

impl Out {
    /// Queues `msg`, waiting for room.
    pub async fn send(&self, msg: DaemonMsg) -> Result<(), Closed> {
        let permit = self.budget.clone().acquire_many_owned(cost(&msg) as u32).await.map_err(|_| Closed)?;
        self.tx.send((msg, permit)).await.map_err(|_| Closed)
    }

    /// Queues `msg` if there is room now; `Err(Some(()))` when full.
    pub fn try_send(&self, msg: DaemonMsg) -> Result<(), Option<Closed>> {
        if self.tx.is_closed() {
            return Err(Some(Closed));
        }
        let permit = self.budget.clone().try_acquire_many_owned(cost(&msg) as u32).map_err(|_| None)?;
        self.tx.try_send((msg, permit)).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => None,
            mpsc::error::TrySendError::Closed(_) => Some(Closed),
        })
    }

    /// Resolves when the session is over.
    pub async fn closed(&self) {
        self.tx.closed().await
    }
}

/// Reads one record of at most `max` bytes into `buf` (a record's length
/// is checked before anything is stored).
pub async fn read_record<R: AsyncRead + Unpin>(s: &mut R, buf: &mut Vec<u8>, max: usize) -> Result<(), String> {
    let len = match s.read_u16().await {
        Ok(l) => l as usize,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err("the peer closed the connection".into()),
        Err(e) => return Err(format!("connection: {e}")),
    };
    if len > max {
        return Err(format!("a record of {len} bytes exceeds the limit of {max}"));
    }
    buf.resize(len, 0);
    s.read_exact(buf).await.map_err(|e| format!("connection: {e}"))?;
    Ok(())
}

/// The next message of the session. A record that does not open, or a
/// message that does not decode, is logged with the peer: it is either an
/// attack on the path or a broken launcher.
async fn next(
    s: &mut OwnedReadHalf,
    opener: &mut Opener,
    buf: &mut Vec<u8>,
    peer: SocketAddr,
) -> Result<ClientMsg, String> {
    loop {
        read_record(s, buf, RECORD_MAX).await?;
        let bad = match opener.open(buf, proto::MAX_FRAME) {
            Ok(Some(body)) => match proto::decode(&body) {
                Ok(m) => return Ok(m),
                Err(e) => format!("a malformed message: {e}"),
            },
            Ok(None) => continue,
            Err(e) => e.to_string(),
        };
        warn!(%peer, "{bad}; connection ended");
        return Err(bad);
    }
}

/// Reads messages until the connection ends, fails, or falls silent; the
/// last item sent is the reason it ended.
pub async fn reader(
    mut s: OwnedReadHalf,
    mut opener: Opener,
    to: mpsc::Sender<Result<ClientMsg, String>>,
    peer: SocketAddr,
) {
    let mut buf = Vec::new();
    let silence = Duration::from_millis(proto::SILENCE_MS);
    loop {
        let r = match tokio::time::timeout(silence, next(&mut s, &mut opener, &mut buf, peer)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no message from the launcher for {} ms", proto::SILENCE_MS)),
        };
        let end = r.is_err();
        if to.send(r).await.is_err() || end {
            return;
        }
    }
}

/// Seals and writes queued messages until the queue closes or a write
/// fails; then says why on `lost`.
pub async fn writer(mut s: OwnedWriteHalf, mut sealer: Sealer, mut queue: Queue, lost: mpsc::UnboundedSender<String>) {
    // The permit is held until the message is written: its bytes count
    // against the budget until then.
    while let Some((msg, _permit)) = queue.recv().await {
        let records = match proto::encode(&msg)
            .map_err(|e| e.to_string())
            .and_then(|b| sealer.seal(&b).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                let _ = lost.send(format!("cannot send a message: {e}"));
                return;
            }
        };
        drop(msg);
        if let Err(e) = s.write_all(&records).await {
            let _ = lost.send(format!("launcher connection lost ({e})"));
            return;
        }
    }
    let _ = s.shutdown().await;
}
