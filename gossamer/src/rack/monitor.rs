//! Fate sharing, seen from rank 0: a thread that watches every other
//! process's control socket (and, for processes it started, their exit
//! status). A process that goes away before saying goodbye fails the whole
//! program: rank 0 stops its workers, kills the processes it started, names
//! the rank and the cause, and exits non-zero. The other ranks watch rank 0
//! the same way (see `bootstrap::follower`), and the kernel kills the
//! processes rank 0 started if rank 0 itself dies.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use super::control::{self, Msg};
use super::RackError;
use crate::runtime::shared::Shared;

pub(super) struct Monitor {
    finishing: Arc<AtomicBool>,
    aborting: Arc<AtomicBool>,
    done: mpsc::Receiver<Result<(), RackError>>,
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
    /// started, also ranks 1.., if any).
    pub(super) fn start(shared: Arc<Shared>, streams: Vec<UnixStream>, mut children: Vec<Child>) -> Monitor {
        let finishing = Arc::new(AtomicBool::new(false));
        let aborting = Arc::new(AtomicBool::new(false));
        let (tx, done) = mpsc::channel();
        let (f2, a2) = (finishing.clone(), aborting.clone());
        std::thread::Builder::new()
            .name("gossamer-monitor".into())
            .spawn(move || {
                let mut streams = streams;
                let mut bye = vec![false; streams.len()];
                let mut closed = vec![false; streams.len()];
                loop {
                    if a2.load(Ordering::SeqCst) {
                        kill_all(&mut children);
                        return;
                    }
                    let mut fds: Vec<libc::pollfd> = streams
                        .iter()
                        .map(|s| libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 })
                        .collect();
                    // SAFETY: `fds` is a valid array of pollfd for our sockets.
                    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 20) };
                    for (i, fd) in fds.iter().enumerate() {
                        if closed[i] || fd.revents == 0 {
                            continue;
                        }
                        match control::recv(&mut streams[i]) {
                            Ok(Msg::Bye) => bye[i] = true,
                            Ok(_) => {}
                            Err(e) => {
                                closed[i] = true;
                                if !bye[i] {
                                    let rank = i + 1;
                                    let cause = cause_of(&mut children, i, &e);
                                    fail(&shared, &mut children, rank, &cause);
                                }
                            }
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
        Monitor { finishing, aborting, done }
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
            Ok(r) => r,
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

fn fail(shared: &Shared, children: &mut [Child], rank: usize, cause: &str) -> ! {
    let h = shared.region.header();
    h.failed.store(rank as u32 + 1, Ordering::SeqCst);
    h.stop.store(1, Ordering::SeqCst);
    for t in shared.local.clone() {
        shared.ring(t);
    }
    kill_all(children);
    eprintln!("gossamer: rank {rank} failed: {cause}; the program stops");
    std::process::exit(1);
}
