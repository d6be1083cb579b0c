//! memcached's text ("ASCII") protocol.

pub mod admin;
pub mod command;
pub mod lru;
pub mod meta;
pub mod parse;
pub mod reply;

pub use admin::{Admin, Detail};
pub use command::{Command, CrawlScope, CrawlerSetting, LruCommand, MetaCommand, Parsed, StatsKind};
pub use parse::{parse, replies, Limits};
pub use reply::TextKind;
