//! The table: shards of items, each owned by one trustee, and the requests
//! connection workers delegate to them.

pub mod classes;
pub mod events;
pub mod item;
pub mod meta;
pub mod op;
pub mod shard;
pub mod stats;

pub use item::{item_size, item_size_ok, slab_class, Item, KEY_MAX};
pub use op::{Hit, Op, Outcome, StoreMode};
pub use shard::{Shard, ShardConfig};
pub use stats::{ClassStats, ShardStats};

/// The shard that owns `key`, among `shards` (FNV-1a with a final mix, so
/// that it does not correlate with the shard's own hash map).
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h % shards.max(1) as u64) as usize
}
