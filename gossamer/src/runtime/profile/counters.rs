//! The recording side of profiles: per-worker counters in a thread-local,
//! written only by the worker that owns them, and their collection into a
//! [`Profile`] by asking each worker for a copy.
//!
//! Every function here is reached only when [`super::active`] is true.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Histogram, Profile, TrustId, TrustProfile, TrusteeProfile};
use crate::runtime::context;
use crate::runtime::shared::Shared;
use crate::runtime::worker::Worker;

/// Hashes property addresses (and trustee indices) by one multiplication:
/// keys are not attacker-chosen, and SipHash would double the cost of a
/// profiled local shortcut.
#[derive(Clone, Copy, Default)]
pub(crate) struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, v: usize) {
        self.0 = (self.0 ^ v as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

type AddrMap<V> = HashMap<usize, V, std::hash::BuildHasherDefault<AddrHasher>>;

/// One worker's counters.
#[derive(Clone, Default)]
pub(crate) struct Local {
    trusts: AddrMap<TrustProfile>,
    /// As a client: per trustee it sent batches to.
    sent: AddrMap<TrusteeProfile>,
    /// As a trustee.
    served: Option<TrusteeProfile>,
    /// Per trustee: when the oldest profiled request not yet sent was queued.
    oldest_unsent: AddrMap<Instant>,
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

/// Properties one worker keeps apart (about 4 KiB each); the rest are
/// summed under [`OTHER_TRUSTS`], so that profiling everything in a program
/// of millions of properties stays bounded.
pub(crate) const MAX_TRUSTS: usize = 2048;

/// The id and type name under which properties beyond [`MAX_TRUSTS`] are
/// counted (per trustee).
pub(crate) const OTHER_TRUSTS: (usize, &str) = (0, "(other trusts)");

fn trust_entry<'a>(l: &'a mut Local, key: usize, ty: &'static str, t: usize) -> &'a mut TrustProfile {
    let (key, ty) = if l.trusts.len() >= MAX_TRUSTS && !l.trusts.contains_key(&key) {
        (OTHER_TRUSTS.0 + t, OTHER_TRUSTS.1)
    } else {
        (key, ty)
    };
    l.trusts.entry(key).or_insert_with(|| TrustProfile {
        id: TrustId(key as u64),
        type_name: ty,
        trustee: t,
        requests: 0,
        local_hits: 0,
        served: 0,
        service_ns: 0,
        service: Histogram::default(),
        round_trip: Histogram::default(),
        mode: None,
    })
}

/// A request for property `key` (type `ty`) on trustee `t` issued by this
/// worker: a local shortcut, or queued for the slots.
#[cold]
#[inline(never)]
pub(crate) fn request(w: &Worker, key: usize, ty: &'static str, t: usize) {
    if !w.shared.observe.wants(key, t) {
        return;
    }
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let e = trust_entry(&mut l, key, ty, t);
        e.requests += 1;
        if t == w.index {
            e.local_hits += 1;
        } else {
            l.oldest_unsent.entry(t).or_insert_with(Instant::now);
        }
    });
}

/// The round trip of a waiting request, from `start` to now.
#[cold]
#[inline(never)]
pub(crate) fn round_trip(w: &Worker, key: usize, ty: &'static str, t: usize, start: Instant) {
    if !w.shared.observe.wants(key, t) {
        return;
    }
    let ns = start.elapsed().as_nanos() as u64;
    LOCAL.with(|l| trust_entry(&mut l.borrow_mut(), key, ty, t).round_trip.record(ns));
}

/// When a closure on property `key` starts on this trustee: now, if its
/// service time is profiled.
#[cold]
#[inline(never)]
pub(crate) fn service_start(key: usize) -> Option<Instant> {
    let w = context::current()?;
    w.shared.observe.wants(key, w.index).then(Instant::now)
}

/// When this worker starts serving a batch: now, if its trustee side is
/// profiled.
#[cold]
#[inline(never)]
pub(crate) fn batch_start(w: &Worker) -> Option<Instant> {
    w.shared.observe.wants_trustee(w.index).then(Instant::now)
}

/// A closure on property `key` ran on this trustee, from `start` to now.
#[cold]
#[inline(never)]
pub(crate) fn served(key: usize, ty: &'static str, start: Instant) {
    let ns = start.elapsed().as_nanos() as u64;
    let Some(w) = context::current() else { return };
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let e = trust_entry(&mut l, key, ty, w.index);
        e.served += 1;
        e.service_ns += ns;
        e.service.record(ns);
    });
}

