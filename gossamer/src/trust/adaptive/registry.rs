//! Which profiled properties are adaptive, and their current mode: the
//! profile (a lower layer) asks through a hook that the first adaptive
//! property installs, so `gossamer::profile` can show each adaptive
//! trust's mode beside its counters.

use std::collections::HashMap;
use std::sync::Mutex;

use super::gate::Mode;
use super::slot::GateRef;

/// Profile key (the owner property's address) to the gate of a live
/// adaptive property: entered when it is made, removed by its last handle.
static REGISTRY: Mutex<Option<HashMap<usize, GateRef>>> = Mutex::new(None);

/// Records the adaptive property whose profile key is `key`.
pub(crate) fn register(key: usize, gate: GateRef) {
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let r = r.get_or_insert_with(|| {
        let _ = crate::profile::MODE_OF.set(mode_of);
        HashMap::new()
    });
    r.insert(key, gate);
}

/// Forgets the adaptive property whose profile key is `key` (its last
/// handle goes).
pub(crate) fn unregister(key: usize) {
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = r.as_mut() {
        r.remove(&key);
    }
}

/// The mode of the adaptive property with profile key `key`, if it is one
/// and lives.
fn mode_of(key: usize) -> Option<&'static str> {
    let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    Some(match r.as_ref()?.get(&key)?.mode() {
        Mode::Delegate => "delegate",
        Mode::Lock => "lock",
    })
}
