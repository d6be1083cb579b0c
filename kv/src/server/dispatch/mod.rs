//! Turning parsed commands into delegated requests and ordered replies.

mod binary;
mod lru;
mod meta;
mod text;

pub use super::admin::hooks::issue;

use std::sync::Arc;

pub use binary::binary;
pub use lru::maxbytes;
pub use text::text;

use super::shards::Shards;
use super::shared::{Shared, WorkerCounters};
use crate::protocol::text::Limits;

/// What a command needs from its connection worker.
pub struct Env<'a> {
    /// The shards.
    pub shards: &'a Shards,
    /// Server-wide state.
    pub shared: &'a Arc<Shared>,
    /// This worker's counters.
    pub counters: &'a WorkerCounters,
    /// Parsing limits.
    pub limits: Limits,
}

/// Whether to go on reading commands from the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Parse the next command.
    Continue,
    /// Stop: the connection closes once its replies are out.
    Stop,
}
