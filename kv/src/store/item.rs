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
    /// The memcached slab class it is accounted to (set when stored).
    pub class: u8,
}

impl Item {
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
