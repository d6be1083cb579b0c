//! memcached's text ("ASCII") protocol.

pub mod command;
pub mod parse;
pub mod reply;

pub use command::{Command, Parsed, StatsKind};
pub use parse::{parse, replies, Limits};
pub use reply::TextKind;
