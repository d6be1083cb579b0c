//! Fate sharing, seen from rank 0: a thread that watches every other
//! process's control socket (and, for processes it started, their exit
//! status). A process that goes away before saying goodbye fails the whole
//! program: rank 0 stops its workers, kills the processes it started, names
//! the rank and the cause, and exits non-zero. The other ranks watch rank 0
//! the same way (see `bootstrap::follower`), and the kernel kills the
//! processes rank 0 started if rank 0 itself dies.

use std::io;
use std::os::fd::AsRawFd;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::control::{self, Conn, Msg};
use super::RackError;
use crate::runtime::shared::Shared;

pub(super) struct Monitor {
    finishing: Arc<AtomicBool>,
    aborting: Arc<AtomicBool>,
    done: mpsc::Receiver<Result<(), RackError>>,
    /// The monitor thread, joined once it has reported: it holds the
    /// runtime's shared state, and with it the fabric, whose last holder
    /// tears UCX down. That must happen before rank 0 returns, never beside
    /// the process's exit, where UCX's own destructors walk the objects it
    /// lists without a lock (UCX 1.13 aborts in `vfs_obj.c` when a thread
    /// removes one meanwhile).
    thread: std::thread::JoinHandle<()>,
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c} before the program ended"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => status.to_string(),
    }
}

impl Monitor {
    /// Watches `streams` (ranks 1..) and `children` (the processes we
    /// started, also ranks 1.., if any). `remote[i]` says that rank `i + 1`
    /// is on another host: it learns that the program stops from us, and
    /// reports its threads' shutdown state when probed (the `refresh` hook
    /// the runtime calls before reading doorbells).
    pub(super) fn start(
        shared: Arc<Shared>,
        streams: Vec<Conn>,
        remote: Vec<bool>,
        hosts: Vec<String>,
        mut children: Vec<Child>,
    ) -> Monitor {
        let finishing = Arc::new(AtomicBool::new(false));
        let aborting = Arc::new(AtomicBool::new(false));
        let (tx, done) = mpsc::channel();
        let (f2, a2) = (finishing.clone(), aborting.clone());
        let (probe_tx, probe_rx) = mpsc::channel::<mpsc::Sender<()>>();
        if remote.iter().any(|r| *r) {
            let probe_tx = std::sync::Mutex::new(probe_tx);
            let _ = shared.refresh.set(Box::new(move || {
                let (ack_tx, ack_rx) = mpsc::channel();
                let sent = probe_tx.lock().map(|t| t.send(ack_tx).is_ok()).unwrap_or(false);
                if sent {
                    let _ = ack_rx.recv_timeout(Duration::from_secs(2));
                }
            }));
        }
        let thread = std::thread::Builder::new()
            .name("gossamer-monitor".into())
            .spawn(move || {
                let mut streams = streams;
                let mut bye = vec![false; streams.len()];
                let mut closed = vec![false; streams.len()];
                let mut probe = 0u64;
                // The probe being answered: who still owes a status, and whom to tell.
                let mut waiting: Option<(Vec<bool>, mpsc::Sender<()>)> = None;
                let mut stop_sent = false;
                let mut heard = vec![Instant::now(); streams.len()];
                // Where each rank is, for the message that names a lost one.
                let addresses: Vec<String> = streams.iter().map(Conn::whereabouts).collect();
                let mut beat = Instant::now();
                loop {
                    if a2.load(Ordering::SeqCst) {
                        kill_all(&mut children);
                        return;
                    }
                    if waiting.is_none() {
                        if let Ok(ack) = probe_rx.try_recv() {
                            probe += 1;
                            let mut owes = vec![false; streams.len()];
                            for i in 0..streams.len() {
                                if remote[i] && !closed[i] && control::send(&mut streams[i], &Msg::Probe(probe)).is_ok()
                                {
                                    owes[i] = true;
                                }
                            }
                            waiting = Some((owes, ack));
                        }
                    }
                    if !stop_sent && shared.stopped() {
                        stop_sent = true;
                        for i in 0..streams.len() {
                            if remote[i] && !closed[i] {
                                let _ = control::send(&mut streams[i], &Msg::Stop);
                            }
                        }
                    }
                    if beat.elapsed() >= control::heartbeat() {
                        beat = Instant::now();
                        for i in 0..streams.len() {
                            if !closed[i] {
                                let _ = control::send(&mut streams[i], &Msg::Heartbeat);
                            }
                        }
                    }
                    for i in 0..streams.len() {
                        if !closed[i] && !bye[i] && heard[i].elapsed() > control::silence() {
                            let cause = format!(
                                "stopped answering for {:?}, the heartbeat window (hung, or its host unreachable)",
                                control::silence()
                            );
                            let lost = Lost { rank: i + 1, host: &hosts[i], address: &addresses[i], cause: &cause };
                            fail(&shared, &mut children, &mut streams, &closed, lost);
                        }
                    }
                    // A closed stream stays readable (its end): left out
                    // (a negative descriptor), or the poll would not wait.
                    let mut fds: Vec<libc::pollfd> = streams
                        .iter()
                        .zip(&closed)
                        .map(|(s, &c)| libc::pollfd {
                            fd: if c { -1 } else { s.as_raw_fd() },
                            events: libc::POLLIN,
                            revents: 0,
                        })
                        .collect();
                    let wait_ms = if waiting.is_some() || shared.stopping() { 1 } else { 20 };
                    // SAFETY: `fds` is a valid array of pollfd for our sockets.
                    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms) };
                    for (i, fd) in fds.iter().enumerate() {
                        if closed[i] || fd.revents == 0 {
                            continue;
                        }
                        heard[i] = Instant::now();
                        match control::recv(&mut streams[i]) {
                            Ok(Msg::Bye) => bye[i] = true,
                            Ok(Msg::Status { probe: k, threads }) if remote[i] => {
                                for (t, quiet, epoch) in threads {
                                    let t = t as usize;
                                    if t < shared.n && !shared.same_host(t) {
                                        let d = shared.doorbell(t);
                                        d.epoch.store(epoch, Ordering::SeqCst);
                                        d.quiet.store(quiet, Ordering::SeqCst);
                                    }
                                }
                                if let Some((owes, _)) = waiting.as_mut() {
                                    if k == probe {
                                        owes[i] = false;
                                    }
                                }
                            }
                            Ok(_) => {}
                            Err(e) => {
                                closed[i] = true;
                                // Everything it sent is read: close our end
                                // too, which a rank that said goodbye waits
                                // for before it exits.
                                streams[i].shut();
                                if let Some((owes, _)) = waiting.as_mut() {
                                    owes[i] = false;
                                }
                                if !bye[i] {
                                    let cause = cause_of(&mut children, i, &e);
                                    let lost =
                                        Lost { rank: i + 1, host: &hosts[i], address: &addresses[i], cause: &cause };
                                    fail(&shared, &mut children, &mut streams, &closed, lost);
                                }
                            }
                        }
                    }
                    if waiting.as_ref().is_some_and(|(owes, _)| owes.iter().all(|o| !*o)) {
                        if let Some((_, ack)) = waiting.take() {
                            let _ = ack.send(());
                        }
                    }
                    if f2.load(Ordering::SeqCst) && closed.iter().all(|c| *c) {
                        let mut result = Ok(());
                        for (i, c) in children.iter_mut().enumerate() {
                            if let Ok(status) = c.wait() {
                                if !status.success() && result.is_ok() {
                                    result = Err(RackError::Failed { rank: i + 1, cause: describe(status) });
                                }
                            }
                        }
                        let _ = tx.send(result);
                        return;
                    }
                }
            })
            .expect("cannot start the monitor thread");
        Monitor { finishing, aborting, done, thread }
    }

    /// The program is ending: goodbyes and exits are expected now.
    pub(super) fn finishing(&self) {
        self.finishing.store(true, Ordering::SeqCst);
    }

    /// Rank 0 is failing: kill the processes it started.
    pub(super) fn abort(&self) {
        self.aborting.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
    }

    /// Waits for every process to leave.
    pub(super) fn finish(self, timeout: Duration) -> Result<(), RackError> {
        match self.done.recv_timeout(timeout) {
            Ok(r) => {
                // It has nothing left to do but drop what it holds.
                let _ = self.thread.join();
                r
            }
            Err(_) => {
                self.abort();
                Err(RackError::Bootstrap(format!("processes did not exit within {timeout:?} after the program ended")))
            }
        }
    }
}

