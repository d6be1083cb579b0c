//! Admission: how many connections the daemon holds before and after
//! authentication, and the rate-limited logging of what it turns away.
//!
//! Every accepted connection first takes an unauthenticated slot (at most
//! [`PER_PEER`] per peer address, [`UNAUTHENTICATED`] in all); one over
//! either cap is closed at once. A connection that completes the handshake
//! trades its slot for one of [`SESSIONS`]. Refusals and failed handshakes
//! are counted and logged as one summary line a second, so a flood cannot
//! flood the log.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tracing::warn;

/// Unauthenticated connections from one peer address.
pub const PER_PEER: usize = 8;
/// Unauthenticated connections in all.
pub const UNAUTHENTICATED: usize = 256;
/// Authenticated sessions in all.
pub const SESSIONS: usize = 64;
/// Lines logged individually per second for failed handshakes; the rest are counted.
const LOUD_PER_SECOND: u64 = 5;

#[derive(Default)]
struct Counts {
    per_peer: HashMap<IpAddr, usize>,
    unauthenticated: usize,
    sessions: usize,
}

/// The daemon's connection counts and refusal counters.
#[derive(Default)]
pub struct Limits {
    counts: Mutex<Counts>,
    /// Connections closed at once this second (over a cap).
    refused: AtomicU64,
    /// Accept errors this second, and the last one.
    accept_errors: AtomicU64,
    last_accept_error: Mutex<String>,
    /// Failed handshakes this second, and how many were logged individually.
    failed: AtomicU64,
}

/// An unauthenticated connection's slot; released when dropped.
pub struct Pending {
    limits: Arc<Limits>,
    peer: IpAddr,
}

/// An authenticated session's slot; released when dropped.
pub struct Session {
    limits: Arc<Limits>,
}

impl Limits {
    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a new connection from `peer`, or `None` (then close it).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Pending> {
        let mut c = self.counts();
        let mine = c.per_peer.get(&peer).copied().unwrap_or(0);
        if mine >= PER_PEER || c.unauthenticated >= UNAUTHENTICATED {
            drop(c);
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *c.per_peer.entry(peer).or_default() += 1;
        c.unauthenticated += 1;
        Some(Pending { limits: self.clone(), peer })
    }

    /// Counts an accept error (e.g. the daemon is out of descriptors).
    pub fn accept_error(&self, e: &std::io::Error) {
        self.accept_errors.fetch_add(1, Ordering::Relaxed);
        *self.last_accept_error.lock().unwrap_or_else(|p| p.into_inner()) = e.to_string();
    }

    /// Counts a failed handshake; whether to log this one individually.
    pub fn handshake_failed(&self) -> bool {
        self.failed.fetch_add(1, Ordering::Relaxed) < LOUD_PER_SECOND
    }

    /// Logs one summary line a second for what was counted; runs forever.
    pub async fn report(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let refused = self.refused.swap(0, Ordering::Relaxed);
            if refused > 0 {
                let c = self.counts();
                let (u, s) = (c.unauthenticated, c.sessions);
                drop(c);
                warn!(
                    "closed {refused} connection(s) at once in the last second: over the caps of {PER_PEER} \
                     unauthenticated connections per peer address or {UNAUTHENTICATED} in all \
                     (now {u} unauthenticated, {s} sessions)"
                );
            }
            let errors = self.accept_errors.swap(0, Ordering::Relaxed);
            if errors > 0 {
                let last = self.last_accept_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
                warn!("{errors} accept error(s) in the last second (last: {last}); still serving");
            }
            let failed = self.failed.swap(0, Ordering::Relaxed);
            if failed > LOUD_PER_SECOND {
                warn!(
                    "{} more failed handshake(s) in the last second, not logged one by one",
                    failed - LOUD_PER_SECOND
                );
            }
        }
    }

    /// Current (unauthenticated, sessions) counts.
    #[cfg(test)]
    fn now(&self) -> (usize, usize) {
        let c = self.counts();
        (c.unauthenticated, c.sessions)
    }
}

impl Pending {
    /// Trades this slot for a session's, or `None` when [`SESSIONS`] are open.
    pub fn authenticated(self) -> Option<Session> {
        let mut c = self.limits.counts();
        if c.sessions >= SESSIONS {
            return None;
        }
        c.sessions += 1;
        drop(c);
        Some(Session { limits: self.limits.clone() })
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut c = self.limits.counts();
        c.unauthenticated -= 1;
        if let Some(n) = c.per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                c.per_peer.remove(&self.peer);
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.limits.counts().sessions -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_peer_in_all_and_for_sessions() {
        let l = Arc::new(Limits::default());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let held: Vec<_> = (0..PER_PEER).map(|_| l.admit(a).unwrap()).collect();
        assert!(l.admit(a).is_none());
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let s = l.admit(b).unwrap().authenticated().unwrap();
        assert_eq!(l.now(), (PER_PEER, 1));
        drop(held);
        assert!(l.admit(a).is_some());
        drop(s);
        assert_eq!(l.now(), (0, 0));
        let many: Vec<_> =
            (0..UNAUTHENTICATED).map(|i| l.admit(IpAddr::from([10, 1, (i / 256) as u8, i as u8]))).collect();
        assert!(many.iter().all(Option::is_some));
        assert!(l.admit(b).is_none());
    }
}
