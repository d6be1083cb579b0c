//! The critical section of the fetch-and-add benchmarks, identical for
//! locks and delegated closures: one `pause` (spin-loop hint), an
//! increment, and the new value read back.

/// Increments the counter and returns its new value.
#[inline(always)]
pub fn fetch_add(counter: &mut u64) -> u64 {
    std::hint::spin_loop();
    *counter += 1;
    *counter
}

/// Increments the counter, without the `pause` (for the raw trustee figures).
#[inline(always)]
pub fn bare_add(counter: &mut u64) -> u64 {
    *counter += 1;
    *counter
}
