//! The `stats` reports, written as text lines or binary packets.
//!
//! Names follow memcached 1.6. Where memcached reports on its slab
//! allocator, which this server does not have, `stats items` and
//! `stats slabs` describe all items as one class.

use std::fmt::Display;
use std::io::Write;
use std::sync::atomic::Ordering;

use super::shared::Shared;
use crate::clock;
use crate::protocol::binary::reply as bin_reply;
use crate::protocol::binary::BinCtx;
use crate::protocol::text::StatsKind;
use crate::store::ShardStats;

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

/// CPU time used by the process, as memcached prints it.
struct Rusage {
    user: String,
    system: String,
}

fn rusage() -> Rusage {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) } == 0;
    // SAFETY: zero-initialized, and filled in when `ok`.
    let ru = unsafe { ru.assume_init() };
    let fmt = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    if ok {
        Rusage { user: fmt(ru.ru_utime), system: fmt(ru.ru_stime) }
    } else {
        Rusage { user: "0.000000".into(), system: "0.000000".into() }
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

/// Writes report `kind` into `sink`.
pub fn write<S: Sink>(mut sink: S, kind: StatsKind, shared: &Shared, items: &ShardStats) -> Vec<u8> {
    match kind {
        StatsKind::General => general(&mut sink, shared, items),
        StatsKind::Settings => settings(&mut sink, shared),
        StatsKind::Items => item_class(&mut sink, items),
        StatsKind::Slabs => slabs(&mut sink, items),
        StatsKind::Sizes => sink.stat("sizes_status", &"disabled"),
        StatsKind::Reset => {}
    }
    sink.finish()
}

fn general<S: Sink>(s: &mut S, shared: &Shared, st: &ShardStats) {
    let c = shared.counters();
    let ru = rusage();
    let cfg = &shared.config;
    s.stat("pid", &std::process::id());
    s.stat("uptime", &clock::uptime());
    s.stat("time", &clock::unix_now());
    s.stat("version", &VERSION);
    s.stat("pointer_size", &(usize::BITS));
    s.stat("rusage_user", &ru.user);
    s.stat("rusage_system", &ru.system);
    s.stat("max_connections", &cfg.max_connections);
    s.stat("curr_connections", &shared.curr_connections.load(Ordering::Relaxed));
    s.stat("total_connections", &shared.total_connections.load(Ordering::Relaxed));
    s.stat("rejected_connections", &shared.rejected_connections.load(Ordering::Relaxed));
    s.stat("connection_structures", &shared.curr_connections.load(Ordering::Relaxed));
    s.stat("cmd_get", &st.cmd_get);
    s.stat("cmd_set", &st.cmd_set);
    s.stat("cmd_flush", &c.cmd_flush);
    s.stat("cmd_touch", &st.cmd_touch);
    s.stat("cmd_meta", &0);
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
    s.stat("limit_maxbytes", &cfg.memory_bytes());
    s.stat("accepting_conns", &1);
    s.stat("threads", &cfg.threads);
    s.stat("conn_yields", &c.conn_yields);
    s.stat("bytes", &st.bytes);
    s.stat("curr_items", &st.curr_items);
    s.stat("total_items", &st.total_items);
    s.stat("expired_unfetched", &st.expired_unfetched);
    s.stat("evicted_unfetched", &st.evicted_unfetched);
    s.stat("evictions", &st.evictions);
    s.stat("reclaimed", &st.reclaimed);
    s.stat("shards", &cfg.shard_count());
}

fn settings<S: Sink>(s: &mut S, shared: &Shared) {
    let cfg = &shared.config;
    s.stat("maxbytes", &cfg.memory_bytes());
    s.stat("maxconns", &cfg.max_connections);
    s.stat("tcpport", &shared.addrs.first().map_or(cfg.port, |a| a.port()));
    s.stat("udpport", &cfg.udp_port);
    s.stat("inter", &cfg.listen);
    s.stat("verbosity", &shared.verbosity.load(Ordering::Relaxed));
    s.stat("evictions", &"on");
    s.stat("num_threads", &cfg.threads);
    s.stat("cas_enabled", &"yes");
    s.stat("binding_protocol", &"auto-negotiate");
    s.stat("item_size_max", &cfg.item_size_max);
    s.stat("maxconns_fast", &"yes");
    s.stat("flush_enabled", &"yes");
    s.stat("dedicated_trustees", &cfg.dedicated_trustees);
    s.stat("idle_spin_us", &cfg.idle_spin_us);
    s.stat("wait_spin_us", &cfg.wait_spin_us);
}

fn item_class<S: Sink>(s: &mut S, st: &ShardStats) {
    if st.curr_items == 0 {
        return;
    }
    s.stat("items:1:number", &st.curr_items);
    s.stat("items:1:age", &st.oldest_age);
    s.stat("items:1:mem_requested", &st.bytes);
    s.stat("items:1:evicted", &st.evictions);
    s.stat("items:1:evicted_nonzero", &st.evicted_nonzero);
    s.stat("items:1:evicted_time", &st.evicted_time);
    s.stat("items:1:outofmemory", &st.store_no_memory);
    s.stat("items:1:reclaimed", &st.reclaimed);
    s.stat("items:1:expired_unfetched", &st.expired_unfetched);
    s.stat("items:1:evicted_unfetched", &st.evicted_unfetched);
}

fn slabs<S: Sink>(s: &mut S, st: &ShardStats) {
    if st.curr_items > 0 {
        s.stat("1:used_chunks", &st.curr_items);
        s.stat("1:get_hits", &st.get_hits);
        s.stat("1:cmd_set", &st.cmd_set);
        s.stat("1:delete_hits", &st.delete_hits);
        s.stat("1:incr_hits", &st.incr_hits);
        s.stat("1:decr_hits", &st.decr_hits);
        s.stat("1:cas_hits", &st.cas_hits);
        s.stat("1:cas_badval", &st.cas_badval);
        s.stat("1:touch_hits", &st.touch_hits);
    }
    s.stat("active_slabs", &u64::from(st.curr_items > 0));
    s.stat("total_malloced", &st.bytes);
}
