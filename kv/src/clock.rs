//! The server clock, in memcached's terms, shared by every process of a
//! program.
//!
//! memcached keeps time as whole seconds since (just before) the process
//! started ("relative time"), refreshed once a second. Expiration times from
//! clients are relative seconds when at most 30 days, absolute Unix times
//! otherwise; negative ones mean "already expired". This module converts
//! them the same way (memcached's `realtime()`).
//!
//! A program of several processes keeps one clock: its origin is rank 0's
//! start, which every other process adopts ([`adopt_origin`]) before it
//! serves. Each process then measures the time since that origin with its
//! own monotonic clock, so every process's relative time turns at the same
//! instants (within the skew of the hosts' clocks), and an expiration time
//! or a delayed `flush_all` means the same moment wherever it is evaluated.
//! The relative time is refreshed by [`tick`], which a timer thread calls
//! at every whole second of the program (see the server's maintainer), and
//! which connection workers also call as they go.

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Expiration times above this are absolute Unix times (30 days).
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// Relative time at start-up; keeps 0 ("never") and 1 ("already expired")
/// clear of real times.
const START_OFFSET: u32 = 2;

const NANOS: i64 = 1_000_000_000;

/// This process's start: a monotonic instant and the Unix time then.
struct Anchor {
    at: Instant,
    unix_ns: i64,
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();
static CURRENT: AtomicU32 = AtomicU32::new(START_OFFSET);
/// How long before this process's anchor the program's origin was, in
/// nanoseconds (0 where this process's start is the origin).
static SHIFT_NS: AtomicI64 = AtomicI64::new(0);
/// The program's origin as Unix time in nanoseconds.
static ORIGIN_NS: AtomicI64 = AtomicI64::new(0);

fn unix_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn anchor() -> &'static Anchor {
    ANCHOR.get_or_init(|| {
        let unix_ns = unix_ns();
        ORIGIN_NS.store(unix_ns, Ordering::SeqCst);
        Anchor { at: Instant::now(), unix_ns }
    })
}

/// Starts the clock (idempotent): its origin is now, until
/// [`adopt_origin`] says otherwise.
pub fn init() {
    anchor();
}

/// The program's origin, as Unix time in nanoseconds: what rank 0 hands
/// to the other processes.
pub fn origin_unix_ns() -> i64 {
    anchor();
    ORIGIN_NS.load(Ordering::SeqCst)
}

/// Makes `origin` (Unix time in nanoseconds, from [`origin_unix_ns`] of
/// the program's first process) this process's origin too. Call before the
/// process serves.
pub fn adopt_origin(origin: i64) {
    let a = anchor();
    SHIFT_NS.store(a.unix_ns.saturating_sub(origin), Ordering::SeqCst);
    ORIGIN_NS.store(origin, Ordering::SeqCst);
    tick();
}

/// Nanoseconds since the program's origin.
fn elapsed_ns() -> i64 {
    let a = anchor();
    let here = i64::try_from(a.at.elapsed().as_nanos()).unwrap_or(i64::MAX);
    here.saturating_add(SHIFT_NS.load(Ordering::Relaxed)).max(0)
}

/// Refreshes the current relative time; cheap enough to call often.
pub fn tick() {
    let t = u32::try_from(elapsed_ns() / NANOS).unwrap_or(u32::MAX - START_OFFSET) + START_OFFSET;
    if CURRENT.load(Ordering::Relaxed) < t {
        CURRENT.store(t, Ordering::Relaxed);
    }
}

/// Time left until the relative time next turns.
pub fn until_next_second() -> Duration {
    let left = NANOS - elapsed_ns() % NANOS;
    Duration::from_nanos(left as u64)
}

/// The current relative time in seconds.
pub fn now() -> u32 {
    CURRENT.load(Ordering::Relaxed)
}

/// Unix time at relative time 0.
pub fn process_started() -> i64 {
    origin_unix_ns().div_euclid(NANOS) - i64::from(START_OFFSET)
}

/// The current Unix time as the server reports it.
pub fn unix_now() -> i64 {
    process_started() + i64::from(now())
}

/// Seconds since the program started.
pub fn uptime() -> u64 {
    u64::from(now().saturating_sub(START_OFFSET))
}

/// A client's delay or expiration time as an absolute Unix time, when it
/// is one relative to now (at most 30 days); others unchanged. Any process
/// of the program converts the result with [`realtime`] to the relative
/// time this process means now, even on the other side of a second's turn.
pub fn absolute(exptime: i64) -> i64 {
    if exptime > 0 && exptime <= REALTIME_MAXDELTA {
        process_started() + i64::from(now()) + exptime
    } else {
        exptime
    }
}

/// memcached's `realtime()` for a client expiration time, with negative
/// values treated as already expired (`EXPTIME_TO_POSITIVE_TIME`).
pub fn realtime(exptime: i64, now: u32, process_started: i64) -> u32 {
    if exptime == 0 {
        return 0;
    }
    let exptime = if exptime < 0 { REALTIME_MAXDELTA + 1 } else { exptime };
    if exptime > REALTIME_MAXDELTA {
        if exptime <= process_started {
            return 1;
        }
        u32::try_from(exptime - process_started).unwrap_or(u32::MAX)
    } else {
        u32::try_from(exptime + i64::from(now)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_matches_memcached() {
        let started = 1_000_000_000;
        assert_eq!(realtime(0, 10, started), 0);
        assert_eq!(realtime(5, 10, started), 15);
        assert_eq!(realtime(-1, 10, started), 1);
        assert_eq!(realtime(REALTIME_MAXDELTA + 1, 10, started), 1);
        assert_eq!(realtime(started + 100, 10, started), 100);
        assert_eq!(realtime(started - 100, 10, started), 1);
    }

    #[test]
    fn clock_moves_forward() {
        init();
        tick();
        assert!(now() >= START_OFFSET);
        assert!(process_started() > 0);
        assert!(until_next_second() <= Duration::from_secs(1));
    }
}
