//! Model check of a lane between hosts with batches in flight in several
//! slots (see `far`): the client puts batch `s` into landing slot
//! `s % slots` of the trustee, the trustee serves batches in sequence and
//! puts each answer into the same slot number on the client's side, and
//! the client takes answers oldest first. A put is modelled as the client
//! (or trustee) writing the other side's landing slot and then its
//! sequence number with release, which is what a reader of a landing slot
//! sees once a batch has landed whole.
//!
//! Loom checks every interleaving that each batch is served once, in
//! order, with the right contents, and that no landing slot is written
//! while its reader may read it (the slots' data are loom cells, so such
//! an access is reported as a race). A client that kept more batches in
//! flight than there are slots would break that rule; the second test
//! shows the model catches it.

use loom::sync::Arc;

use crate::sync::{AtomicU32, DataCell, Ordering};

/// Batches the client sends in a model run.
const BATCHES: u32 = 3;

/// One direction's landing slots: a sequence number and one word of data
/// each.
struct Landing {
    seq: Vec<AtomicU32>,
    data: Vec<DataCell<u64>>,
}

impl Landing {
    fn new(slots: usize) -> Landing {
        Landing {
            seq: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            data: (0..slots).map(|_| DataCell::new(0)).collect(),
        }
    }

    /// Puts batch `s` with `value` into its slot.
    fn put(&self, s: u32, value: u64) {
        let k = s as usize % self.seq.len();
        self.data[k].with_mut(|d| {
            // SAFETY: the model's protocol gives the writer the slot; loom
            // reports a race if a reader may be reading it.
            unsafe { *d = value }
        });
        self.seq[k].store(s, Ordering::Release);
    }

    /// Batch `s`'s value, once it has landed.
    fn landed(&self, s: u32) -> Option<u64> {
        let k = s as usize % self.seq.len();
        if self.seq[k].load(Ordering::Acquire) != s {
            return None;
        }
        Some(self.data[k].with(|d| {
            // SAFETY: the batch landed (acquire above) and its writer
            // leaves the slot alone until answered.
            unsafe { *d }
        }))
    }
}

/// One lane: requests land at the trustee, answers at the client.
struct Lane {
    requests: Landing,
    answers: Landing,
}

/// The value batch `s` carries, and the answer it gets.
fn carried(s: u32) -> u64 {
    100 + s as u64
}

fn answer(v: u64) -> u64 {
    v * 2 + 1
}

/// The client sends `BATCHES` batches with at most `depth` in flight; the
/// trustee serves them in sequence.
fn run(slots: usize, depth: usize) {
    let lane = Arc::new(Lane { requests: Landing::new(slots), answers: Landing::new(slots) });
    let t = lane.clone();
    let trustee = loom::thread::spawn(move || {
        for s in 1..=BATCHES {
            let v = loop {
                match t.requests.landed(s) {
                    Some(v) => break v,
                    None => loom::thread::yield_now(),
                }
            };
            assert_eq!(v, carried(s), "batch {s} landed whole");
            t.answers.put(s, answer(v));
        }
    });
    let mut sent = 0u32;
    let mut answered = 0u32;
    while answered < BATCHES {
        if sent < BATCHES && (sent - answered) < depth as u32 {
            sent += 1;
            lane.requests.put(sent, carried(sent));
            continue;
        }
        let oldest = answered + 1;
        match lane.answers.landed(oldest) {
            Some(a) => {
                assert_eq!(a, answer(carried(oldest)), "batch {oldest} answered in order");
                answered += 1;
            }
            None => loom::thread::yield_now(),
        }
    }
    trustee.join().unwrap();
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

#[test]
fn loom_two_batches_in_flight_in_two_slots_are_served_once_in_order() {
    model(|| run(2, 2));
}

#[test]
fn loom_one_batch_in_flight_as_before() {
    model(|| run(2, 1));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn loom_more_batches_in_flight_than_slots_is_caught() {
    // Three in flight in two slots: batch 3 is written into slot 1 while
    // the trustee may still be reading batch 1 there; loom reports the
    // race.
    model(|| run(2, 3));
}
