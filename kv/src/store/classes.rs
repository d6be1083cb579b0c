//! memcached's slab classes with its default settings (`-n 48`, `-f 1.25`,
//! 1 MiB pages, `slab_chunk_max` 512 KiB). This server does not allocate
//! from them, but accounts each item to the class memcached would put it
//! in, so that `stats items`, `stats slabs` and log lines name the same
//! classes and follow the memory items take.

use std::sync::OnceLock;

/// memcached's item header plus its default `-n` (minimum space).
const SMALLEST: u32 = 96;
/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES`.
const MAX_CLASSES: usize = 64;
/// memcached's `CHUNK_ALIGN_BYTES`.
const ALIGN: u32 = 8;
/// memcached's default growth factor (`-f`).
const FACTOR: f64 = 1.25;
/// memcached's default `slab_chunk_max` (half a page).
const CHUNK_MAX: u32 = 512 * 1024;
/// memcached's slab page size.
pub const PAGE_SIZE: u64 = 1 << 20;

fn build() -> Vec<u32> {
    let mut sizes = Vec::new();
    let mut size = SMALLEST;
    while sizes.len() + 2 < MAX_CLASSES {
        if f64::from(size) >= f64::from(CHUNK_MAX) / FACTOR {
            break;
        }
        if size % ALIGN != 0 {
            size += ALIGN - size % ALIGN;
        }
        sizes.push(size);
        size = (f64::from(size) * FACTOR) as u32;
    }
    sizes.push(CHUNK_MAX);
    sizes
}

/// Chunk sizes of classes 1, 2, ... (index 0 is class 1).
pub fn sizes() -> &'static [u32] {
    static SIZES: OnceLock<Vec<u32>> = OnceLock::new();
    SIZES.get_or_init(build)
}

/// memcached's `power_largest`: the highest class id.
pub fn largest() -> u32 {
    sizes().len() as u32
}

/// memcached's `slabs_clsid`: the class of an item of `ntotal` bytes (0
/// for none; items larger than the largest chunk, which memcached chains,
/// belong to the largest class).
pub fn clsid(ntotal: usize) -> u32 {
    if ntotal == 0 {
        return 0;
    }
    let s = sizes();
    (s.partition_point(|&c| (c as usize) < ntotal) + 1).min(s.len()) as u32
}

/// Chunks of class `id` per page.
pub fn per_page(id: u32) -> u64 {
    let size = u64::from(sizes()[id as usize - 1]);
    (PAGE_SIZE / size).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_match_memcached_defaults() {
        assert_eq!(sizes()[..4], [96, 120, 152, 192]);
        assert_eq!(largest(), 39);
        assert_eq!((clsid(0), clsid(61), clsid(96), clsid(97), clsid(161)), (0, 1, 1, 2, 4));
        assert_eq!(clsid(10 << 20), 39);
        // memcached: `1:chunks_per_page 10922`, `4:chunks_per_page 5461`.
        assert_eq!((per_page(1), per_page(4)), (10922, 5461));
    }
}
