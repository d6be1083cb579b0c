//! The server clock, in memcached's terms.
//!
//! memcached keeps time as whole seconds since (just before) the process
//! started ("relative time"), refreshed once a second. Expiration times from
//! clients are relative seconds when at most 30 days, absolute Unix times
//! otherwise; negative ones mean "already expired". This module converts
//! them the same way (memcached's `realtime()`).

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Expiration times above this are absolute Unix times (30 days).
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// Relative time at start-up; keeps 0 ("never") and 1 ("already expired")
/// clear of real times.
const START_OFFSET: u32 = 2;

struct Origin {
    at: Instant,
    unix: i64,
}

static ORIGIN: OnceLock<Origin> = OnceLock::new();
static CURRENT: AtomicU32 = AtomicU32::new(START_OFFSET);
static PROCESS_STARTED: AtomicI64 = AtomicI64::new(0);

fn origin() -> &'static Origin {
    ORIGIN.get_or_init(|| {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        PROCESS_STARTED.store(unix - i64::from(START_OFFSET), Ordering::Relaxed);
        Origin { at: Instant::now(), unix }
    })
}

/// Starts the clock (idempotent).
pub fn init() {
    origin();
}

/// Refreshes the current relative time; cheap enough to call often.
pub fn tick() {
    let o = origin();
    let t = o.at.elapsed().as_secs() as u32 + START_OFFSET;
    if CURRENT.load(Ordering::Relaxed) != t {
        CURRENT.store(t, Ordering::Relaxed);
    }
}

/// The current relative time in seconds.
pub fn now() -> u32 {
    CURRENT.load(Ordering::Relaxed)
}

/// Unix time at relative time 0.
pub fn process_started() -> i64 {
    origin();
    PROCESS_STARTED.load(Ordering::Relaxed)
}

/// The current Unix time as the server reports it.
pub fn unix_now() -> i64 {
    process_started() + i64::from(now())
}

/// Seconds since the server started.
pub fn uptime() -> u64 {
    origin().at.elapsed().as_secs()
}

/// Unix time when the server started.
pub fn started_unix() -> i64 {
    origin().unix
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
    }
}
