//! A `loom` model of the switch protocol: two clients and the trustee
//! (and, in one model, a thread changing the policy) on one [`Slot`], with
//! the real gate (lock, mode word, measurement) and a model of the request
//! channel: each client's requests are served in issue order, and a client
//! runs in place only when all of its requests were served (else it
//! queues this one too, behind them). In one model a client avoids the
//! trustee (as a thread does after finding it slow): it runs in place
//! whenever nothing of its own is outstanding, whatever the mode. While
//! the property delegates the gate is biased towards the trustee, which
//! then serves without the lock, and callers in place revoke the bias
//! (the model's fences are full ones on both sides, which is what the
//! asymmetric pair amounts to; removing the trustee's fails it). Loom checks
//! every interleaving (up to a preemption bound) for exclusive access (the
//! value is a loom-tracked cell), per-client order and exactly-once
//! effect.

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;

use super::gate::{Mode, Policy, Thresholds};
use super::slot::{Held, Slot};
use crate::sync::DataCell;

const CLIENTS: usize = 2;
const OPS: u32 = 2;

/// The log of effects: (client, sequence) pairs in the order they ran.
type Log = DataCell<Vec<(usize, u32)>>;

/// The model of one client's lane to the trustee: requests it issued
/// (their sequence numbers, written before `issued` is released) and how
/// many the trustee served.
struct Lane {
    /// One cell per request: the client fills the next while the trustee
    /// reads an earlier one.
    seqs: [DataCell<u32>; OPS as usize],
    issued: AtomicU32,
    served: AtomicU32,
}

struct World {
    slot: Slot<Log>,
    lanes: [Lane; CLIENTS],
}

fn world(t: Thresholds) -> Arc<World> {
    let w = World {
        slot: Slot::new(DataCell::new(Vec::new())),
        lanes: std::array::from_fn(|_| Lane {
            seqs: std::array::from_fn(|_| DataCell::new(0)),
            issued: AtomicU32::new(0),
            served: AtomicU32::new(0),
        }),
    };
    w.slot.gate.set_thresholds(t);
    Arc::new(w)
}

fn push(held: &mut Held<'_, Log>, c: usize, s: u32) {
    // SAFETY: loom's cell; the lock held makes this the only access.
    held.value().with_mut(|v| unsafe { (*v).push((c, s)) });
}

/// One client: each request runs in place when the mode says lock (or the
/// client avoids the trustee and the gate allows it) and none of its own
/// requests is outstanding, else it is queued.
fn client(w: &World, c: usize, avoid: bool) {
    let lane = &w.lanes[c];
    let mut issued = 0;
    for s in 0..OPS {
        let outstanding = lane.served.load(Ordering::Acquire) != issued;
        let routed = w.slot.gate.mode() == Mode::Lock || (avoid && w.slot.gate.may_override());
        if routed && !outstanding {
            let mut held = Held::in_place(&w.slot, 0);
            push(&mut held, c, s);
        } else {
            // SAFETY: only this client writes its lane's sequence numbers,
            // each before releasing it through `issued`.
            lane.seqs[issued as usize].with_mut(|q| unsafe { *q = s });
            issued += 1;
            lane.issued.store(issued, Ordering::Release);
        }
    }
}

/// The trustee's serving step: each lane's requests issued so far, in
/// issue order, each under the lock. It runs once beside the clients and
/// once after them (for what they issued last), so the model has no spin
/// loop of its own.
fn serve_step(w: &World) {
    for (c, lane) in w.lanes.iter().enumerate() {
        let issued = lane.issued.load(Ordering::Acquire);
        let mut served = lane.served.load(Ordering::Relaxed);
        while served < issued {
            // SAFETY: released by the client through `issued`, and never
            // written again at this index.
            let s = lane.seqs[served as usize].with(|q| unsafe { *q });
            let mut held = Held::serving(&w.slot);
            push(&mut held, c, s);
            drop(held);
            served += 1;
            lane.served.store(served, Ordering::Release);
        }
    }
}

fn check(w: &World) {
    let held = Held::serving(&w.slot);
    drop(held);
    let mut held = Held::in_place(&w.slot, 0);
    // SAFETY: every thread has been joined.
    let log = held.value().with(|v| unsafe { (*v).clone() });
    assert_eq!(log.len(), CLIENTS * OPS as usize, "every request took effect once: {log:?}");
    for c in 0..CLIENTS {
        let mine: Vec<u32> = log.iter().filter(|e| e.0 == c).map(|e| e.1).collect();
        assert_eq!(mine, (0..OPS).collect::<Vec<_>>(), "client {c} out of order: {log:?}");
    }
}

fn run(t: Thresholds, flip: bool, avoid: bool) {
    let mut b = loom::model::Builder::new();
    // Bounded preemptions keep the search short (every gate word is a
    // point where loom may switch threads).
    b.preemption_bound = Some(if flip { 1 } else { 2 });
    b.max_branches = 100_000;
    b.check(move || {
        let w = world(t);
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let w = w.clone();
                loom::thread::spawn(move || client(&w, c, avoid && c == 0))
            })
            .collect();
        let flipper = flip.then(|| {
            let w = w.clone();
            loom::thread::spawn(move || {
                w.slot.gate.set_policy(Policy::Delegate);
            })
        });
        serve_step(&w);
        for h in clients {
            h.join().unwrap();
        }
        if let Some(h) = flipper {
            h.join().unwrap();
        }
        serve_step(&w);
        check(&w);
    });
}

/// Every lock window counts as contended and every delegate window is one
/// request: the measurement itself switches the mode back and forth.
fn switching() -> Thresholds {
    Thresholds { contended_percent: 0, lock_window: 1, delegate_window_min: 1, delegate_window_max: 1 }
}

#[test]
fn loom_adaptive_switch_by_measurement() {
    run(switching(), false, false);
}

#[test]
fn loom_adaptive_switch_by_set_policy() {
    run(Thresholds { contended_percent: 100, ..switching() }, true, false);
}

/// A client that avoids the trustee runs in place while the others
/// delegate and the measurement switches the mode.
#[test]
fn loom_adaptive_switch_with_a_client_avoiding_the_trustee() {
    run(switching(), false, true);
}
