//! Where requests meet the administrative features: per-prefix counting
//! and the `fetchers` and `mutations` log lines, as memcached produces
//! them where it handles a request.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use super::detail::Record;
use crate::clock;
use crate::protocol::text::admin::log;
use crate::server::dispatch::Env;
use crate::server::local::ConnShared;
use crate::server::outq::{Ctx, OnRender, Reply};
use crate::server::shared::Shared;
use crate::store::{item_size, Op, Outcome, StoreMode};

/// Delegates `op` to `shard` like `Shards::issue`, noting it for detail
/// stats and log watchers when either is on.
#[inline]
pub fn issue(env: &Env<'_>, conn: &Rc<ConnShared>, shard: usize, op: Op, ctx: Ctx) {
    if env.shared.admin.observing() {
        observed(env, conn, shard, op, ctx);
    } else {
        env.shards.issue(conn, shard, op, ctx);
    }
}

/// What a peek found: the live item's client flags and value length.
type Peeked = Option<(u32, u64)>;

/// What to note once the outcome is back.
enum Note {
    /// `detail`: the tag of a detail count, if the get is one; `log`: a
    /// fetchers watcher was there when the request was made.
    Get {
        detail: Option<u64>,
        log: bool,
        touch: bool,
    },
    Store {
        cmd: &'static str,
        append: bool,
        ttl: u32,
        flags: u32,
        size: usize,
    },
    /// A delete or incr/decr: only its lookup is logged (`fetchers`).
    Lookup,
}

fn cmd_name(mode: StoreMode) -> &'static str {
    match mode {
        StoreMode::Set => "set",
        StoreMode::Add => "add",
        StoreMode::Replace => "replace",
        StoreMode::Append => "append",
        StoreMode::Prepend => "prepend",
        StoreMode::Cas => "cas",
    }
}

/// memcached's `ttl=`: seconds left, 0 for none (wrapping as its unsigned
/// arithmetic does).
fn ttl(exptime: i64) -> u32 {
    let now = clock::now();
    match clock::realtime(exptime, now, clock::process_started()) {
        0 => 0,
        t => t.wrapping_sub(now),
    }
}

#[cold]
fn observed(env: &Env<'_>, conn: &Rc<ConnShared>, shard: usize, op: Op, ctx: Ctx) {
    let admin = &env.shared.admin;
    let text = !matches!(ctx, Ctx::Binary(_));
    let note = match &op {
        // The text protocol's touch is not a get for detail stats; the
        // binary protocol's is.
        Op::Get { value, .. } => {
            let counted = (!text || *value) && admin.detail.enabled();
            let log = admin.watchers.wants(log::FETCHERS);
            let touch = !*value;
            (counted || log).then(|| Note::Get { detail: counted.then(|| conn.detail.borrow().tag()), log, touch })
        }
        Op::Store { mode, key, flags, exptime, data, .. } => {
            if admin.detail.enabled() {
                record(env, conn, Record::Set(key.clone()));
            }
            (admin.watchers.wants(log::MUTATIONS) || admin.watchers.wants(log::FETCHERS)).then(|| Note::Store {
                cmd: cmd_name(*mode),
                append: matches!(mode, StoreMode::Append | StoreMode::Prepend),
                ttl: ttl(*exptime),
                flags: *flags,
                size: data.len(),
            })
        }
        Op::Delete { key, .. } => {
            if admin.detail.enabled() {
                record(env, conn, Record::Delete(key.clone()));
            }
            admin.watchers.wants(log::FETCHERS).then_some(Note::Lookup)
        }
        Op::Arith { .. } => admin.watchers.wants(log::FETCHERS).then_some(Note::Lookup),
        _ => None,
    };
    let Some(note) = note else { return env.shards.issue(conn, shard, op, ctx) };
    let key = match &op {
        Op::Store { key, .. } | Op::Delete { key, .. } | Op::Arith { key, .. } | Op::Get { key, .. } => key.clone(),
        _ => Vec::new(),
    };
    // A store, delete or incr/decr first looks the key up inside the cache,
    // and memcached's fetchers watchers see that lookup (and a stored
    // append the joined size; a touch the item's size): a peek at the same
    // shard, issued first, so it runs just before the request and its
    // answer comes back first.
    let peeked: Rc<Cell<Option<Peeked>>> = Rc::default();
    if !matches!(note, Note::Get { log: false, .. } | Note::Get { touch: false, .. }) {
        let cell = peeked.clone();
        env.shards.issue_then(conn, shard, Op::Peek { key: key.clone() }, move |_, outcome| {
            if let Outcome::Peeked(p) = outcome {
                cell.set(Some(p));
            }
        });
    }
    let shared = env.shared.clone();
    let cfd = conn.fd.get();
    let seq = conn.out.borrow_mut().reserve();
    env.shards.issue_then(conn, shard, op, move |c, outcome| {
        let log = note_outcome(&shared, c, note, key, &outcome, cfd, peeked.get());
        let reply = Reply::Outcome(outcome, ctx);
        c.complete(
            seq,
            match log {
                // Log lines go out as the replies do: in request order.
                Some(log) => Reply::Then(Box::new(reply), OnRender(log)),
                None => reply,
            },
        );
    });
}

