//! `cache_memlimit` and `lru_crawler`: commands for the whole table that
//! go to every shard.
//!
//! The crawler's settings (`enable`, `disable`, `sleep`, `tocrawl`) are the
//! program's: every process takes them. `crawl` starts a walk in every
//! shard of every process over the items of the classes named, reclaiming
//! the expired and flushed ones, counted as memcached's crawler counts
//! them; each shard's maintainer carries it on in the background, a
//! bounded step at a time (see the store's `shard/crawler.rs`).

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Env;
use crate::protocol::text::{replies, CrawlScope, LruCommand};
use crate::server::agent::AgentOp;
use crate::server::local::ConnShared;
use crate::server::outq::Reply;
use crate::server::shards::Scope;
use crate::store::op::CACHEDUMP_MAX;
use crate::store::{Op, Outcome};

/// The memory limit `cache_memlimit` last set, in bytes (0: none yet),
/// for `stats settings`.
static MAXBYTES: AtomicU64 = AtomicU64::new(0);

/// The memory limit for `stats settings`: the last `cache_memlimit`, or
/// `configured`.
pub fn maxbytes(configured: u64) -> u64 {
    match MAXBYTES.load(Ordering::Relaxed) {
        0 => configured,
        set => set,
    }
}

const DISABLED: &[u8] = b"CLIENT_ERROR lru crawler disabled\r\n";
const BADCLASS: &[u8] = b"BADCLASS invalid class id\r\n";
const NOTSTARTED: &[u8] = b"NOTSTARTED no items to crawl\r\n";
const UNKNOWN: &[u8] = b"ERROR an unknown error happened\r\n";
const PIPELINED: &[u8] = b"ERROR cannot pipeline other commands before metadump\r\n";
const START_FAILED: &[u8] = b"ERROR failed to start lru crawler thread\r\n";

/// The `stats cachedump` reply from the shards' records (see
/// [`Op::CacheDump`]): shard after shard, at most `limit` items (0: all)
/// and [`CACHEDUMP_MAX`] bytes, then `END`.
fn cachedump<'a>(shards: impl Iterator<Item = &'a Outcome>, limit: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut shown = 0u32;
    'shards: for o in shards {
        let Outcome::Meta(records) = o else { continue };
        let mut records = records.as_slice();
        while let Some((len, rest)) = records.split_first_chunk::<4>() {
            let len = u32::from_le_bytes(*len) as usize;
            let (line, rest) = rest.split_at(len);
            if (limit != 0 && shown >= limit) || out.len() + len + 6 > CACHEDUMP_MAX {
                break 'shards;
            }
            out.extend_from_slice(line);
            shown += 1;
            records = rest;
        }
    }
    out.extend_from_slice(replies::END);
    out
}

/// Handles one administrative command.
pub fn lru(env: &Env<'_>, conn: &Rc<ConnShared>, cmd: LruCommand) {
    let shards = env.shards;
    let crawler = &env.shared.admin.lru_crawler;
    match cmd {
        LruCommand::MemLimit { megabytes, noreply } => {
            let total = u64::from(megabytes) * 1024 * 1024;
            MAXBYTES.store(total, Ordering::Relaxed);
            // The limit is each process's, as `-m` is: the program's shards
            // share it times the process count.
            let total = total.saturating_mul(shards.processes() as u64);
            shards.broadcast(conn, Scope::All, Some(Op::MemLimit { total }), None, move |_| {
                if noreply {
                    Reply::Nothing
                } else {
                    Reply::Static(replies::OK)
                }
            });
        }
        LruCommand::Crawler { enable } => {
            // The setting is the program's: every process takes it.
            let was = crawler.load(Ordering::Relaxed);
            let reply = if enable && was { START_FAILED } else { replies::OK };
            shards.broadcast(conn, Scope::All, None, Some(AgentOp::Crawler(enable)), move |_| Reply::Static(reply));
        }
        LruCommand::CrawlerSetting(setting) => {
            shards.broadcast(conn, Scope::All, None, Some(AgentOp::CrawlerSetting(setting)), |_| {
                Reply::Static(replies::OK)
            });
        }
        LruCommand::Crawl(_) if !crawler.load(Ordering::Relaxed) => conn.push(Reply::Static(DISABLED)),
        LruCommand::Crawl(scope) => {
            let classes = match scope {
                CrawlScope::Bad => return conn.push(Reply::Static(BADCLASS)),
                CrawlScope::Hash => return conn.push(Reply::Static(UNKNOWN)),
                CrawlScope::Classes(ids) if ids.is_empty() => return conn.push(Reply::Static(NOTSTARTED)),
                CrawlScope::Classes(ids) => Some(ids),
                CrawlScope::All => None,
            };
            // Several connection workers may run crawls: an administrative
            // path, not a request's.
            env.shared.admin.crawls.fetch_add(1, Ordering::Relaxed);
            let tocrawl = env.shared.admin.crawler_tocrawl.load(Ordering::Relaxed);
            let op = Op::Crawl { classes, tocrawl };
            // Every shard starts its walk; every process's maintainers
            // carry it on in the background.
            shards.broadcast(conn, Scope::All, Some(op), Some(AgentOp::CrawlStarted), |_| Reply::Static(replies::OK));
        }
        LruCommand::CacheDump { class, limit } => {
            shards.broadcast(conn, Scope::All, Some(Op::CacheDump { class, limit }), None, move |g| {
                Reply::Bytes(cachedump(g.shards.iter(), limit))
            });
        }
        LruCommand::MetaDump(_) if !crawler.load(Ordering::Relaxed) => conn.push(Reply::Static(DISABLED)),
        LruCommand::MetaDump(scope) => {
            // memcached refuses a dump behind replies it has not sent yet.
            let behind = conn.out.borrow().has_stack();
            let classes = match scope {
                _ if behind => return conn.push(Reply::Static(PIPELINED)),
                CrawlScope::Bad => return conn.push(Reply::Static(BADCLASS)),
                CrawlScope::Classes(ids) if ids.is_empty() => return conn.push(Reply::Static(NOTSTARTED)),
                CrawlScope::Classes(ids) => Some(ids),
                CrawlScope::All | CrawlScope::Hash => None,
            };
            shards.broadcast(conn, Scope::All, Some(Op::Dump { classes }), None, |g| {
                let mut all = Vec::new();
                for o in g.shards {
                    if let Outcome::Meta(lines) = o {
                        all.extend_from_slice(&lines);
                    }
                }
                all.extend_from_slice(replies::END);
                Reply::Bytes(all)
            });
        }
    }
}
