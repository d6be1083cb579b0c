//! The ranks a session starts: spawning them (each in its own process
//! group, killed if the daemon dies), relaying their output in bounded
//! pieces, and reporting their ends.
//!
//! Each of a rank's pipes is read into a fixed buffer of
//! [`proto::OUTPUT_CHUNK`] bytes, and what arrived is queued to the
//! session's writer at once, whatever its lines. The queue is bounded: when
//! the launcher reads slowly the relay waits, the pipe fills, and the rank's
//! own writes block. A relay holds at most its buffer and one piece waiting
//! for the queue.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tracing::info;

use super::policy::Checked;
use super::wire::Out;
use crate::proto::{self, DaemonMsg, ExitKind, RankSpec, RunningRank, Stream};

/// The ranks every session runs now, by pid (for `Status`).
pub type Registry = Arc<Mutex<BTreeMap<u32, (RunningRank, Instant)>>>;

/// One rank a session started.
pub struct Rank {
    /// Its rank.
    pub rank: u32,
    /// Its pid (and process group).
    pub pid: u32,
    /// Whether it has not been reaped yet.
    pub alive: bool,
}

/// Sends `sig` to the process group of every rank still alive.
pub fn signal_all(ranks: &[Rank], sig: i32) {
    for r in ranks.iter().filter(|r| r.alive) {
        // SAFETY: plain kill(2) on the rank's process group (it called setpgid(0, 0)).
        unsafe {
            libc::kill(-(r.pid as i32), sig);
        }
    }
}

/// Starts every rank of `specs` from `checked` (the allowed binary, held
/// open since its check), stopped again if one cannot start (e.g. no
/// process or pipe can be made).
pub fn spawn(
    checked: &Checked,
    args: &[String],
    specs: &[RankSpec],
    registry: &Registry,
    launcher: &str,
    binary: &str,
) -> Result<Vec<(Rank, Child)>, String> {
    let mut started: Vec<(Rank, Child)> = vec![];
    for spec in specs {
        let mut cmd = Command::new(checked.exec_path());
        cmd.arg0(&checked.path).args(args).envs(spec.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(child) => {
                let pid = child.id().unwrap_or(0);
                started.push((Rank { rank: spec.rank, pid, alive: true }, child));
            }
            Err(e) => {
                let ranks: Vec<Rank> = started.into_iter().map(|(r, _)| r).collect();
                signal_all(&ranks, libc::SIGKILL);
                return Err(format!("cannot start rank {} ({binary}): {e}", spec.rank));
            }
        }
    }
    let mut reg = registry.lock().unwrap_or_else(|p| p.into_inner());
    for (r, _) in &started {
        let rr = RunningRank { launcher: launcher.into(), rank: r.rank, pid: r.pid, binary: binary.into(), seconds: 0 };
        reg.insert(r.pid, (rr, Instant::now()));
    }
    Ok(started)
}

/// Relays `child`'s output to `out` and, once it has ended and its output
/// is through (bounded), reports its end to `out` and on `exited`.
pub fn watch(rank: u32, mut child: Child, out: Out, exited: mpsc::UnboundedSender<u32>, registry: Registry) {
    let relays: Vec<_> = [
        child.stdout.take().map(|o| tokio::spawn(relay(o, rank, Stream::Stdout, out.clone()))),
        child.stderr.take().map(|e| tokio::spawn(relay(e, rank, Stream::Stderr, out.clone()))),
    ]
    .into_iter()
    .flatten()
    .collect();
    tokio::spawn(async move {
        let pid = child.id().unwrap_or(0);
        let status = child.wait().await;
        // The rank's last output first, unless something holds its pipes open.
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            for r in relays {
                let _ = r.await;
            }
        })
        .await;
        registry.lock().unwrap_or_else(|p| p.into_inner()).remove(&pid);
        let how = match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(c), _) => ExitKind::Code(c),
                (None, Some(sig)) => ExitKind::Signal(sig),
                _ => ExitKind::Code(-1),
            },
            Err(_) => ExitKind::Code(-1),
        };
        info!(rank, pid, "rank {how}");
        let _ = exited.send(rank);
        // Waits behind the rank's output however slowly the launcher reads;
        // fails at once when the session is over.
        let _ = out.send(DaemonMsg::Exited { rank, how }).await;
    });
}

/// Reads `pipe` in pieces of at most [`proto::OUTPUT_CHUNK`] bytes and queues
/// each as it arrives, until the pipe ends or the session does.
async fn relay(mut pipe: impl AsyncRead + Unpin, rank: u32, stream: Stream, out: Out) {
    let mut buf = vec![0u8; proto::OUTPUT_CHUNK];
    loop {
        let n = tokio::select! {
            r = pipe.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = out.closed() => return,
        };
        if out.send(DaemonMsg::Output { rank, stream, bytes: buf[..n].to_vec() }).await.is_err() {
            return;
        }
    }
}
