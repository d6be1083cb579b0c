//! One cached item, and memcached's accounting of its size.

/// Largest key, in bytes, both protocols accept.
pub const KEY_MAX: usize = 250;

/// Size of memcached's item header on a 64-bit system.
const ITEM_HEADER: usize = 48;
/// The CAS value stored with every item.
const CAS_SIZE: usize = 8;

/// The bytes memcached charges for an item: header, key plus NUL, flags
/// (only when non-zero), data plus `\r\n`, and the CAS value. Used for the
/// item size limit (`-I`), the memory limit (`-m`) and the `bytes` stat.
pub fn item_size(key_len: usize, flags: u32, data_len: usize) -> usize {
    let suffix = if flags == 0 { 0 } else { 4 };
    ITEM_HEADER + key_len + 1 + suffix + data_len + 2 + CAS_SIZE
}

/// Whether an item of this shape fits under `item_size_max`
/// (memcached's `item_size_ok`).
pub fn item_size_ok(key_len: usize, flags: u32, data_len: usize, item_size_max: usize) -> bool {
    item_size(key_len, flags, data_len) <= item_size_max
}

/// memcached's slab class id for an item of `size` bytes (see
/// [`item_size`]) with its default settings (`-n 48 -f 1.25`): chunk
/// sizes 96, 120, 152, ... up to half of `item_size_max`. Larger items
/// are counted in the largest class. Used where memcached reports `cls=`.
pub fn slab_class(size: usize, item_size_max: usize) -> u32 {
    let chunk_max = (item_size_max / 2) as f64;
    let mut chunk = ITEM_HEADER + 48;
    let mut id = 1;
    while id < 63 {
        if chunk as f64 >= chunk_max / 1.25 {
            break;
        }
        chunk = chunk.div_ceil(8) * 8;
        if size <= chunk {
            return id;
        }
        chunk = (chunk as f64 * 1.25) as usize;
        id += 1;
    }
    id
}

/// A stored value with its metadata.
#[derive(Debug, Clone)]
pub struct Item {
    /// The value, without the protocol's trailing `\r\n`.
    pub data: Vec<u8>,
    /// Opaque client flags.
    pub flags: u32,
    /// Relative expiration time; 0 means never.
    pub exptime: u32,
    /// Relative time of the last store or (coarse) access.
    pub time: u32,
    /// Unique CAS value.
    pub cas: u64,
    /// Whether a client has read it since it was stored.
    pub fetched: bool,
    /// Marked stale by a meta invalidation (`md I`, `ms I`).
    pub stale: bool,
    /// A meta get has handed out the recache token (`W`).
    pub token_sent: bool,
    /// Stored by a meta command with a base64 key (`b`): meta replies
    /// show its key in base64.
    pub key_binary: bool,
    /// The memcached slab class it is accounted to (set when stored).
    pub class: u8,
}

impl Item {
    /// A fresh item stored at relative time `now`, its CAS value to be
    /// assigned on insertion.
    pub fn new(data: Vec<u8>, flags: u32, exptime: u32, now: u32) -> Item {
        Item {
            data,
            flags,
            exptime,
            time: now,
            cas: 0,
            fetched: false,
            stale: false,
            token_sent: false,
            key_binary: false,
            class: 0,
        }
    }

    /// Size charged for this item under `key_len`.
    pub fn size(&self, key_len: usize) -> usize {
        item_size(key_len, self.flags, self.data.len())
    }

    /// Whether the item has expired at relative time `now`.
    pub fn expired(&self, now: u32) -> bool {
        self.exptime != 0 && self.exptime <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_classes_match_memcached() {
        // `memcached -vv` with default settings: 96, 120, 152, ... 394840,
        // then 524288 as class 39.
        let mb = 1 << 20;
        assert_eq!(slab_class(61, mb), 1);
        assert_eq!(slab_class(96, mb), 1);
        assert_eq!(slab_class(97, mb), 2);
        assert_eq!(slab_class(152, mb), 3);
        assert_eq!(slab_class(153, mb), 4);
        assert_eq!(slab_class(394_840, mb), 38);
        assert_eq!(slab_class(394_841, mb), 39);
        assert_eq!(slab_class(524_288, mb), 39);
    }

    #[test]
    fn sizes_match_memcached() {
        // memcached reports `bytes 61` for key "a" holding "x".
        assert_eq!(item_size(1, 0, 1), 61);
        // With -I 1m, memcached stores 1048516 bytes under key "a" and
        // rejects one more; with non-zero flags the limit is 4 bytes lower.
        assert!(item_size_ok(1, 0, 1_048_516, 1 << 20));
        assert!(!item_size_ok(1, 0, 1_048_517, 1 << 20));
        assert!(item_size_ok(1, 1, 1_048_512, 1 << 20));
        assert!(!item_size_ok(1, 1, 1_048_513, 1 << 20));
    }
}
