//! memcached's text ("ASCII") protocol.

pub mod admin;
pub mod command;
pub mod parse;
pub mod reply;

pub use admin::{Admin, Detail};
pub use command::{Command, Parsed, StatsKind};
pub use parse::{parse, replies, Limits};
pub use reply::TextKind;