fn cause_of(children: &mut [Child], i: usize, e: &io::Error) -> String {
    if let Some(c) = children.get_mut(i) {
        for _ in 0..100 {
            if let Ok(Some(status)) = c.try_wait() {
                return describe(status);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    format!("lost its control connection ({e})")
}

fn kill_all(children: &mut [Child]) {
    for c in children.iter_mut() {
        let _ = c.kill();
    }
    for c in children.iter_mut() {
        let _ = c.wait();
    }
}

/// A rank that failed, as the message about it names it.
struct Lost<'a> {
    rank: usize,
    host: &'a str,
    /// As `Conn::whereabouts` says it.
    address: &'a str,
    cause: &'a str,
}

/// Stops the program because `lost` failed: tells every rank still
/// connected who failed and why (so that each names it as it exits, on
/// every host), stops this host's workers, kills the processes rank 0
/// started, prints the cause and exits.
fn fail(shared: &Shared, children: &mut [Child], streams: &mut [Conn], closed: &[bool], lost: Lost) -> ! {
    let failed = Msg::Failed {
        rank: lost.rank as u32,
        host: lost.host.to_owned(),
        address: lost.address.to_owned(),
        cause: lost.cause.to_owned(),
    };
    for (i, s) in streams.iter_mut().enumerate() {
        if !closed[i] && i + 1 != lost.rank {
            let _ = control::send(s, &failed);
        }
    }
    let h = shared.region.header();
    h.failed.store(lost.rank as u32 + 1, Ordering::SeqCst);
    h.stop.store(1, Ordering::SeqCst);
    for t in shared.local.clone() {
        shared.ring(t);
    }
    kill_all(children);
    eprintln!(
        "gossamer: rank {} failed: {} (on host {}{}); the program stops",
        lost.rank, lost.cause, lost.host, lost.address
    );
    super::bootstrap::exit_now(1);
}
