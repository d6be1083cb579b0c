//! The fabric: what moves slot bytes between the hosts of a program.
//!
//! Processes of one host share one region ([`shm`]): a slot of another
//! process on the same host is written with plain stores into the mapping. Between hosts, a slot
//! is prepared in a staging slot of the local region and copied into the
//! other host's region ([`ThreadFabric::send`]), with the payloads it names
//! ahead of it: by one-sided puts, or by one active message that the
//! target's fabric writes there (see [`hosts`] for which); the backend
//! between hosts is UCX ([`ucx`]). The worker loop only ever polls
//! its own host's memory; each worker drives its fabric's progress.

mod am;
pub(crate) mod hosts;
pub(crate) mod landed;
pub(crate) mod shm;
pub(crate) mod ucx;

/// A put in flight, named by the thread fabric that started it.
pub(crate) type Ticket = u64;

/// Moves bytes from this process to the regions of other hosts.
pub(crate) trait Fabric: Send + Sync {
    /// The per-thread part for worker `index`, created on that thread.
    fn thread(&self, index: usize) -> Result<Box<dyn ThreadFabric>, String>;
    /// Starts what the fabric runs on its own (a progress thread), once the
    /// runtime is up; `wake` wakes this process's sleeping workers.
    fn start(&self, wake: Box<dyn Fn() + Send + Sync>);
    /// Takes in what other hosts put into this process, unless another
    /// thread is at it; true if anything arrived (the caller then wakes the
    /// process's sleeping workers, since the slot that changed may be
    /// theirs). Idle workers call it, so that an answer they wait for is
    /// seen without waiting for the progress thread to be scheduled.
    fn poll(&self) -> bool {
        false
    }
    /// Puts issued and bytes put by all threads so far.
    fn counters(&self) -> (u64, u64);
    /// Stops what the fabric runs on its own (progress threads), after the
    /// workers have stopped.
    fn close(&self);
}

/// One piece of a [`ThreadFabric::send`]: `len` bytes at `src` (inside
/// this host's region, or a buffer of the sender's when the fabric
/// [gathers](ThreadFabric::gathers)) to byte `offset` of the target host's
/// region.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    pub(crate) src: *const u8,
    pub(crate) len: usize,
    pub(crate) offset: usize,
    /// A whole payload sent from its own buffer, which a fabric of active
    /// messages may keep beside the target's region instead of writing it
    /// there (see `fabric::landed`); puts ignore it.
    pub(crate) detached: bool,
}

/// The most pieces one [`ThreadFabric::send`] takes: a pair's bulk area,
/// in up to [`MAX_GATHERED`] payloads sent from their own buffers and the
/// runs of the staging area between them, then the slot that names it.
pub(crate) const MAX_PIECES: usize = 2 * MAX_GATHERED + 2;

/// The most payloads one send takes from their own buffers (see
/// [`ThreadFabric::gathers`] and [`gathers_another`]); the rest of a
/// batch's payloads are copied into the staging bulk area. 64: a bulk area
/// of 1 MiB holds 64 payloads of 16 KiB, and every one of them then goes
/// from its own buffer. The header then names at most 130 pieces in 2,088
/// bytes, well below the 8 KiB at which UCX over TCP gives up on a header
/// (see `am::AM_HEADER_MAX`).
pub(crate) const MAX_GATHERED: usize = 64;

/// Payloads of any size a send takes from their own buffers before it
/// takes only large ones (see [`gathers_another`]).
const GATHERED_ANY: usize = 16;
const _: () = assert!(GATHERED_ANY <= MAX_GATHERED);

/// From this size a payload is large: a send takes up to [`MAX_GATHERED`]
/// of them from their own buffers.
const GATHERED_LARGE: usize = 8192;

/// Whether a send that already takes `n` payloads from their own buffers
/// takes one more of `len` bytes that way (else it is copied into the
/// staging bulk area): the first [`GATHERED_ANY`] whatever their size, then
/// only large ones, up to [`MAX_GATHERED`]. Each piece of a scatter list
/// costs UCX over TCP about as much as copying a few KiB, as it splits a
/// long list over several socket writes: on 2 simulated hosts one way at
/// 1 KiB moved 0.84–0.90 GB/s with 64 payloads of any size gathered
/// against 1.5–1.6 with 16. At 16 KiB, gathering all 64 that a batch holds
/// cost 0.93 core-seconds per GB instead of 1.07 with 16, and moved 2.1
/// GB/s instead of 1.9 (medians of six runs each).
pub(crate) fn gathers_another(n: usize, len: usize) -> bool {
    n < MAX_GATHERED && (n < GATHERED_ANY || len >= GATHERED_LARGE)
}

