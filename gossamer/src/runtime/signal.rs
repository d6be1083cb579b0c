//! `SIGUSR1` prints a stuck dump of every runtime that asked for it.
//!
//! The handler only writes a byte to a pipe (async-signal-safe); a thread
//! started with the first such runtime reads the pipe and prints the dumps
//! to standard error, and as `tracing` warnings.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};

use super::shared::Shared;
use super::stuck;

static INSTALL: Once = Once::new();
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
static RUNTIMES: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

extern "C" fn on_sigusr1(_: libc::c_int) {
    let fd = PIPE_WRITE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = 1u8;
        // SAFETY: write(2) is async-signal-safe; `b` outlives the call.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// Dumps `sh` on `SIGUSR1` from now on.
pub(crate) fn register(sh: &Arc<Shared>) {
    {
        let mut r = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
        r.retain(|w| w.strong_count() > 0);
        r.push(Arc::downgrade(sh));
    }
    INSTALL.call_once(install);
}

fn install() {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        tracing::warn!("no pipe for SIGUSR1 dumps: {}", std::io::Error::last_os_error());
        return;
    }
    // The reader blocks; only the writer (the handler) must not.
    // SAFETY: `fds[0]` is ours; fcntl only changes its flags.
    unsafe { libc::fcntl(fds[0], libc::F_SETFL, 0) };
    PIPE_WRITE.store(fds[1], Ordering::Relaxed);
    let read_fd = fds[0];
    let spawned = std::thread::Builder::new().name("gossamer-sigusr1".into()).spawn(move || loop {
        let mut b = 0u8;
        // SAFETY: reads one byte into `b` from our pipe.
        let n = unsafe { libc::read(read_fd, (&mut b as *mut u8).cast(), 1) };
        if n <= 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let live: Vec<Arc<Shared>> = RUNTIMES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|s| !s.stopped())
            .collect();
        for sh in live {
            let d = stuck::dump(&sh);
            tracing::warn!(runtime = sh.id, waiting = d.waiting.len(), "SIGUSR1 stuck dump:\n{d}");
            eprintln!("{d}");
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("no thread for SIGUSR1 dumps: {e}");
        return;
    }
    // SAFETY: a zeroed sigaction with a handler that only calls write(2).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigusr1 as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()) != 0 {
            tracing::warn!("cannot handle SIGUSR1: {}", std::io::Error::last_os_error());
        }
    }
}
