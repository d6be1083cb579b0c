//! `lru_crawler metadump` and `stats cachedump`: a shard's live items in
//! memcached's line formats.

use std::io::Write;

use super::table::Segment;
use super::Shard;
use crate::store::item::{item_size, slab_class};
use crate::store::op::CACHEDUMP_MAX;

/// Appends `b` URI-encoded as memcached's `uriencode` does: letters,
/// digits and `-._~` stay, every other byte becomes `%XX`.
fn uriencode(b: &[u8], out: &mut Vec<u8>) {
    for &c in b {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            out.push(c);
        } else {
            write!(out, "%{c:02X}").expect("writing to a Vec cannot fail");
        }
    }
}

impl Shard {
    /// The metadump lines of the live items of `classes` (all if `None`)
    /// at relative time `now`: `key=… exp=… la=… cas=… fetch=… cls=…
    /// size=…`, each ending in a bare `\n` as memcached writes them.
    pub(super) fn dump(&self, classes: Option<&[u32]>, now: u32, started: i64) -> Vec<u8> {
        let mut out = Vec::new();
        // As memcached's crawler walks them: each segment from its tail.
        let items = Segment::ALL.into_iter().flat_map(|s| self.map.iter_segment_rev(s));
        for (key, it) in items {
            if (it.exptime != 0 && it.exptime < now) || self.is_flushed(it, now) {
                continue;
            }
            let size = item_size(key.len(), it.flags, it.data.len());
            let cls = slab_class(size, self.item_size_max);
            if classes.is_some_and(|c| !c.contains(&cls)) {
                continue;
            }
            out.extend_from_slice(b"key=");
            uriencode(key, &mut out);
            let exp = if it.exptime == 0 { -1 } else { i64::from(it.exptime) + started };
            writeln!(
                out,
                " exp={exp} la={} cas={} fetch={} cls={cls} size={size}",
                i64::from(it.time) + started,
                it.cas,
                if it.fetched { "yes" } else { "no" },
            )
            .expect("writing to a Vec cannot fail");
        }
        out
    }
}

impl Shard {
    /// The `stats cachedump` records of the live items of slab class
    /// `class` on COLD at relative time `now`, most recently used first: at most
    /// `limit` (0: no limit) and [`CACHEDUMP_MAX`] bytes of lines. Each is a
    /// little-endian `u32` length and the line `ITEM <key> [<bytes> b;
    /// <exptime> s]`, the expiry as a Unix time (0 for none). Items stored
    /// with a base64 key are left out, as memcached leaves them out.
    pub(super) fn cachedump(&self, class: u32, limit: u32, now: u32, started: i64) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut shown, mut bytes) = (0u32, 0usize);
        let mut line = Vec::new();
        // memcached dumps the COLD segment only (every item when the LRU
        // is not segmented).
        for (key, it) in self.map.iter_segment(Segment::Cold) {
            if limit != 0 && shown >= limit {
                break;
            }
            if (it.exptime != 0 && it.exptime < now) || self.is_flushed(it, now) || it.key_binary {
                continue;
            }
            if slab_class(item_size(key.len(), it.flags, it.data.len()), self.item_size_max) != class {
                continue;
            }
            let exp = if it.exptime == 0 { 0 } else { i64::from(it.exptime) + started };
            line.clear();
            line.extend_from_slice(b"ITEM ");
            line.extend_from_slice(key);
            write!(line, " [{} b; {exp} s]\r\n", it.data.len()).expect("writing to a Vec cannot fail");
            if bytes + line.len() + 6 > CACHEDUMP_MAX {
                break;
            }
            bytes += line.len();
            shown += 1;
            out.extend_from_slice(&(line.len() as u32).to_le_bytes());
            out.extend_from_slice(&line);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uriencode_like_memcached() {
        let mut v = Vec::new();
        uriencode(b"a-b.c_d~e%f g/\xff", &mut v);
        assert_eq!(v, b"a-b.c_d~e%25f%20g%2F%FF");
    }
}
