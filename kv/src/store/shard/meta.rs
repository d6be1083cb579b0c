//! The meta commands as a shard runs them, following memcached 1.6.18's
//! `proto_text.c` step by step: flags act and return values in the order
//! the client gave them, stats count as memcached counts them, and the
//! reply is rendered here because it depends on the item at each step.

use std::io::Write;

use super::{Item, Outcome, Shard};
use crate::base64;
use crate::clock;
use crate::store::item::{item_size, slab_class};
use crate::store::meta::{MetaFlag, MetaKind, MetaOp, OPAQUE_MAX};
use crate::store::op::StoreMode;

const OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long\r\n";
const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";

/// Appends ` k<key>`, base64-encoded with ` b` for binary keys.
fn key_flag(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    out.extend_from_slice(b" k");
    if binary {
        base64::encode_into(key, out);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// Appends ` <opaque>`, or fails if it is too long.
fn opaque_flag(out: &mut Vec<u8>, o: &[u8]) -> Result<(), ()> {
    if o.len() > OPAQUE_MAX {
        return Err(());
    }
    out.push(b' ');
    out.extend_from_slice(o);
    Ok(())
}

/// Appends ` t<remaining>` as memcached computes it (unsigned arithmetic).
fn ttl_flag(out: &mut Vec<u8>, exptime: u32, now: u32) {
    if exptime == 0 {
        out.extend_from_slice(b" t-1");
    } else {
        write!(out, " t{}", exptime.wrapping_sub(now)).expect("writing to a Vec cannot fail");
    }
}

/// Appends the return flags that need no item (`O`, `k`) for a reply
/// with no item; `Err` for a long opaque.
fn request_flags(out: &mut Vec<u8>, op: &MetaOp) -> Result<(), ()> {
    for f in &op.flags {
        match f {
            MetaFlag::Opaque(o) => opaque_flag(out, o)?,
            MetaFlag::Key => key_flag(out, &op.key, op.key_binary),
            _ => {}
        }
    }
    Ok(())
}

fn error(line: &[u8]) -> Outcome {
    Outcome::Meta(line.to_vec())
}

/// Flags whose presence makes memcached look the item up without
/// bumping it, and bump it after the reply is built.
fn locked(op: &MetaOp) -> bool {
    op.flags.iter().any(|f| {
        matches!(f, MetaFlag::Vivify | MetaFlag::SetTtl | MetaFlag::Recache | MetaFlag::LastAccess | MetaFlag::Hit)
    })
}

impl Shard {
    /// Runs a meta request at relative time `now`.
    pub(super) fn meta(&mut self, op: MetaOp, now: u32, started: i64) -> Outcome {
        let rt = |t: Option<i64>| clock::realtime(t.unwrap_or(0), now, started);
        match op.kind {
            MetaKind::Get => self.meta_get(&op, now, started),
            MetaKind::Set { mode, ref data } => {
                let exptime = rt(op.ttl);
                self.meta_set(&op, mode, data.clone(), exptime, now)
            }
            MetaKind::Delete => self.meta_delete(&op, now, started),
            MetaKind::Arith { incr } => self.meta_arith(&op, incr, now, started),
            MetaKind::Debug => self.meta_debug(&op, now),
            MetaKind::BadChunk => {
                self.stats.cmd_set += 1;
                error(b"CLIENT_ERROR bad data chunk\r\n")
            }
        }
    }

    /// The item's LRU bump on a fetch (as `get` does).
    fn touch_fetch(&mut self, key: &[u8], now: u32) {
        if let Some(slot) = self.map.find(key) {
            self.fetched(slot, now);
        }
    }

    fn meta_get(&mut self, op: &MetaOp, now: u32, started: i64) -> Outcome {
        let rt = |t: Option<i64>| clock::realtime(t.unwrap_or(0), now, started);
        let key = &op.key[..];
        let locked = locked(op);
        let mut found = self.live(key, now);
        let mut created = false;
        if found && !locked && !op.no_update {
            self.touch_fetch(key, now);
        }
        if !found && op.vivify.is_some() && self.insert(key.to_vec(), Item::new(Vec::new(), 0, 0, now), now).is_some() {
            found = true;
            created = true;
        }
        let mut out = Vec::new();
        if !found {
            self.stats.get_misses += 1;
            self.stats.cmd_get += 1;
            out.extend_from_slice(b"EN");
            if request_flags(&mut out, op).is_err() {
                return error(OPAQUE_TOO_LONG);
            }
            out.extend_from_slice(b"\r\n");
            if op.quiet {
                out.clear();
            }
            return Outcome::Meta(out);
        }
        let Some(it) = self.map.peek_mut(key) else { return Outcome::Failed };
        if op.value {
            write!(out, "VA {}", it.data.len()).expect("writing to a Vec cannot fail");
        } else {
            out.extend_from_slice(b"HD");
        }
        let mut won = false;
        let mut ttl_set = false;
        for f in &op.flags {
            match f {
                MetaFlag::SetTtl => {
                    ttl_set = true;
                    it.exptime = rt(op.ttl);
                }
                MetaFlag::Vivify => {
                    if created {
                        it.exptime = rt(op.vivify);
                        won = true;
                    }
                }
                MetaFlag::Recache => {
                    if !it.token_sent && !created && it.exptime != 0 && it.exptime < rt(op.recache) {
                        won = true;
                    }
                }
                MetaFlag::Size => write!(out, " s{}", it.data.len()).expect("writing to a Vec cannot fail"),
                MetaFlag::Ttl => ttl_flag(&mut out, it.exptime, now),
                MetaFlag::Cas => write!(out, " c{}", it.cas).expect("writing to a Vec cannot fail"),
                MetaFlag::Flags => write!(out, " f{}", it.flags).expect("writing to a Vec cannot fail"),
                MetaFlag::LastAccess => {
                    write!(out, " l{}", now.wrapping_sub(it.time)).expect("writing to a Vec cannot fail");
                }
                MetaFlag::Hit => out.extend_from_slice(if it.fetched { b" h1" } else { b" h0" }),
                MetaFlag::Opaque(o) => match opaque_flag(&mut out, o) {
                    Ok(()) => {}
                    Err(()) => return error(OPAQUE_TOO_LONG),
                },
                MetaFlag::Key => key_flag(&mut out, key, it.key_binary),
            }
        }
        if it.token_sent {
            out.extend_from_slice(b" Z");
        }
        if it.stale {
            out.extend_from_slice(b" X");
            if !it.token_sent {
                won = true;
            }
        }
        if won {
            out.extend_from_slice(b" W");
            it.token_sent = true;
        }
        out.extend_from_slice(b"\r\n");
        if op.value {
            out.extend_from_slice(&it.data);
            out.extend_from_slice(b"\r\n");
        }
        if locked && !op.no_update {
            self.touch_fetch(key, now);
        }
        if ttl_set {
            self.stats.cmd_touch += 1;
            self.stats.touch_hits += 1;
        } else {
            self.stats.get_hits += 1;
            self.stats.cmd_get += 1;
        }
        Outcome::Meta(out)
    }

    fn meta_set(&mut self, op: &MetaOp, mode: StoreMode, data: Vec<u8>, exptime: u32, now: u32) -> Outcome {
        let key = op.key.clone();
        let cas = op.cas.unwrap_or(0);
        let stale_old = if mode == StoreMode::Cas && op.invalidate && cas != 0 && self.live(&key, now) {
            self.map.peek(&key[..]).filter(|old| cas < old.cas).map(|old| (old.exptime, old.token_sent))
        } else {
            None
        };
        let outcome = match stale_old {
            Some((old_exptime, token_sent)) => {
                // A CAS value older than the item's: store, marked stale,
                // keeping the TTL and the token state.
                self.stats.cmd_set += 1;
                self.stats.cas_hits += 1;
                let item = Item { stale: true, token_sent, ..Item::new(data, op.client_flags, old_exptime, now) };
                match self.insert(key.clone(), item, now) {
                    Some(cas) => Outcome::Stored { cas },
                    None => Outcome::OutOfMemory,
                }
            }
            None => self.store(mode, key.clone(), op.client_flags, exptime, cas, data, now),
        };
        let (code, stored_cas): (&[u8], u64) = match outcome {
            Outcome::Stored { cas } => {
                if !matches!(mode, StoreMode::Append | StoreMode::Prepend) {
                    if let Some(it) = self.map.peek_mut(&key[..]) {
                        it.key_binary = op.key_binary;
                    }
                }
                (b"HD", cas)
            }
            Outcome::NotStored => (b"NS", 0),
            Outcome::Exists => (b"EX", 0),
            Outcome::NotFound => (b"NF", 0),
            Outcome::OutOfMemory => return error(b"SERVER_ERROR out of memory storing object\r\n"),
            _ => return Outcome::Failed,
        };
        if code == b"HD" && op.quiet {
            return Outcome::Meta(Vec::new());
        }
        let mut out = code.to_vec();
        for f in &op.flags {
            match f {
                MetaFlag::Opaque(o) => {
                    out.push(b' ');
                    out.extend_from_slice(o);
                }
                MetaFlag::Key => key_flag(&mut out, &key, op.key_binary),
                MetaFlag::Cas => write!(out, " c{stored_cas}").expect("writing to a Vec cannot fail"),
                _ => {}
            }
        }
        out.extend_from_slice(b"\r\n");
        Outcome::Meta(out)
    }

    fn meta_delete(&mut self, op: &MetaOp, now: u32, started: i64) -> Outcome {
        let key = &op.key[..];
        let mut code: &[u8] = b"NF";
        let mut skip = false;
        if self.live(key, now) {
            let cas = self.map.peek(key).map_or(0, |it| it.cas);
            if op.cas.is_some_and(|c| c != cas) {
                self.stats.delete_misses += 1;
                code = b"EX";
            } else if op.invalidate {
                let new_cas = self.next_cas();
                let exptime = op.ttl.map(|t| clock::realtime(t, now, started));
                if let Some(it) = self.map.peek_mut(key) {
                    if let Some(e) = exptime {
                        it.exptime = e;
                    }
                    it.stale = true;
                    it.token_sent = false;
                    it.cas = new_cas;
                }
                code = b"HD";
                skip = op.quiet;
            } else {
                self.stats.delete_hits += 1;
                self.remove(key);
                code = b"HD";
                skip = op.quiet;
            }
        } else {
            self.stats.delete_misses += 1;
        }
        if skip {
            return Outcome::Meta(Vec::new());
        }
        let mut out = code.to_vec();
        if request_flags(&mut out, op).is_err() {
            return error(OPAQUE_TOO_LONG);
        }
        out.extend_from_slice(b"\r\n");
        Outcome::Meta(out)
    }

    fn meta_arith(&mut self, op: &MetaOp, incr: bool, now: u32, started: i64) -> Outcome {
        let rt = |t: Option<i64>| clock::realtime(t.unwrap_or(0), now, started);
        let key = op.key.clone();
        let existed = self.live(&key, now);
        let old_len = self.map.peek(&key[..]).map_or(0, |it| it.data.len());
        let mut out = Vec::new();
        let (value, created) = if existed {
            match self.arith(key.clone(), incr, op.delta, None, op.cas.unwrap_or(0), now) {
                Outcome::Number { value, .. } => (value, false),
                Outcome::Exists => {
                    out.extend_from_slice(b"EX");
                    return self.arith_no_item(out, op);
                }
                Outcome::NonNumeric => return error(NON_NUMERIC),
                Outcome::OutOfMemory => return error(b"SERVER_ERROR out of memory\r\n"),
                _ => return Outcome::Failed,
            }
        } else if op.vivify.is_some() {
            let item = Item::new(op.initial.to_string().into_bytes(), 0, 0, now);
            if self.insert(key.clone(), item, now).is_none() {
                return error(b"SERVER_ERROR Out of memory allocating new item\r\n");
            }
            (op.initial, true)
        } else {
            if incr {
                self.stats.incr_misses += 1;
            } else {
                self.stats.decr_misses += 1;
            }
            out.extend_from_slice(b"NF");
            return self.arith_no_item(out, op);
        };
        let text = value.to_string();
        // memcached replaces a value that grew longer with a new item, and
        // a `T` then lands on the old one: the stored TTL stays.
        let in_place = created || text.len() <= old_len;
        let Some(it) = self.map.peek_mut(&key[..]) else { return Outcome::Failed };
        let mut exptime = it.exptime;
        if op.value {
            write!(out, "VA {}", text.len()).expect("writing to a Vec cannot fail");
        } else {
            out.extend_from_slice(b"HD");
        }
        for f in &op.flags {
            match f {
                MetaFlag::Cas => write!(out, " c{}", it.cas).expect("writing to a Vec cannot fail"),
                MetaFlag::Ttl => ttl_flag(&mut out, exptime, now),
                MetaFlag::SetTtl | MetaFlag::Vivify => {
                    if *f == MetaFlag::SetTtl {
                        exptime = rt(op.ttl);
                    } else if created {
                        exptime = rt(op.vivify);
                    }
                    if in_place {
                        it.exptime = exptime;
                    }
                }
                MetaFlag::Opaque(o) => match opaque_flag(&mut out, o) {
                    Ok(()) => {}
                    Err(()) => return error(OPAQUE_TOO_LONG),
                },
                MetaFlag::Key => key_flag(&mut out, &key, op.key_binary),
                _ => {}
            }
        }
        if op.value {
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(text.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        if op.quiet && !created {
            out.clear();
        }
        Outcome::Meta(out)
    }

    /// The rest of an `ma` reply without an item (`NF`, `EX`).
    fn arith_no_item(&self, mut out: Vec<u8>, op: &MetaOp) -> Outcome {
        if request_flags(&mut out, op).is_err() {
            return error(OPAQUE_TOO_LONG);
        }
        out.extend_from_slice(b"\r\n");
        Outcome::Meta(out)
    }

    fn meta_debug(&mut self, op: &MetaOp, now: u32) -> Outcome {
        self.stats.cmd_meta += 1;
        if !self.live(&op.key, now) {
            return Outcome::Meta(b"EN\r\n".to_vec());
        }
        let Some(it) = self.map.peek(&op.key[..]) else { return Outcome::Failed };
        let mut out = b"ME ".to_vec();
        if it.key_binary {
            base64::encode_into(&op.key, &mut out);
        } else {
            out.extend_from_slice(&op.key);
        }
        let exp = if it.exptime == 0 { -1 } else { now.wrapping_sub(it.exptime) as i32 };
        let size = item_size(op.key.len(), it.flags, it.data.len());
        write!(
            out,
            " exp={exp} la={} cas={} fetch={} cls={} size={size}\r\n",
            now.wrapping_sub(it.time),
            it.cas,
            if it.fetched { "yes" } else { "no" },
            slab_class(size, self.item_size_max),
        )
        .expect("writing to a Vec cannot fail");
        Outcome::Meta(out)
    }
}

#[cfg(test)]
mod tests;