/// Payloads sent from their own buffers of at least
/// `GOSSAMER_FAR_DETACH` bytes (default 16384; `off`: none) go *detached*
/// ([`Piece::detached`]): a fabric of active messages keeps them beside the
/// target's region, and the receiving code takes that buffer as its
/// `Vec<u8>`, one copy instead of two. Below that size a copy costs about
/// what keeping the buffer does (a lock and an allocation).
const DETACH_ENV: &str = "GOSSAMER_FAR_DETACH";

/// Where a lane between hosts sends its next batch before the one in
/// flight is answered (see `runtime::worker::far`):
/// `GOSSAMER_FAR_PIPELINE`, the payload bytes the batch in flight must
/// carry for that (default 65536), or `off` for one batch in flight.
const PIPELINE_ENV: &str = "GOSSAMER_FAR_PIPELINE";

/// The setting of [`PIPELINE_ENV`]: bytes, `usize::MAX` for `off`.
pub(crate) fn pipeline_bytes() -> Result<usize, String> {
    bytes_or_off(PIPELINE_ENV, 64 << 10)
}

/// The setting of [`DETACH_ENV`]: bytes, `usize::MAX` for `off`.
pub(crate) fn detach_bytes() -> Result<usize, String> {
    bytes_or_off(DETACH_ENV, 16 << 10)
}

fn bytes_or_off(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => match v.trim() {
            "" => Ok(default),
            "off" => Ok(usize::MAX),
            n => n.parse().map_err(|_| format!("{name}={n}: expected a number of bytes or 'off'")),
        },
    }
}

/// One worker thread's access to the fabric: its own endpoints, one per
/// remote host (never one per thread pair).
pub(crate) trait ThreadFabric {
    /// Starts copying `pieces` (at most [`MAX_PIECES`]) to host `host`'s
    /// region: no byte of the last piece lands before every earlier piece
    /// is whole at the target. The sources must stay unchanged until
    /// [`done`](Self::done) says so, except those in `keep`: buffers that
    /// the send owns, and frees once nothing reads them any more.
    fn send(&mut self, host: usize, pieces: &[Piece], keep: Vec<Vec<u8>>) -> Result<Ticket, String>;
    /// Whether the send's sources may be reused (local completion).
    fn done(&mut self, ticket: Ticket) -> bool;
    /// Drives outstanding work; true if anything happened.
    fn progress(&mut self) -> bool;
    /// Whether sends are still in flight.
    fn busy(&self) -> bool;
    /// Whether a send's pieces may come from any of the sender's memory
    /// at no extra cost (one message gathers them), so that a large
    /// payload is sent from its own buffer instead of being copied into
    /// the staging bulk area first. Not for one-sided puts, which would
    /// take one put per piece.
    fn gathers(&self) -> bool;
    /// The rank of the process of host `host` that takes in this thread's
    /// sends there, and keeps their detached pieces ([`Piece::detached`]):
    /// only a thread of that process can take such a piece, so a piece
    /// for a thread of another process must not go detached. `None` where
    /// the fabric keeps no piece beside the region (one-sided puts).
    fn lands_in(&self, host: usize) -> Option<usize>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_gathers_payloads_of_any_size_then_only_large_ones_up_to_the_limit() {
        // The first ones, whatever their size.
        assert!(gathers_another(0, 1024));
        assert!(gathers_another(GATHERED_ANY - 1, 1));
        // Past those, only large ones.
        assert!(!gathers_another(GATHERED_ANY, GATHERED_LARGE - 1));
        assert!(gathers_another(GATHERED_ANY, GATHERED_LARGE));
        assert!(gathers_another(MAX_GATHERED - 1, 64 << 10));
        // Never past the limit, which the header has room for.
        assert!(!gathers_another(MAX_GATHERED, 64 << 10));
    }
}
