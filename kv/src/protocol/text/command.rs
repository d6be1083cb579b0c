//! Commands of memcached's text protocol, as the parser hands them over.

use super::admin::Admin;
use crate::store::StoreMode;

/// Which `stats` report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsKind {
    /// `stats`
    General,
    /// `stats settings`
    Settings,
    /// `stats items`
    Items,
    /// `stats slabs`
    Slabs,
    /// `stats sizes`
    Sizes,
    /// `stats reset`
    Reset,
    /// `stats conns`
    Conns,
}

/// One parsed command. Slices borrow from the connection's read buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// get, gets, gat, gats. `keys` is the rest of the line: keys separated
    /// by spaces, each already checked to be at most 250 bytes.
    Get {
        /// Space-separated keys.
        keys: &'a [u8],
        /// Report CAS values (gets, gats).
        cas: bool,
        /// New expiration time (gat, gats).
        touch: Option<i32>,
    },
    /// set, add, replace, append, prepend, cas with its data block.
    Store {
        /// The mode.
        mode: StoreMode,
        /// The key.
        key: &'a [u8],
        /// Client flags.
        flags: u32,
        /// Client expiration time.
        exptime: i32,
        /// CAS value (cas only).
        cas: u64,
        /// The value, without the trailing `\r\n`.
        data: &'a [u8],
        /// Suppress the reply.
        noreply: bool,
    },
    /// A store whose item is over the size limit: reply
    /// `SERVER_ERROR object too large for cache`, discard the data, and for
    /// `set` remove the old item.
    TooLarge {
        /// The key.
        key: &'a [u8],
        /// The command was `set`.
        unlink: bool,
        /// Suppress the reply.
        noreply: bool,
    },
    /// delete
    Delete {
        /// The key.
        key: &'a [u8],
        /// Suppress the reply.
        noreply: bool,
    },
    /// incr, decr
    Arith {
        /// The key.
        key: &'a [u8],
        /// incr (true) or decr.
        incr: bool,
        /// The amount.
        delta: u64,
        /// Suppress the reply.
        noreply: bool,
    },
    /// touch
    Touch {
        /// The key.
        key: &'a [u8],
        /// New expiration time.
        exptime: i32,
        /// Suppress the reply.
        noreply: bool,
    },
    /// flush_all
    FlushAll {
        /// Delay (client expiration time); 0 for now.
        delay: i32,
        /// Suppress the reply.
        noreply: bool,
    },
    /// stats
    Stats(StatsKind),
    /// version
    Version,
    /// verbosity
    Verbosity {
        /// The new level (memcached caps it at 2).
        level: u32,
        /// Suppress the reply.
        noreply: bool,
    },
    /// quit: close the connection.
    Quit,
    /// A fixed reply (errors, `mn`, `stats detail`), unless `noreply`.
    Reply {
        /// The reply line, with `\r\n`.
        text: &'static [u8],
        /// Suppress the reply.
        noreply: bool,
    },
    /// An administrative command that needs the server's state.
    Admin {
        /// The command.
        cmd: Admin<'a>,
        /// Suppress the reply.
        noreply: bool,
    },
    /// Close the connection without a reply (an HTTP request line, a line
    /// too long to be a command).
    Close,
}

/// A command and how much input it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The command.
    pub command: Command<'a>,
    /// Bytes of input consumed.
    pub consumed: usize,
    /// Further input bytes to discard (the data of a refused store), which
    /// may not have arrived yet.
    pub swallow: usize,
}
