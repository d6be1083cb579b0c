//! Parking mode: how a connection worker of a multi-process server sleeps.
//!
//! A worker of a server of one process blocks in its `mio` poller when it
//! has nothing to do, and whoever sends it work wakes it through its
//! `mio::Waker` (see [`super::wake`]). A worker of a multi-process program
//! cannot do that: requests for its thread's shard also come from other
//! processes (and hosts), which cannot reach its waker, and while its
//! thread blocks in `epoll_wait` it serves none of them.
//!
//! So such a worker *parks its fiber* instead ([`gossamer::Parker`]): its
//! thread then sleeps on the runtime's doorbell, which every delegated
//! request rings, wherever it comes from, and serves those requests without
//! waking the worker. What must wake the worker itself is I/O readiness
//! and replies to render: this module's watcher thread blocks in
//! `epoll_wait` on the workers' pollers (an epoll descriptor is itself
//! pollable) and unparks a worker whose poller has events; a reply that
//! completes unparks its worker directly (see `Local::wake`).
//!
//! Each poller is watched one-shot: a worker re-arms its entry just before
//! it parks, so a poller that already has events fires at once, and the
//! watcher never spins on a worker that is awake.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gossamer::Unparker;

/// How often the watcher looks at its stop flag.
const TICK: Duration = Duration::from_millis(50);

/// The watcher of one process's connection workers.
pub struct Watcher {
    epoll: Arc<OwnedFd>,
    slots: Arc<[OnceLock<(RawFd, Unparker)>]>,
    stop: Arc<AtomicBool>,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn ctl(epoll: RawFd, op: libc::c_int, fd: RawFd, slot: usize) -> io::Result<()> {
    let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32, u64: slot as u64 };
    // SAFETY: `epoll` and `fd` are open descriptors; `ev` is a valid event.
    cvt(unsafe { libc::epoll_ctl(epoll, op, fd, &mut ev) }).map(|_| ())
}

impl Watcher {
    /// A watcher for `workers` connection workers, with its thread.
    pub fn start(workers: usize) -> io::Result<Watcher> {
        // SAFETY: epoll_create1 has no memory preconditions; the descriptor
        // it returns is owned here.
        let epoll = Arc::new(unsafe { OwnedFd::from_raw_fd(cvt(libc::epoll_create1(libc::EPOLL_CLOEXEC))?) });
        let slots: Arc<[OnceLock<(RawFd, Unparker)>]> = (0..workers).map(|_| OnceLock::new()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (e, s, st) = (epoll.clone(), slots.clone(), stop.clone());
        std::thread::Builder::new().name("gossamer-kv-watcher".into()).spawn(move || watch(&e, &s, &st))?;
        Ok(Watcher { epoll, slots, stop })
    }

    /// Connection worker `index`, whose poller is `poll_fd`, parks with
    /// `unparker`'s parker. Call once, from the worker.
    pub fn register(&self, index: usize, poll_fd: RawFd, unparker: Unparker) -> io::Result<()> {
        self.slots[index]
            .set((poll_fd, unparker))
            .map_err(|_| io::Error::other(format!("connection worker {index} registered twice")))?;
        ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, poll_fd, index)
    }

    /// Worker `index` is about to park: watch its poller (once).
    pub fn arm(&self, index: usize) -> io::Result<()> {
        let (fd, _) = self.slots[index].get().ok_or_else(|| io::Error::other("arming an unregistered worker"))?;
        ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_MOD, *fd, index)
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn watch(epoll: &OwnedFd, slots: &[OnceLock<(RawFd, Unparker)>], stop: &AtomicBool) {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; slots.len().max(1)];
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: `events` has room for `events.len()` entries.
        let n = unsafe {
            libc::epoll_wait(
                epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                TICK.as_millis() as i32,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::error!("the connection workers' watcher failed: {e}");
                return;
            }
            continue;
        }
        for ev in &events[..n as usize] {
            if let Some((_, u)) = slots.get(ev.u64 as usize).and_then(OnceLock::get) {
                u.unpark();
            }
        }
    }
}
