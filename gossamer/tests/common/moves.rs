//! Helpers of the tests that move properties (`migrate`, `follow`): a
//! drop counter, waiting for drops, and the per-client order check.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Counts its drops.
pub struct Counted(pub Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits (5 s at most) until `drops` reaches `n`; the caller checks.
pub fn wait_for(drops: &AtomicUsize, n: usize) {
    for _ in 0..5000 {
        if drops.load(Ordering::SeqCst) >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Each client's sequence numbers appear in increasing order, all of them.
pub fn check_order(log: &[(u32, u32)], clients: u32, per_client: u32) {
    let mut next = vec![0u32; clients as usize];
    for &(c, s) in log {
        assert_eq!(s, next[c as usize], "client {c}: request {s} ran out of order (expected {})", next[c as usize]);
        next[c as usize] += 1;
    }
    assert!(next.iter().all(|&n| n == per_client), "missing requests: {next:?}");
}
