//! Per-prefix counters (`stats detail`), as memcached's `stats_prefix.c`
//! keeps them: a key's prefix is what comes before the first delimiter
//! (keys without one are not counted), and `stats detail dump` lists the
//! prefixes by hash bucket, newest first within a bucket.
//!
//! The table is taken under a lock, and only while detail counting is on
//! (as memcached takes its stats lock); with counting off the request path
//! only reads one relaxed flag.

use std::io::Write as _;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use super::murmur3;

/// memcached's `PREFIX_HASH_SIZE`.
const BUCKETS: usize = 256;

#[derive(Debug, Default, Clone)]
struct Prefix {
    name: Vec<u8>,
    gets: u64,
    hits: u64,
    sets: u64,
    dels: u64,
}

/// The per-prefix counters.
#[derive(Debug)]
pub struct Detail {
    /// Bit 0: counting is on (the other bits are the log watchers').
    flags: Arc<AtomicU16>,
    delimiter: u8,
    /// Each bucket newest first.
    table: Mutex<Vec<Vec<Prefix>>>,
}

impl Detail {
    /// Counters split at `delimiter`, counting from the start if `enabled`;
    /// bit 0 of `flags` says whether counting is on.
    pub fn new(delimiter: u8, enabled: bool, flags: Arc<AtomicU16>) -> Detail {
        let d = Detail { flags, delimiter, table: Mutex::new(vec![Vec::new(); BUCKETS]) };
        d.set_enabled(enabled);
        d
    }

    /// Whether counting is on.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & 1 != 0
    }

    /// `stats detail on|off`.
    pub fn set_enabled(&self, on: bool) {
        if on {
            self.flags.fetch_or(1, Ordering::Relaxed);
        } else {
            self.flags.fetch_and(!1, Ordering::Relaxed);
        }
    }

    /// The delimiter (`-D`).
    pub fn delimiter(&self) -> u8 {
        self.delimiter
    }

    /// memcached's `stats_prefix_find`: the entry for `key`'s prefix,
    /// created if new; `None` if the key has no delimiter (before a NUL).
    fn with<F: FnOnce(&mut Prefix)>(&self, key: &[u8], f: F) {
        let Some(len) = key.iter().take_while(|&&b| b != 0).position(|&b| b == self.delimiter) else { return };
        let prefix = &key[..len];
        let bucket = murmur3::hash(prefix) as usize % BUCKETS;
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let list = &mut table[bucket];
        // memcached compares with strncmp over the new prefix's length.
        let found = list.iter().position(|p| p.name.len() >= len && &p.name[..len] == prefix);
        let i = found.unwrap_or_else(|| {
            list.insert(0, Prefix { name: prefix.to_vec(), ..Prefix::default() });
            0
        });
        f(&mut list[i]);
    }

    /// A get of `key`, found or not.
    pub fn record_get(&self, key: &[u8], hit: bool) {
        self.with(key, |p| {
            p.gets += 1;
            if hit {
                p.hits += 1;
            }
        });
    }

    /// A store of `key`.
    pub fn record_set(&self, key: &[u8]) {
        self.with(key, |p| p.sets += 1);
    }

    /// A delete of `key`.
    pub fn record_delete(&self, key: &[u8]) {
        self.with(key, |p| p.dels += 1);
    }

    /// `stats reset`: forgets every prefix.
    pub fn clear(&self) {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table.iter_mut().for_each(Vec::clear);
    }

    /// `stats detail dump`: `PREFIX` lines and `END`.
    pub fn dump(&self) -> Vec<u8> {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for p in table.iter().flatten() {
            out.extend_from_slice(b"PREFIX ");
            out.extend_from_slice(&p.name);
            write!(out, " get {} hit {} set {} del {}\r\n", p.gets, p.hits, p.sets, p.dels)
                .expect("writing to a Vec cannot fail");
        }
        out.extend_from_slice(b"END\r\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_like_memcached() {
        let d = Detail::new(b':', true, Arc::default());
        assert_eq!(d.dump(), b"END\r\n");
        d.record_set(b"foo:a");
        d.record_get(b"foo:a", true);
        d.record_get(b"foo:b", false);
        d.record_delete(b"foo:a");
        d.record_set(b"nodelim");
        d.record_set(b":x");
        assert_eq!(d.dump(), b"PREFIX  get 0 hit 0 set 1 del 0\r\nPREFIX foo get 2 hit 1 set 1 del 1\r\nEND\r\n");
        d.clear();
        assert_eq!(d.dump(), b"END\r\n");
    }

    #[test]
    fn counts_wait_for_earlier_dumps() {
        let d = Detail::new(b':', true, Arc::default());
        let mut h = Hold::default();
        let before = h.tag();
        h.issue_dump();
        // A store made after the dump was asked for, counted at once...
        let after = h.tag();
        h.record(&d, after, Record::Set(b"a:1".to_vec()));
        // ...and a get made before it, answered later.
        h.record(&d, before, Record::Get(b"a:1".to_vec(), false));
        assert_eq!(h.take_dump(&d), b"PREFIX a get 1 hit 0 set 0 del 0\r\nEND\r\n");
        assert_eq!(d.dump(), b"PREFIX a get 1 hit 0 set 1 del 0\r\nEND\r\n");
    }

    #[test]
    fn other_delimiter() {
        let d = Detail::new(b'-', true, Arc::default());
        d.record_set(b"a-b");
        d.record_set(b"a:b");
        assert_eq!(d.dump(), b"PREFIX a get 0 hit 0 set 1 del 0\r\nEND\r\n");
    }
}

/// One count, held back while an earlier `stats detail dump` of the same
/// connection is still waiting for the requests before it.
#[derive(Debug, Clone)]
pub enum Record {
    /// A get, found or not.
    Get(Vec<u8>, bool),
    /// A store.
    Set(Vec<u8>),
    /// A delete.
    Delete(Vec<u8>),
}

/// Keeps a connection's counts in command order around its dumps: a count
/// made after a dump was asked for waits until that dump is taken.
#[derive(Debug, Default)]
pub struct Hold {
    /// Dumps asked for.
    issued: u64,
    /// Dumps taken.
    done: u64,
    /// Counts waiting for dump number `.0`.
    held: Vec<(u64, Record)>,
}

impl Hold {
    /// The tag of a count made now: the dumps it must come after.
    pub fn tag(&self) -> u64 {
        self.issued
    }

    /// A dump is asked for.
    pub fn issue_dump(&mut self) {
        self.issued += 1;
    }

    /// Counts `r` (tagged `tag`) now, or holds it for a pending dump.
    pub fn record(&mut self, detail: &Detail, tag: u64, r: Record) {
        if tag <= self.done {
            detail.apply(&r);
        } else {
            self.held.push((tag, r));
        }
    }

    /// The oldest pending dump is taken: returns it, then applies the
    /// counts that were waiting for it.
    pub fn take_dump(&mut self, detail: &Detail) -> Vec<u8> {
        let out = detail.dump();
        self.done += 1;
        let done = self.done;
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held).into_iter().partition(|(t, _)| *t <= done);
        self.held = later;
        for (_, r) in now {
            detail.apply(&r);
        }
        out
    }
}

impl Detail {
    /// Applies one count.
    pub fn apply(&self, r: &Record) {
        match r {
            Record::Get(k, hit) => self.record_get(k, *hit),
            Record::Set(k) => self.record_set(k),
            Record::Delete(k) => self.record_delete(k),
        }
    }
}
