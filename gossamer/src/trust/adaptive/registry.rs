//! Which profiled properties are adaptive, and their current mode: the
//! profile (a lower layer) asks through a hook that the first adaptive
//! property installs, so `gossamer::profile` can show each adaptive
//! trust's mode beside its counters. The `gossamer top` socket lists them
//! and sets their policy through hooks installed the same way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::gate::{Gate, Mode, Policy};
use super::slot::Node;
use crate::runtime::top_adaptive::{self, AdaptiveRow};

/// A slot of any value type, seen through its gate.
trait Gated: Send + Sync {
    fn gate(&self) -> &Gate;
}

impl<T: Send + 'static> Gated for Node<T> {
    fn gate(&self) -> &Gate {
        &self.slot.gate
    }
}

/// One adaptive property: where it lives, and its slot.
struct Entry {
    /// The id of the runtime that owns it.
    runtime: u64,
    /// Its trustee.
    trustee: usize,
    slot: Weak<dyn Gated>,
}

struct Registry {
    /// Profile key (the owner property's address) to its entry.
    slots: HashMap<usize, Entry>,
    /// Entries after the last sweep of dead ones; the next sweep comes
    /// when the map has doubled.
    swept: usize,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Records the adaptive property whose profile key is `key`.
pub(crate) fn register<T: Send + 'static>(key: usize, slot: &Arc<Node<T>>) {
    let weak: Weak<dyn Gated> = Arc::downgrade(slot) as Weak<dyn Gated>;
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let r = r.get_or_insert_with(|| {
        let _ = crate::profile::MODE_OF.set(mode_of);
        let _ = top_adaptive::HOOKS.set(top_adaptive::Hooks { list, set_policy });
        Registry { slots: HashMap::new(), swept: 0 }
    });
    if r.slots.len() >= 2 * r.swept.max(1024) {
        r.slots.retain(|_, e| e.slot.strong_count() > 0);
        r.swept = r.slots.len();
    }
    // The first handle is live: its trust may be read.
    let trust = slot.trust();
    r.slots.insert(key, Entry { runtime: trust.runtime, trustee: trust.trustee as usize, slot: weak });
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
    r.slots
        .iter()
        .filter(|(_, e)| e.runtime == runtime)
        .filter_map(|(&key, e)| {
            let slot = e.slot.upgrade()?;
            let gate = slot.gate();
            (!gate.retired()).then(|| AdaptiveRow {
                id: key as u64,
                trustee: e.trustee,
                policy: policy_name(gate.policy()),
                mode: mode_name(gate.mode()),
            })
        })
        .collect()
}

/// Sets the policy of the adaptive property `id` of runtime `runtime`, as
/// `Adaptive::set_policy` does; refuses, changing nothing, when there is
/// no such live property or `policy` names none.
fn set_policy(runtime: u64, id: u64, policy: &str) -> Result<(), String> {
    let p = [Policy::Delegate, Policy::Adaptive, Policy::Lock]
        .into_iter()
        .find(|&p| policy_name(p) == policy)
        .ok_or_else(|| format!("unknown policy {:?} (known: delegate, adaptive, lock)", policy))?;
    let slot = {
        let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        usize::try_from(id)
            .ok()
            .and_then(|key| r.as_ref()?.slots.get(&key))
            .filter(|e| e.runtime == runtime)
            .and_then(|e| e.slot.upgrade())
    };
    let missing = || format!("no adaptive trust {id:#x} in this program (dropped, or not an adaptive trust)");
    let slot = slot.ok_or_else(missing)?;
    // Setting the policy of a property whose value is gone is harmless (a
    // retired gate keeps its mode), but it is not what was asked.
    if slot.gate().retired() {
        return Err(missing());
    }
    // Outside the registry's lock: this takes the property's lock.
    slot.gate().set_policy(p);
    Ok(())
}

/// The mode of the adaptive property with profile key `key`, if it is one
/// and lives.
fn mode_of(key: usize) -> Option<&'static str> {
    let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let slot = r.as_ref()?.slots.get(&key)?.slot.upgrade()?;
    Some(mode_name(slot.gate().mode()))
}