/// This worker published a batch of `count` requests to trustee `t`.
#[cold]
#[inline(never)]
pub(crate) fn batch_sent(w: &Worker, t: usize, count: u32) {
    let wanted = w.shared.observe.wants_trustee(t);
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let oldest = l.oldest_unsent.remove(&t);
        if !wanted {
            return;
        }
        let e = l.sent.entry(t).or_insert_with(|| TrusteeProfile { trustee: t, ..TrusteeProfile::default() });
        e.batches_sent += 1;
        e.requests_sent += u64::from(count);
        e.batch_sizes.record(u64::from(count));
        if let Some(at) = oldest {
            e.queued.record(at.elapsed().as_nanos() as u64);
        }
    });
}

/// This worker, as a trustee, served a batch of `count` requests that
/// started at `start`.
#[cold]
#[inline(never)]
pub(crate) fn batch_served(w: &Worker, count: usize, start: Instant) {
    let ns = start.elapsed().as_nanos() as u64;
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let e = l.served.get_or_insert_with(|| TrusteeProfile { trustee: w.index, ..TrusteeProfile::default() });
        e.batches_served += 1;
        e.requests_served += count as u64;
        e.busy_ns += ns;
    });
}

/// Runs `f` on every local worker of `sh` (directly on the caller's own
/// worker) and gathers the answers; workers that do not answer within
/// `timeout` are listed as missing.
pub(crate) fn on_each_worker<R: Send + 'static>(
    sh: &Shared,
    timeout: Duration,
    f: fn(&Worker) -> R,
) -> (Vec<(usize, R)>, Vec<usize>) {
    let (tx, rx) = mpsc::channel();
    let mut expected = Vec::new();
    let mut got = Vec::new();
    let me = context::current().filter(|w| w.shared.id == sh.id).map(|w| w.index);
    for t in sh.local.clone() {
        if Some(t) == me {
            let w = context::current().expect("a worker");
            got.push((t, f(w)));
            continue;
        }
        let tx = tx.clone();
        sh.inject(
            t,
            Box::new(move || {
                if let Some(w) = context::current() {
                    let _ = tx.send((t, f(w)));
                }
            }),
        );
        expected.push(t);
    }
    drop(tx);
    let deadline = Instant::now() + timeout;
    while got.len() < sh.local.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) => got.push(r),
            Err(_) => break,
        }
    }
    let missing = expected.into_iter().filter(|t| !got.iter().any(|(g, _)| g == t)).collect();
    got.sort_by_key(|(t, _)| *t);
    (got, missing)
}

fn copy_local(_: &Worker) -> Local {
    LOCAL.with(|l| l.borrow().clone())
}

fn reset_local(_: &Worker) {
    LOCAL.with(|l| *l.borrow_mut() = Local::default());
}

/// How long a reader waits for each worker's counters.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// The sum of every local worker's counters.
pub(crate) fn collect(sh: &Shared) -> Profile {
    let (locals, missing_workers) = on_each_worker(sh, ANSWER_TIMEOUT, copy_local);
    let mut trusts: HashMap<usize, TrustProfile> = HashMap::new();
    let mut trustees: HashMap<usize, TrusteeProfile> = HashMap::new();
    for (_, l) in locals {
        for (k, t) in l.trusts {
            match trusts.get_mut(&k) {
                None => {
                    trusts.insert(k, t);
                }
                Some(e) => {
                    e.requests += t.requests;
                    e.local_hits += t.local_hits;
                    e.served += t.served;
                    e.service_ns += t.service_ns;
                    e.service.merge(&t.service);
                    e.round_trip.merge(&t.round_trip);
                }
            }
        }
        for (k, s) in l.sent.into_iter().chain(l.served.map(|s| (s.trustee, s))) {
            let e = trustees.entry(k).or_insert_with(|| TrusteeProfile { trustee: k, ..TrusteeProfile::default() });
            e.batches_sent += s.batches_sent;
            e.requests_sent += s.requests_sent;
            e.batch_sizes.merge(&s.batch_sizes);
            e.queued.merge(&s.queued);
            e.batches_served += s.batches_served;
            e.requests_served += s.requests_served;
            e.busy_ns += s.busy_ns;
        }
    }
    let mut trusts: Vec<_> = trusts.into_values().collect();
    if let Some(mode_of) = super::MODE_OF.get() {
        for t in &mut trusts {
            t.mode = mode_of(t.id.0 as usize);
        }
    }
    trusts.sort_by(|a, b| b.requests.cmp(&a.requests).then(b.served.cmp(&a.served)).then(a.id.cmp(&b.id)));
    let mut trustees: Vec<_> = trustees.into_values().collect();
    trustees.sort_by_key(|t| t.trustee);
    Profile { trusts, trustees, missing_workers }
}

/// Zeroes every local worker's counters.
pub(crate) fn reset(sh: &Shared) {
    let _ = on_each_worker(sh, ANSWER_TIMEOUT, reset_local);
}
