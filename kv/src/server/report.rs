//! The `stats` reports, written as text lines or binary packets.
//!
//! Names and order follow memcached 1.6.18. Where memcached reports on its
//! slab allocator, which this server does not have, `stats items` and
//! `stats slabs` describe all items as one class; keys of machinery this
//! server lacks have fixed values (see the README's "Statistics").

use std::fmt::Display;
use std::io::Write;
use std::sync::atomic::Ordering;

use super::agent::{AgentReply, ProcessStats};
use super::shards::{Gathered, Scope};
use super::shared::{ConnInfo, ConnState, ListenInfo, Shared};
use crate::clock;
use crate::protocol::binary::reply as bin_reply;
use crate::protocol::binary::BinCtx;
use crate::protocol::text::StatsKind;
use crate::store::shard::LruSettings;
use crate::store::{classes, ClassStats, Outcome, ShardStats};

/// The version this server reports.
pub const VERSION: &str = concat!("1.6.18-gossamer-kv-", env!("CARGO_PKG_VERSION"));

/// Where stats go.
pub trait Sink {
    /// One statistic.
    fn stat(&mut self, name: &str, value: &dyn Display);
    /// The end marker; returns the bytes.
    fn finish(self) -> Vec<u8>;
}

/// Text protocol: `STAT name value` lines and `END`.
#[derive(Default)]
pub struct TextSink(Vec<u8>);

impl Sink for TextSink {
    fn stat(&mut self, name: &str, value: &dyn Display) {
        write!(self.0, "STAT {name} {value}\r\n").expect("writing to a Vec cannot fail");
    }
    fn finish(mut self) -> Vec<u8> {
        self.0.extend_from_slice(b"END\r\n");
        self.0
    }
}

/// Binary protocol: a packet per stat and an empty one at the end.
pub struct BinSink {
    out: Vec<u8>,
    ctx: BinCtx,
    value: String,
}

impl BinSink {
    /// Packets answering the request `ctx`.
    pub fn new(ctx: BinCtx) -> BinSink {
        BinSink { out: Vec::new(), ctx, value: String::new() }
    }
}

impl Sink for BinSink {
    fn stat(&mut self, name: &str, value: &dyn Display) {
        use std::fmt::Write as _;
        self.value.clear();
        write!(self.value, "{value}").expect("writing to a String cannot fail");
        bin_reply::stat(&mut self.out, self.ctx, name.as_bytes(), self.value.as_bytes());
    }
    fn finish(mut self) -> Vec<u8> {
        bin_reply::stat(&mut self.out, self.ctx, b"", b"");
        self.out
    }
}

/// Sums the shards' counters.
pub fn sum(shards: &[ShardStats]) -> ShardStats {
    let mut total = ShardStats::default();
    for s in shards {
        total.add(s);
    }
    total
}

/// What a report covers: the shards' and the processes' counters, summed
/// over the processes asked.
#[derive(Debug, Default)]
pub struct Totals {
    /// The shards' counters.
    pub items: ShardStats,
    /// The processes' counters.
    pub process: ProcessStats,
    /// Processes covered.
    pub processes: usize,
    /// The one process covered, for `stats process N`.
    pub rank: Option<usize>,
}

impl Totals {
    /// Sums what a broadcast over `scope` gathered.
    pub fn gather(g: Gathered, scope: Scope) -> Totals {
        let shards: Vec<ShardStats> = g
            .shards
            .into_iter()
            .filter_map(|o| match o {
                Outcome::Stats(s) => Some(*s),
                _ => None,
            })
            .collect();
        let mut procs: Vec<ProcessStats> = g
            .processes
            .into_iter()
            .filter_map(|r| match r {
                AgentReply::Stats(p) => Some(*p),
                AgentReply::Done => None,
            })
            .collect();
        procs.sort_by_key(|p| p.rank);
        Totals {
            items: sum(&shards),
            process: ProcessStats::sum(&procs),
            processes: procs.len().max(1),
            rank: match scope {
                Scope::All => None,
                Scope::Rank(r) => Some(r),
            },
        }
    }
}

