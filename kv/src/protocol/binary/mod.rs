//! memcached's binary protocol.

pub mod header;
pub mod parse;
pub mod reply;
pub mod stat_key;

pub use header::{opcode, status, Header, HEADER_LEN, REQUEST, RESPONSE};
pub use parse::{parse, Frame, Parsed};
pub use reply::BinCtx;
pub use stat_key::{stat_group, StatGroup};
