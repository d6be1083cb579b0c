//! memcached's text ("ASCII") protocol.

pub mod admin;
pub mod command;
pub mod meta;
pub mod parse;
pub mod reply;

pub use command::{AdminCommand, Command, CrawlScope, MetaCommand, Parsed, StatsKind};
pub use parse::{parse, replies, Limits};
pub use reply::TextKind;
