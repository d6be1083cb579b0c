//! The property of the multi-process hammer tests: every request counted
//! once, and each client's requests checked for issue order.

use std::sync::atomic::{AtomicU32, Ordering};

/// Drops of tallies, in this process.
pub static DROPS: AtomicU32 = AtomicU32::new(0);

/// Requests counted once each, in each client's order.
pub struct Tally {
    pub total: u64,
    /// The next sequence number expected from each client.
    pub next: Vec<u64>,
    /// Requests that arrived out of their client's order.
    pub misordered: u64,
}

impl Tally {
    /// A tally for `clients` clients.
    pub fn new(clients: usize) -> Tally {
        Tally { total: 0, next: vec![0; clients], misordered: 0 }
    }

    /// Counts request `seq` of `client`; returns `seq`.
    pub fn add(&mut self, (client, seq): (u32, u64)) -> u64 {
        let c = client as usize;
        if self.next[c] != seq {
            self.misordered += 1;
        }
        self.next[c] = seq + 1;
        self.total += 1;
        seq
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}
