//! The two duties of the runtime that belong to moved properties, which
//! the trust layer's migration (`trust::migrate`, above this layer)
//! performs: releasing the first cell of a moved property (its forwarding
//! record) once its last trust is gone, and dropping, at shutdown, moved
//! values that no trustee registered. The first move installs the
//! [`HOOKS`]; until then no property has moved, and neither duty arises.

use std::sync::OnceLock;

use super::property::Header;
use super::worker::Worker;

/// What the migration layer does for the runtime.
pub(crate) struct Hooks {
    /// Releases the forwarding record at the header (see
    /// `property::release`, whose contract it has).
    pub(crate) release_origin: unsafe fn(&Worker, *mut Header),
    /// Drops the moved values of the runtime with this id that no trustee
    /// registered; after its workers stopped.
    pub(crate) drop_left: fn(u64),
}

/// Installed by the first move.
pub(crate) static HOOKS: OnceLock<Hooks> = OnceLock::new();
