//! Commands of memcached's text protocol, as the parser hands them over.

use super::admin::Admin;
use crate::store::meta::MetaOp;
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
    /// `stats process N`: the general statistics of one process of a
    /// multi-process server (this server's own).
    Process(u32),
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
    /// A meta command (owned: its key may have been decoded).
    Meta(MetaCommand),
    /// A memory or crawler command (`cache_memlimit`, `lru_crawler`).
    Lru(LruCommand),
}

/// A parsed meta command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaCommand {
    /// `mn`: reply `MN`; memcached writes out every reply so far.
    NoOp,
    /// A request for the key's shard.
    Op(Box<MetaOp>),
    /// `ms` with a value over the item size limit: reply
    /// `SERVER_ERROR object too large for cache` and remove the old item.
    TooLarge {
        /// The key.
        key: Vec<u8>,
    },
}

/// A setting of the LRU crawler, for the whole program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CrawlerSetting {
    /// `lru_crawler sleep <microseconds>` between steps.
    Sleep(u32),
    /// `lru_crawler tocrawl <items>`: items per class a crawl checks at
    /// most (0: all).
    ToCrawl(u32),
}

/// Which slab classes `lru_crawler metadump` and `crawl` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrawlScope {
    /// `all`
    All,
    /// `hash`: a walk of the hash table.
    Hash,
    /// Listed class ids.
    Classes(Vec<u32>),
    /// A class list memcached refuses (`BADCLASS invalid class id`).
    Bad,
}

/// An administrative command that needs the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LruCommand {
    /// `cache_memlimit <megabytes>`
    MemLimit {
        /// The new limit in megabytes (8 to 1,000,000,000).
        megabytes: u32,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `lru_crawler metadump <scope>`
    MetaDump(CrawlScope),
    /// `lru_crawler crawl <scope>`
    Crawl(CrawlScope),
    /// `lru_crawler enable` / `disable`
    Crawler {
        /// Enable (true) or disable.
        enable: bool,
    },
    /// `lru_crawler sleep` / `tocrawl`
    CrawlerSetting(CrawlerSetting),
    /// `stats cachedump <class> <limit>`
    CacheDump {
        /// The slab class.
        class: u32,
        /// At most this many items (0: all).
        limit: u32,
    },
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