/// Counts `r` for detail stats, in command order with the connection's
/// dumps.
fn record(env: &Env<'_>, conn: &ConnShared, r: Record) {
    let mut hold = conn.detail.borrow_mut();
    let tag = hold.tag();
    hold.record(&env.shared.admin.detail, tag, r);
}

/// Counts the outcome for detail stats now, and returns the log line to
/// write when its reply is rendered, if a watcher wants one.
fn note_outcome(
    shared: &Arc<Shared>,
    conn: &ConnShared,
    note: Note,
    key: Vec<u8>,
    outcome: &Outcome,
    cfd: i32,
    peeked: Option<Peeked>,
) -> Option<Box<dyn FnOnce()>> {
    let admin = &shared.admin;
    let shared = shared.clone();
    match note {
        Note::Get { detail, log, .. } => {
            let (key, hit) = match outcome {
                Outcome::Found(h) => (&h.key[..], Some(h)),
                Outcome::Missing(k) => (&k[..], None),
                _ => return None,
            };
            if let Some(tag) = detail {
                conn.detail.borrow_mut().record(&admin.detail, tag, Record::Get(key.to_vec(), hit.is_some()));
            }
            if !log {
                return None;
            }
            let (status, clsid, size) = match (hit, peeked) {
                // A touch reads no value: the size is the peek's.
                (Some(h), Some(Some((_, len)))) if h.data.is_empty() => {
                    ("found", admin.clsid(item_size(key.len(), h.flags, len as usize)), len as usize)
                }
                (Some(h), _) => ("found", admin.clsid(item_size(key.len(), h.flags, h.data.len())), h.data.len()),
                (None, _) => ("not_found", 0, 0),
            };
            let key = key.to_vec();
            Some(Box::new(move || {
                let w = &shared.admin.watchers;
                if w.wants(log::FETCHERS) {
                    w.item_get(&key, status, clsid, cfd, size);
                }
            }))
        }
        Note::Store { cmd, append, ttl, flags, size } => {
            let status = match outcome {
                Outcome::Stored { .. } => "stored",
                Outcome::NotStored => "not_stored",
                Outcome::Exists => "exists",
                Outcome::NotFound => "not_found",
                Outcome::OutOfMemory => "no_memory",
                _ => return None,
            };
            let lookup = lookup_line(admin, &key, peeked);
            // A stored append or prepend logs the joined value's size.
            let size = match peeked {
                Some(Some((_, old))) if append && status == "stored" => size + old as usize,
                _ => size,
            };
            let clsid = admin.clsid(item_size(key.len(), flags, size));
            Some(Box::new(move || {
                let w = &shared.admin.watchers;
                if let (Some((status, clsid, size)), true) = (lookup, w.wants(log::FETCHERS)) {
                    w.item_get(&key, status, clsid, cfd, size);
                }
                if w.wants(log::MUTATIONS) {
                    w.item_store(&key, status, cmd, ttl, clsid, cfd, size);
                }
            }))
        }
        Note::Lookup => {
            let (status, clsid, size) = lookup_line(admin, &key, peeked)?;
            Some(Box::new(move || {
                let w = &shared.admin.watchers;
                if w.wants(log::FETCHERS) {
                    w.item_get(&key, status, clsid, cfd, size);
                }
            }))
        }
    }
}

/// The `item_get` fields of a request's lookup inside the cache: status,
/// class and size of what the peek found.
fn lookup_line(admin: &super::AdminState, key: &[u8], peeked: Option<Peeked>) -> Option<(&'static str, u32, usize)> {
    match peeked? {
        Some((flags, len)) => Some(("found", admin.clsid(item_size(key.len(), flags, len as usize)), len as usize)),
        None => Some(("not_found", 0, 0)),
    }
}

/// A store refused as too large: a set for detail stats and, for the text
/// protocol, memcached's `too_large` line (whose fields it fills in
/// shifted: the descriptor, truncated to a byte, lands in `clsid=`).
pub fn too_large(env: &Env<'_>, conn: &ConnShared, key: &[u8], mode: Option<StoreMode>) {
    let admin = &env.shared.admin;
    if !admin.observing() {
        return;
    }
    if admin.detail.enabled() {
        record(env, conn, Record::Set(key.to_vec()));
    }
    if let Some(mode) = mode {
        if admin.watchers.wants(log::MUTATIONS) {
            let (shared, key, cfd) = (env.shared.clone(), key.to_vec(), conn.fd.get());
            let log = move || {
                let w = &shared.admin.watchers;
                w.item_store(&key, "too_large", cmd_name(mode), 0, u32::from(cfd as u8), 0, 0);
            };
            // After the replies before it, like the other lines.
            conn.push(Reply::Then(Box::new(Reply::Nothing), OnRender(Box::new(log))));
        }
    }
}

/// A connection opened, for `connevents` watchers.
pub fn conn_new(shared: &Shared, peer: Option<SocketAddr>, cfd: i32) {
    if shared.admin.watchers.wants(log::CONNEVENTS) {
        shared.admin.watchers.conn_new(peer, cfd);
    }
}

/// A connection closed, for `connevents` watchers (memcached closes a
/// watcher's connection as an error).
pub fn conn_close(shared: &Shared, peer: Option<SocketAddr>, error: bool, cfd: i32) {
    if shared.admin.watchers.wants(log::CONNEVENTS) {
        shared.admin.watchers.conn_close(peer, if error { "error" } else { "normal" }, cfd);
    }
}
