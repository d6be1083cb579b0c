//! How much of the time a worker's thread waits for a CPU: the share of
//! wall time it spent runnable but not running (the scheduler's
//! `run_delay`, from `/proc/thread-self/schedstat`), over intervals of
//! [`INTERVAL`], published to the worker's entry in the runtime's tuning
//! table. Adaptive properties read it: a trustee whose thread waits for a
//! CPU much of the time (other processes on its core) leaves the callers
//! that delegate to it waiting a scheduler's time slice at a time, so its
//! properties stay under the lock.
//!
//! On a quiet machine the share stays near 0 (1% in `faa` on 2 cores); with
//! as many busy processes as cores beside the program, near 64%. Where the
//! file is missing (not Linux, or a kernel without scheduler statistics)
//! nothing is published and the share reads 0.

use std::cell::{Cell, OnceCell};
use std::fs::File;
use std::time::{Duration, Instant};

use super::Worker;

/// The interval over which the share is measured.
const INTERVAL: Duration = Duration::from_millis(20);

/// One worker's sampler; lives on the worker's thread.
#[derive(Default)]
pub(super) struct CpuWait {
    /// This thread's `schedstat`, opened on first use (`None` if it could
    /// not be opened).
    file: OnceCell<Option<File>>,
    /// When the last sample was taken, and the thread's `run_delay` then.
    last: Cell<Option<(Instant, u64)>>,
}

/// The second field of a `schedstat` line: nanoseconds spent waiting on a
/// run queue.
fn run_delay(text: &str) -> Option<u64> {
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

impl CpuWait {
    /// The thread's `run_delay` now, if it can be read (never under Miri,
    /// whose isolation refuses to open files).
    #[cfg(miri)]
    fn read(&self) -> Option<u64> {
        None
    }

    /// The thread's `run_delay` now, if it can be read.
    #[cfg(not(miri))]
    fn read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let file = self.file.get_or_init(|| File::open("/proc/thread-self/schedstat").ok()).as_ref()?;
        let mut buf = [0u8; 96];
        let n = file.read_at(&mut buf, 0).ok()?;
        run_delay(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

impl Worker {
    /// Takes a sample when the last is [`INTERVAL`] old (`now`: a clock
    /// reading of the pass) and publishes the share of the interval the
    /// thread waited for a CPU, in percent.
    #[inline]
    pub(super) fn sample_cpu_wait(&self, now: Instant) {
        let c = &self.cpu_wait;
        if let Some((at, _)) = c.last.get() {
            if now.duration_since(at) < INTERVAL {
                return;
            }
        }
        self.sample_cpu_wait_now(now);
    }

    #[cold]
    fn sample_cpu_wait_now(&self, now: Instant) {
        let c = &self.cpu_wait;
        let Some(delay) = c.read() else { return };
        if let Some((at, before)) = c.last.get() {
            let wall = now.duration_since(at).as_nanos().max(1) as u64;
            let pct = (delay.saturating_sub(before).saturating_mul(100) / wall).min(100) as u32;
            self.shared.tune(self.index).set_cpu_wait_percent(pct);
        }
        c.last.set(Some((now, delay)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_delay_is_the_second_field() {
        assert_eq!(run_delay("40522 1337 7\n"), Some(1337));
        assert_eq!(run_delay("40522"), None);
        assert_eq!(run_delay("a b c"), None);
        assert_eq!(run_delay(""), None);
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn this_threads_run_delay_can_be_read_and_grows_or_stays() {
        let c = CpuWait::default();
        let Some(a) = c.read() else {
            // A kernel without scheduler statistics: nothing to check.
            return;
        };
        std::thread::yield_now();
        assert!(c.read().is_some_and(|b| b >= a));
    }
}
