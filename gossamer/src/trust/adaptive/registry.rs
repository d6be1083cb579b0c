//! Which profiled properties are adaptive, and their current mode: the
//! profile (a lower layer) asks through a hook that the first adaptive
//! property installs, so `gossamer::profile` can show each adaptive
//! trust's mode beside its counters. The `gossamer top` socket lists them
//! and sets their policy through hooks installed the same way.
//!
//! An entry holds its node's gate by pointer: it is entered when the node
//! is made and removed by the last handle, before the node can be freed,
//! so a gate reached under the registry's lock is live (see `GateRef`).

use std::collections::HashMap;
use std::sync::Mutex;

use super::gate::{Mode, Policy};
use super::slot::GateRef;
use crate::runtime::top_adaptive::{self, AdaptiveRow};

/// One adaptive property: where it lives, and its gate.
struct Entry {
    /// The id of the runtime that owns it.
    runtime: u64,
    /// Its trustee.
    trustee: usize,
    gate: GateRef,
}

/// Profile key (the owner property's address) to the entry of a live
/// adaptive property.
static REGISTRY: Mutex<Option<HashMap<usize, Entry>>> = Mutex::new(None);

/// Records the adaptive property whose profile key is `key`, of runtime
/// `runtime`, served by `trustee`.
pub(crate) fn register(key: usize, runtime: u64, trustee: usize, gate: GateRef) {
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let r = r.get_or_insert_with(|| {
        let _ = crate::profile::MODE_OF.set(mode_of);
        let _ = top_adaptive::HOOKS.set(top_adaptive::Hooks { list, set_policy });
        HashMap::new()
    });
    r.insert(key, Entry { runtime, trustee, gate });
}

/// Forgets the adaptive property whose profile key is `key` (its last
/// handle goes).
pub(crate) fn unregister(key: usize) {
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = r.as_mut() {
        r.remove(&key);
    }
}

fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::Delegate => "delegate",
        Policy::Adaptive => "adaptive",
        Policy::Lock => "lock",
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Delegate => "delegate",
        Mode::Lock => "lock",
    }
}

/// Every live adaptive property of runtime `runtime` (a property whose
/// value is gone is left out).
fn list(runtime: u64) -> Vec<AdaptiveRow> {
    let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let Some(r) = r.as_ref() else { return Vec::new() };
    r.iter()
        .filter(|(_, e)| e.runtime == runtime && !e.gate.gate().retired())
        .map(|(&key, e)| AdaptiveRow {
            id: key as u64,
            trustee: e.trustee,
            policy: policy_name(e.gate.gate().policy()),
            mode: mode_name(e.gate.mode()),
        })
        .collect()
}

/// How many times `set_policy` tries the property's lock before it says
/// the property is busy.
const SET_TRIES: u32 = 10_000;

/// Sets the policy of the adaptive property `id` of runtime `runtime`, as
/// `Adaptive::set_policy` does; refuses, changing nothing, when there is
/// no such live property or `policy` names none.
fn set_policy(runtime: u64, id: u64, policy: &str) -> Result<(), String> {
    let p = [Policy::Delegate, Policy::Adaptive, Policy::Lock]
        .into_iter()
        .find(|&p| policy_name(p) == policy)
        .ok_or_else(|| format!("unknown policy {:?} (known: delegate, adaptive, lock)", policy))?;
    let missing = || format!("no adaptive trust {id:#x} in this program (dropped, or not an adaptive trust)");
    for _ in 0..SET_TRIES {
        {
            let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
            let entry = usize::try_from(id)
                .ok()
                .and_then(|key| r.as_ref()?.get(&key))
                .filter(|e| e.runtime == runtime)
                .ok_or_else(missing)?;
            // Setting the policy of a property whose value is gone is
            // harmless (a retired gate keeps its mode), but it is not what
            // was asked.
            if entry.gate.gate().retired() {
                return Err(missing());
            }
            // The gate is live only while the registry's lock is held, and
            // a thread holding the property's lock may wait for the
            // registry's (it makes or drops another adaptive property in a
            // closure): take the property's lock only if it is free now.
            if entry.gate.gate().try_set_policy(p) {
                return Ok(());
            }
        }
        std::thread::yield_now();
    }
    Err(format!("adaptive trust {id:#x} stayed busy; try again"))
}

/// The mode of the adaptive property with profile key `key`, if it is one
/// and lives.
fn mode_of(key: usize) -> Option<&'static str> {
    let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    Some(mode_name(r.as_ref()?.get(&key)?.gate.mode()))
}
