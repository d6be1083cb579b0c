//! Which profiled properties are adaptive, and their current mode: the
//! profile (a lower layer) asks through a hook that the first adaptive
//! property installs, so `gossamer::profile` can show each adaptive
//! trust's mode beside its counters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::gate::{Gate, Mode};
use super::slot::Node;

/// A slot of any value type, seen through its gate.
trait Gated: Send + Sync {
    fn gate(&self) -> &Gate;
}

impl<T: Send + 'static> Gated for Node<T> {
    fn gate(&self) -> &Gate {
        &self.slot.gate
    }
}

struct Registry {
    /// Profile key (the owner property's address) to its slot.
    slots: HashMap<usize, Weak<dyn Gated>>,
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
        Registry { slots: HashMap::new(), swept: 0 }
    });
    if r.slots.len() >= 2 * r.swept.max(1024) {
        r.slots.retain(|_, w| w.strong_count() > 0);
        r.swept = r.slots.len();
    }
    r.slots.insert(key, weak);
}

/// The mode of the adaptive property with profile key `key`, if it is one
/// and lives.
fn mode_of(key: usize) -> Option<&'static str> {
    let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let slot = r.as_ref()?.slots.get(&key)?.upgrade()?;
    Some(match slot.gate().mode() {
        Mode::Delegate => "delegate",
        Mode::Lock => "lock",
    })
}