/// Writes report `kind` into `sink`.
pub fn write<S: Sink>(mut sink: S, kind: StatsKind, shared: &Shared, totals: &Totals) -> Vec<u8> {
    let items = &totals.items;
    match kind {
        StatsKind::General | StatsKind::Process(_) => general(&mut sink, shared, totals),
        StatsKind::Settings => settings(&mut sink, shared),
        StatsKind::Items => item_class(&mut sink, items, &shared.admin.lru),
        StatsKind::Slabs => slabs(&mut sink, items),
        StatsKind::Sizes => sizes(&mut sink, shared, items),
        StatsKind::Reset => {}
        StatsKind::Conns => return conns(sink, shared),
    }
    sink.finish()
}

/// What `stats` reports for memcached's libevent version: the event library
/// here is mio.
const EVENT_LIBRARY: &str = "mio";

/// memcached's `hash_power_level` and `hash_bytes` at start-up (fixed: the
/// shards' hash maps grow by themselves and report no power).
const HASH_POWER_LEVEL: u32 = 16;

/// Writes `0` for each of `names`: counters of memcached machinery that
/// this server does not have.
fn zeros<S: Sink>(s: &mut S, names: &[&str]) {
    for name in names {
        s.stat(name, &0);
    }
}

/// Seconds and microseconds, as memcached prints CPU time.
fn secs(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

/// `stats`: memcached 1.6.18's keys in its order (with its default
/// settings), then this server's own. Which values are fixed, and why, is
/// listed in the README. Counters are summed over the processes covered;
/// `uptime` and `time` come from the program's clock, the same in every
/// process; `pid` is the answering process's unless one process is asked
/// about.
fn general<S: Sink>(s: &mut S, shared: &Shared, totals: &Totals) {
    let st = &totals.items;
    let p = &totals.process;
    let c = &p.counters;
    let n = totals.processes as u64;
    let cfg = &shared.config;
    // The process asked about, or the one answering.
    s.stat("pid", &if totals.rank.is_some() { p.pid } else { std::process::id() });
    s.stat("uptime", &clock::uptime());
    s.stat("time", &clock::unix_now());
    s.stat("version", &VERSION);
    s.stat("libevent", &EVENT_LIBRARY);
    s.stat("pointer_size", &(usize::BITS));
    s.stat("rusage_user", &secs(p.rusage_user_us));
    s.stat("rusage_system", &secs(p.rusage_system_us));
    s.stat("max_connections", &(cfg.max_connections as u64 * n));
    s.stat("curr_connections", &p.curr_connections);
    s.stat("total_connections", &p.total_connections);
    s.stat("rejected_connections", &p.rejected_connections);
    s.stat("connection_structures", &p.curr_connections);
    zeros(s, &["response_obj_oom", "response_obj_count", "response_obj_bytes"]);
    s.stat("read_buf_count", &p.read_buf_count);
    s.stat("read_buf_bytes", &p.read_buf_bytes);
    zeros(s, &["read_buf_bytes_free", "read_buf_oom", "reserved_fds"]);
    s.stat("cmd_get", &st.cmd_get);
    s.stat("cmd_set", &st.cmd_set);
    s.stat("cmd_flush", &c.cmd_flush);
    s.stat("cmd_touch", &st.cmd_touch);
    s.stat("cmd_meta", &st.cmd_meta);
    s.stat("get_hits", &st.get_hits);
    s.stat("get_misses", &st.get_misses);
    s.stat("get_expired", &st.get_expired);
    s.stat("get_flushed", &st.get_flushed);
    s.stat("delete_misses", &st.delete_misses);
    s.stat("delete_hits", &st.delete_hits);
    s.stat("incr_misses", &st.incr_misses);
    s.stat("incr_hits", &st.incr_hits);
    s.stat("decr_misses", &st.decr_misses);
    s.stat("decr_hits", &st.decr_hits);
    s.stat("cas_misses", &st.cas_misses);
    s.stat("cas_hits", &st.cas_hits);
    s.stat("cas_badval", &st.cas_badval);
    s.stat("touch_hits", &st.touch_hits);
    s.stat("touch_misses", &st.touch_misses);
    s.stat("store_too_large", &c.store_too_large);
    s.stat("store_no_memory", &st.store_no_memory);
    s.stat("auth_cmds", &0);
    s.stat("auth_errors", &0);
    s.stat("bytes_read", &c.bytes_read);
    s.stat("bytes_written", &c.bytes_written);
    s.stat("limit_maxbytes", &st.limit_maxbytes);
    s.stat("accepting_conns", &1);
    s.stat("listen_disabled_num", &0);
    s.stat("time_in_listen_disabled_us", &0);
    s.stat("threads", &(cfg.threads as u64 * n));
    s.stat("conn_yields", &c.conn_yields);
    s.stat("hash_power_level", &HASH_POWER_LEVEL);
    s.stat("hash_bytes", &((1u64 << HASH_POWER_LEVEL) * 8));
    s.stat("hash_is_expanding", &0);
    zeros(
        s,
        &[
            "slab_reassign_rescues",
            "slab_reassign_chunk_rescues",
            "slab_reassign_evictions_nomem",
            "slab_reassign_inline_reclaim",
            "slab_reassign_busy_items",
            "slab_reassign_busy_deletes",
            "slab_reassign_running",
            "slabs_moved",
        ],
    );
    // As in memcached, the crawler's and the maintainer's keys are there
    // while they are on.
    if shared.admin.lru_crawler.load(Ordering::Relaxed) {
        s.stat("lru_crawler_running", &u8::from(st.crawling));
        s.stat("lru_crawler_starts", &p.crawls);
    }
    if shared.admin.lru_maintainer {
        s.stat("lru_maintainer_juggles", &p.juggles);
    }
    let segmented = shared.admin.lru.segmented;
    s.stat("malloc_fails", &0);
    log_stats(s, shared);
    zeros(s, &["unexpected_napi_ids", "round_robin_fallback"]);
    s.stat("bytes", &st.bytes);
    s.stat("curr_items", &st.curr_items);
    s.stat("total_items", &st.total_items);
    s.stat("slab_global_page_pool", &0);
    s.stat("expired_unfetched", &st.expired_unfetched);
    s.stat("evicted_unfetched", &st.evicted_unfetched);
    if segmented {
        s.stat("evicted_active", &st.classes.iter().map(|c| c.evicted_active).sum::<u64>());
    }
    s.stat("evictions", &st.evictions);
    s.stat("reclaimed", &st.reclaimed);
    s.stat("crawler_reclaimed", &st.crawler_reclaimed);
    s.stat("crawler_items_checked", &st.crawler_items_checked);
    s.stat("lrutail_reflocked", &0);
    if segmented {
        let sum = |f: fn(&ClassStats) -> u64| st.classes.iter().map(f).sum::<u64>();
        s.stat("moves_to_cold", &sum(|c| c.moves_to_cold));
        s.stat("moves_to_warm", &sum(|c| c.moves_to_warm));
        s.stat("moves_within_lru", &sum(|c| c.moves_within_lru));
        s.stat("direct_reclaims", &st.direct_reclaims);
        s.stat("lru_bumps_dropped", &0);
    }
    // This server's own, in `stats process N` only: plain `stats` has
    // exactly memcached's keys (its t/stats.t counts them). The program's
    // shards and processes are in `stats settings`.
    if let Some(rank) = totals.rank {
        s.stat("shards", &(cfg.shard_count() as u64 * n));
        s.stat("processes", &n);
        s.stat("rank", &rank);
    }
}

/// memcached's logger counters, from the log watchers.
fn log_stats<S: Sink>(s: &mut S, shared: &Shared) {
    let w = &shared.admin.watchers;
    s.stat("log_worker_dropped", &0);
    s.stat("log_worker_written", &w.written.load(Ordering::Relaxed));
    s.stat("log_watcher_skipped", &w.skipped.load(Ordering::Relaxed));
    s.stat("log_watcher_sent", &w.sent.load(Ordering::Relaxed));
    s.stat("log_watchers", &w.count());
}

/// `stats settings`: memcached 1.6.18's keys in its order (as the Debian
/// build, with extstore and TLS, prints them), then this server's own.
/// Settings of machinery this server does not have show memcached's
/// defaults (listed in the README).
fn settings<S: Sink>(s: &mut S, shared: &Shared) {
    let cfg = &shared.config;
    s.stat("maxbytes", &super::dispatch::maxbytes(cfg.memory_bytes()));
    s.stat("maxconns", &cfg.max_connections);
    s.stat("tcpport", &shared.addrs.first().map_or(cfg.port, |a| a.port()));
    s.stat("udpport", &cfg.udp_port);
    s.stat("inter", &cfg.listen);
    s.stat("verbosity", &shared.verbosity.load(Ordering::Relaxed));
    s.stat("oldest", &shared.oldest_live.load(Ordering::Relaxed));
    s.stat("evictions", &"on");
    s.stat("domain_socket", &"NULL");
    s.stat("umask", &"700");
    let admin = &shared.admin;
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    s.stat("shutdown_command", &yes_no(admin.shutdown_enabled));
    s.stat("growth_factor", &"1.25");
    s.stat("chunk_size", &48);
    s.stat("num_threads", &cfg.threads);
    s.stat("num_threads_per_udp", &cfg.threads);
    s.stat("stat_key_prefix", &char::from(admin.detail.delimiter()));
    s.stat("detail_enabled", &yes_no(admin.detail.enabled()));
    s.stat("reqs_per_event", &20);
    s.stat("cas_enabled", &"yes");
    s.stat("tcp_backlog", &cfg.backlog);
    s.stat("binding_protocol", &"auto-negotiate");
    s.stat("auth_enabled_sasl", &"no");
    s.stat("auth_enabled_ascii", &"no");
    s.stat("item_size_max", &cfg.item_size_max);
    s.stat("maxconns_fast", &"yes");
    s.stat("hashpower_init", &0);
    s.stat("slab_reassign", &yes_no(admin.slab_reassign));
    s.stat("slab_automove", &admin.slab_automove.load(Ordering::Relaxed));
    s.stat("slab_automove_ratio", &format!("{:.2}", admin.automove_ratio()));
    s.stat("slab_automove_window", &30);
    s.stat("slab_chunk_max", &524_288);
    s.stat("lru_crawler", &yes_no(admin.lru_crawler.load(Ordering::Relaxed)));
    s.stat("lru_crawler_sleep", &admin.crawler_sleep.load(Ordering::Relaxed));
    s.stat("lru_crawler_tocrawl", &admin.crawler_tocrawl.load(Ordering::Relaxed));
    s.stat("tail_repair_time", &0);
    s.stat("flush_enabled", &"yes");
    s.stat("dump_enabled", &"yes");
    s.stat("hash_algorithm", &"fnv1a");
    s.stat("lru_maintainer_thread", &yes_no(admin.lru_maintainer));
    let lru = &admin.lru;
    s.stat("lru_segmented", &yes_no(lru.segmented));
    s.stat("hot_lru_pct", &lru.hot_lru_pct);
    s.stat("warm_lru_pct", &lru.warm_lru_pct);
    s.stat("hot_max_factor", &format!("{:.2}", lru.hot_max_factor));
    s.stat("warm_max_factor", &format!("{:.2}", lru.warm_max_factor));
    s.stat("temp_lru", &yes_no(lru.temp_lru));
    s.stat("temporary_ttl", &lru.temporary_ttl);
    s.stat("idle_timeout", &0);
    s.stat("watcher_logbuf_size", &admin.watcher_logbuf_size);
    s.stat("worker_logbuf_size", &admin.worker_logbuf_size);
    s.stat("read_buf_mem_limit", &0);
    s.stat("track_sizes", &yes_no(admin.track_sizes.load(Ordering::Relaxed)));
    s.stat("inline_ascii_response", &"no");
    s.stat("ext_item_size", &512);
    s.stat("ext_item_age", &u32::MAX);
    s.stat("ext_low_ttl", &0);
    s.stat("ext_recache_rate", &2000);
    s.stat("ext_wbuf_size", &4_194_304);
    s.stat("ext_compact_under", &0);
    s.stat("ext_drop_under", &0);
    s.stat("ext_max_sleep", &1_000_000);
    s.stat("ext_max_frag", &"0.80");
    s.stat("slab_automove_freeratio", &"0.010");
    s.stat("ext_drop_unread", &"no");
    s.stat("ssl_enabled", &"no");
    s.stat("ssl_chain_cert", &"(null)");
    s.stat("ssl_key", &"(null)");
    s.stat("ssl_verify_mode", &0);
    s.stat("ssl_keyformat", &1);
    s.stat("ssl_ciphers", &"NULL");
    s.stat("ssl_ca_cert", &"NULL");
    s.stat("ssl_wbuf_size", &16_384);
    s.stat("ssl_session_cache", &"no");
    s.stat("ssl_kernel_tls", &"no");
    s.stat("ssl_min_version", &"tlsv1.2");
    s.stat("num_napi_ids", &"(null)");
    s.stat("memory_file", &"(null)");
    // This server's own.
    s.stat("processes", &shared.processes);
    s.stat("shards", &(cfg.shard_count() * shared.processes));
    s.stat("dedicated_trustees", &cfg.dedicated_trustees);
    s.stat("idle_spin_us", &cfg.idle_spin_us);
    s.stat("wait_spin_us", &cfg.wait_spin_us);
}

/// `stats conns`: each listening socket and client connection by
/// descriptor, as memcached lists them. The connections come from every
/// worker's registry (a lock per worker, taken here on the `stats` path
/// only); a connection opened or closed meanwhile may be missed or listed
/// in its last state, as in memcached, which reads its table unlocked.
pub fn conns<S: Sink>(mut sink: S, shared: &Shared) -> Vec<u8> {
    let now = clock::now();
    enum Entry {
        Listen(ListenInfo),
        Client(std::sync::Arc<ConnInfo>),
    }
    let mut all: Vec<(i32, Entry)> = shared.listeners.iter().map(|l| (l.fd, Entry::Listen(l.clone()))).collect();
    all.extend(shared.connections().into_iter().map(|c| (c.fd, Entry::Client(c))));
    all.sort_by_key(|(fd, _)| *fd);
    for (fd, e) in &all {
        let key = |field: &str| format!("{fd}:{field}");
        match e {
            Entry::Listen(l) => {
                sink.stat(&key("addr"), &l.addr);
                sink.stat(&key("state"), &ConnState::Listening.name());
                sink.stat(&key("secs_since_last_cmd"), &now.saturating_sub(shared.started));
            }
            Entry::Client(c) => {
                sink.stat(&key("addr"), &c.addr);
                sink.stat(&key("listen_addr"), &c.listen_addr);
                sink.stat(&key("state"), &c.state().name());
                sink.stat(&key("secs_since_last_cmd"), &c.idle_secs(now));
            }
        }
    }
    sink.finish()
}

/// The classes that hold items, with their ids.
fn used_classes(st: &ShardStats) -> impl Iterator<Item = (u32, &ClassStats)> {
    st.classes.iter().zip(1u32..).filter(|(c, _)| c.number > 0).map(|(c, id)| (id, c))
}

/// `stats items`: memcached's keys for each class that holds items. The
/// segments are per shard, not per class: `age_hot`, `age_warm` and `age`
/// (COLD's) are those of the oldest tail over the shards.
/// Without segments (`-o no_lru_maintainer` or `no_modern`) the
/// segments' keys are left out, as memcached does.
fn item_class<S: Sink>(s: &mut S, st: &ShardStats, lru: &LruSettings) {
    let segmented = lru.segmented;
    for (id, c) in used_classes(st) {
        let mut put = |name: &str, v: &dyn Display| s.stat(&format!("items:{id}:{name}"), v);
        put("number", &c.number);
        if segmented {
            put("number_hot", &c.segments[0]);
            put("number_warm", &c.segments[1]);
            put("number_cold", &c.segments[2]);
            if lru.temp_lru {
                put("number_temp", &c.segments[3]);
            }
            put("age_hot", &st.age_hot);
            put("age_warm", &st.age_warm);
        }
        put("age", &st.oldest_age);
        put("mem_requested", &c.mem_requested);
        put("evicted", &c.evicted);
        put("evicted_nonzero", &c.evicted_nonzero);
        put("evicted_time", &c.evicted_time);
        put("outofmemory", &c.outofmemory);
        put("tailrepairs", &0);
        put("reclaimed", &c.reclaimed);
        put("expired_unfetched", &c.expired_unfetched);
        put("evicted_unfetched", &c.evicted_unfetched);
        if segmented {
            put("evicted_active", &c.evicted_active);
        }
        put("crawler_reclaimed", &c.crawler_reclaimed);
        put("crawler_items_checked", &c.crawler_items_checked);
        put("lrutail_reflocked", &0);
        if segmented {
            put("moves_to_cold", &c.moves_to_cold);
            put("moves_to_warm", &c.moves_to_warm);
            put("moves_within_lru", &c.moves_within_lru);
            put("direct_reclaims", &c.direct_reclaims);
            for (name, n) in ["hits_to_hot", "hits_to_warm", "hits_to_cold", "hits_to_temp"].iter().zip(c.hits_to) {
                put(name, &n);
            }
        }
    }
}

/// `stats slabs`: memcached's keys for each class that holds items, with
/// the pages and chunks memcached's allocator would use for them (pages
/// are given back when items go, which memcached does only by moving
/// them), and `total_malloced` in whole pages.
fn slabs<S: Sink>(s: &mut S, st: &ShardStats) {
    let mut active = 0u64;
    let mut pages_total = 0u64;
    for (id, c) in used_classes(st) {
        let per_page = classes::per_page(id);
        let pages = c.number.div_ceil(per_page);
        active += 1;
        pages_total += pages;
        let mut put = |name: &str, v: &dyn Display| s.stat(&format!("{id}:{name}"), v);
        put("chunk_size", &classes::sizes()[id as usize - 1]);
        put("chunks_per_page", &per_page);
        put("total_pages", &pages);
        put("total_chunks", &(pages * per_page));
        put("used_chunks", &c.number);
        put("free_chunks", &(pages * per_page - c.number));
        put("free_chunks_end", &0);
        put("get_hits", &c.get_hits);
        put("cmd_set", &c.cmd_set);
        put("delete_hits", &c.delete_hits);
        put("incr_hits", &c.incr_hits);
        put("decr_hits", &c.decr_hits);
        put("cas_hits", &c.cas_hits);
        put("cas_badval", &c.cas_badval);
        put("touch_hits", &c.touch_hits);
    }
    s.stat("active_slabs", &active);
    s.stat("total_malloced", &(pages_total * classes::PAGE_SIZE));
}

/// `stats sizes`: with size tracking on (`-o track_sizes`,
/// `stats sizes_enable`), the number of items per 32-byte size bucket.
fn sizes<S: Sink>(s: &mut S, shared: &Shared, st: &ShardStats) {
    if !shared.admin.track_sizes.load(Ordering::Relaxed) {
        s.stat("sizes_status", &"disabled");
        return;
    }
    for (bucket, n) in st.sizes.iter().filter(|(_, &n)| n > 0) {
        s.stat(&(bucket * 32).to_string(), n);
    }
}
