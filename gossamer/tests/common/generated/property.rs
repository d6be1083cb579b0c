//! The property every generated program delegates to, and the record its
//! `Drop` leaves in the process that drops it.
//!
//! Every effect a delegated closure has is kept in the property (a log of
//! tags, a hit count), and the property's `Drop` writes that final state
//! into a process-wide list: comparing the list with the model checks both
//! that every closure ran exactly once and that the property was dropped
//! exactly once, on its trustee.

use std::sync::Mutex;

use gossamer::{Latch, Trust};
use serde::{Deserialize, Serialize};

/// A property: its id (given by the driver), the tags pushed into it in
/// the order they ran, and the number of hits counted.
pub struct Prop {
    pub id: u32,
    pub log: Vec<u32>,
    pub hits: u64,
}

impl Prop {
    pub fn new(id: u32) -> Self {
        Prop { id, log: Vec::new(), hits: 0 }
    }
}

/// The final state of a dropped property.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    pub id: u32,
    pub log: Vec<u32>,
    pub hits: u64,
    /// The thread that dropped it (`None`: not a runtime thread).
    pub dropped_on: Option<usize>,
}

static DROPPED: Mutex<Vec<Record>> = Mutex::new(Vec::new());

impl Drop for Prop {
    fn drop(&mut self) {
        let r = Record {
            id: self.id,
            log: std::mem::take(&mut self.log),
            hits: self.hits,
            dropped_on: gossamer::current_thread(),
        };
        DROPPED.lock().unwrap_or_else(|e| e.into_inner()).push(r);
    }
}

/// The records of the properties this process dropped so far.
pub fn dropped() -> Vec<Record> {
    DROPPED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Forgets the records (before a new program runs in this process).
pub fn clear_dropped() {
    DROPPED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// A handle the driver holds: a trust to a plain property or to one inside
/// a latch.
#[derive(Clone, Serialize, Deserialize)]
pub enum Handle {
    Plain(Trust<Prop>),
    Latched(Trust<Latch<Prop>>),
}

impl Handle {
    /// Entrusts property `id` on the calling thread.
    pub fn entrust_here(id: u32, latch: bool) -> Handle {
        let t = gossamer::local_trustee();
        if latch {
            Handle::Latched(t.entrust(Latch::new(Prop::new(id))))
        } else {
            Handle::Plain(t.entrust(Prop::new(id)))
        }
    }

    /// Pushes `tag` and waits; returns what the closure returned.
    pub fn push(&self, tag: u32) -> u32 {
        match self {
            Handle::Plain(t) => t.apply_with(|p, tag: u32| push_tag(p, tag), tag),
            Handle::Latched(t) => t.launch_with(|p, tag: u32| push_tag(p, tag), tag),
        }
    }

    /// Pushes `tag` without waiting; `then` gets what the closure returned.
    pub fn push_then(&self, tag: u32, then: impl FnOnce(u32) + 'static) {
        match self {
            Handle::Plain(t) => t.apply_with_then(|p, tag: u32| push_tag(p, tag), tag, then),
            Handle::Latched(t) => t.launch_with_then(|p, tag: u32| push_tag(p, tag), tag, then),
        }
    }

    /// Counts a hit without waiting; `then` gets the new count. The generic
    /// forms for a trustee in this process, the `fn` forms for another.
    pub fn hit_then(&self, then: impl FnOnce(u64) + 'static) {
        match self {
            Handle::Plain(t) if here(t) => t.apply_then(hit, then),
            Handle::Plain(t) => t.apply_with_then(|p, ()| hit(p), (), then),
            Handle::Latched(t) if here(t) => t.launch_then(hit, then),
            Handle::Latched(t) => t.launch_with_then(|p, ()| hit(p), (), then),
        }
    }

    /// Counts a hit, then panics when `panics` (plain properties only;
    /// a latch counts a hit with `launch_then`); `then` always runs.
    pub fn try_hit_then(&self, panics: bool, then: impl FnOnce(Result<u64, gossamer::Panicked>) + 'static) {
        match (self, panics) {
            (Handle::Plain(t), false) if here(t) => t.try_apply_then(hit, then),
            (Handle::Plain(t), true) if here(t) => t.try_apply_then(hit_and_panic, then),
            (Handle::Plain(t), false) => t.try_apply_with_then(|p, ()| hit(p), (), then),
            (Handle::Plain(t), true) => t.try_apply_with_then(|p, ()| hit_and_panic(p), (), then),
            (Handle::Latched(_), _) => self.hit_then(move |n| then(Ok(n))),
        }
    }

    /// The property's log and hit count now.
    pub fn state(&self) -> (Vec<u32>, u64) {
        match self {
            Handle::Plain(t) if here(t) => t.apply(|p| (p.log.clone(), p.hits)),
            Handle::Plain(t) => t.apply_with(|p, ()| (p.log.clone(), p.hits), ()),
            Handle::Latched(t) if here(t) => t.launch(|p| (p.log.clone(), p.hits)),
            Handle::Latched(t) => t.launch_with(|p, ()| (p.log.clone(), p.hits), ()),
        }
    }
}

/// True when the trust's trustee is a thread of this process: only then may
/// a generic closure go to it.
fn here<T: Send + 'static>(t: &Trust<T>) -> bool {
    gossamer::topology().local().contains(&t.trustee().index())
}

fn push_tag(p: &mut Prop, tag: u32) -> u32 {
    p.log.push(tag);
    tag
}

fn hit(p: &mut Prop) -> u64 {
    p.hits += 1;
    p.hits
}

/// The message of the panics a generated program provokes on purpose.
pub const PLANNED_PANIC: &str = "generated program: a closure that panics on purpose";

fn hit_and_panic(p: &mut Prop) -> u64 {
    p.hits += 1;
    if p.hits > 0 {
        panic!("{PLANNED_PANIC}");
    }
    p.hits
}
