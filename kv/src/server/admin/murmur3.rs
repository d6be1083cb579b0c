//! MurmurHash3 (x86, 32-bit, seed 0): memcached's default hash, which
//! orders the prefixes of `stats detail dump`.

/// The 32-bit MurmurHash3 of `key`.
pub fn hash(key: &[u8]) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h: u32 = 0;
    let mut blocks = key.chunks_exact(4);
    for b in &mut blocks {
        let mut k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    let mut k: u32 = 0;
    for (i, &b) in tail.iter().enumerate() {
        k ^= u32::from(b) << (8 * i);
    }
    if !tail.is_empty() {
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    h ^= key.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

#[cfg(test)]
mod tests {
    use super::hash;

    #[test]
    fn reference_values() {
        assert_eq!(hash(b""), 0);
        assert_eq!(hash(b"hello"), 0x248b_fa47);
        assert_eq!(hash(b"The quick brown fox jumps over the lazy dog"), 0x2e4f_f723);
    }
}
