//! Checking binaries off the event loop: a few threads, all started with the
//! daemon, take checks from a bounded queue. Hashing a large binary takes a
//! while and must not stall other connections, and the daemon creates no
//! thread after it starts (under a task limit it could not). When the queue
//! is full the check is refused, not queued.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::policy::{self, Policy};
use crate::CliError;

/// Threads that hash.
pub const THREADS: usize = 2;
/// Checks waiting for a thread, at most.
const QUEUE: usize = 16;

struct Job {
    binary: String,
    sha256: [u8; 32],
    answer: oneshot::Sender<Result<policy::Checked, String>>,
}

/// The pool's queue.
pub struct Hasher {
    jobs: SyncSender<Job>,
}

impl Hasher {
    /// Starts the threads.
    pub fn start(policy: Arc<Policy>) -> Result<Hasher, CliError> {
        let (jobs, rx) = mpsc::sync_channel::<Job>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..THREADS {
            let (rx, policy) = (rx.clone(), policy.clone());
            std::thread::Builder::new()
                .name(format!("hash{i}"))
                .spawn(move || work(&rx, &policy))
                .map_err(CliError::io("starting the daemon's hashing threads"))?;
        }
        Ok(Hasher { jobs })
    }

    /// `binary` at its canonical path, held open, once the policy allows it
    /// and it is an executable file with hash `sha256`; else why not.
    pub async fn check(&self, binary: &str, sha256: [u8; 32]) -> Result<policy::Checked, String> {
        let (answer, rx) = oneshot::channel();
        match self.jobs.try_send(Job { binary: binary.into(), sha256, answer }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                return Err("the daemon is busy checking other binaries; try again shortly".into())
            }
            Err(TrySendError::Disconnected(_)) => return Err("the daemon cannot check binaries now".into()),
        }
        rx.await.unwrap_or_else(|_| Err("the daemon cannot check binaries now".into()))
    }
}

fn work(rx: &Mutex<Receiver<Job>>, policy: &Policy) {
    loop {
        let job = match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        let r = policy.permit(&job.binary).and_then(|canonical| {
            let c = canonical.to_str().ok_or_else(|| format!("{}: not a UTF-8 path", job.binary))?;
            policy::check_binary(c, &job.sha256).map_err(|e| {
                if c == job.binary {
                    e
                } else {
                    format!("{} is {e}", job.binary)
                }
            })
        });
        let _ = job.answer.send(r);
    }
}
