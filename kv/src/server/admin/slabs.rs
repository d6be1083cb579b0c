//! memcached's slab classes, which this server does not allocate from but
//! names where memcached's replies do: the class id (`clsid`) of log
//! lines, and the range of class ids `slabs reassign` accepts.

/// memcached's item header plus its default `-n` (minimum space).
const SMALLEST: f64 = 96.0;
/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES`.
const MAX_CLASSES: usize = 64;
/// memcached's `CHUNK_ALIGN_BYTES`.
const ALIGN: u32 = 8;
/// memcached's default growth factor (`-f`).
const FACTOR: f64 = 1.25;
/// memcached's default `slab_chunk_max` (half a 1 MiB page).
const CHUNK_MAX: u32 = 512 * 1024;

/// Chunk sizes of classes 1, 2, ... as memcached's `slabs_init` makes them
/// with default settings.
pub fn class_sizes() -> Vec<u32> {
    let mut sizes = Vec::new();
    let mut size = SMALLEST as u32;
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

/// memcached's `power_largest`: the highest class id.
pub fn largest_class() -> i32 {
    class_sizes().len() as i32
}

/// memcached's `slabs_clsid`: the class of an item of `ntotal` bytes (0 for
/// none).
pub fn clsid(sizes: &[u32], ntotal: usize) -> u32 {
    if ntotal == 0 {
        return 0;
    }
    match sizes.iter().position(|&s| s as usize >= ntotal) {
        Some(i) => i as u32 + 1,
        None => sizes.len() as u32,
    }
}

/// memcached's reply to `slabs reassign <src> <dst>` when no class has a
/// page to spare (always so here: nothing is allocated by class).
pub fn reassign_reply(src: i32, dst: i32) -> &'static [u8] {
    let largest = largest_class();
    if src == dst {
        b"SAME src and dst class are identical\r\n"
    } else if !(0..=largest).contains(&src) || !(0..=largest).contains(&dst) {
        // memcached picks a source for -1 and finds none.
        b"BADCLASS invalid src or dst class id\r\n"
    } else {
        b"NOSPARE source class has no spare pages\r\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_match_memcached_defaults() {
        let sizes = class_sizes();
        assert_eq!(sizes[..4], [96, 120, 152, 192]);
        assert_eq!(largest_class(), 39);
        assert_eq!(clsid(&sizes, 61), 1);
        assert_eq!(clsid(&sizes, 97), 2);
        assert_eq!(clsid(&sizes, 10 << 20), 39);
        assert_eq!(reassign_reply(1, 1), b"SAME src and dst class are identical\r\n");
        assert_eq!(reassign_reply(40, 1), b"BADCLASS invalid src or dst class id\r\n");
        assert_eq!(reassign_reply(-1, 1), b"BADCLASS invalid src or dst class id\r\n");
        assert_eq!(reassign_reply(0, 39), b"NOSPARE source class has no spare pages\r\n");
    }
}
